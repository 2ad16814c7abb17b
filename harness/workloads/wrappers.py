"""Multi-device wrappers, by the names cell ids use.

* ``none``            -- the model as built, on the default device;
* ``multi_gpu_model`` -- Keras' own, exactly as the installed version ships it,
  never patched (its failures are the findings);
* ``ratio``           -- seed 001: replica i gets floor(r_i * B / sum(r)) rows of
  each batch, the last replica the remainder, outputs concatenated on the CPU;
* ``make_parallel``   -- seed 002, faithfully: N equal slices of floor(B / N)
  rows, the remainder rows dropped, so a batch that N does not divide fails
  where the original failed;
* ``mirrored``        -- ``tf.distribute.MirroredStrategy`` (tf.keras from TF 1.14, Keras 3 on TF);
* ``data_parallel``   -- Keras 3 ``keras.distribution.DataParallel`` (JAX).

``ratio`` and ``make_parallel`` are re-implemented from the seeds' descriptions
and share one replication routine; only how a batch is cut differs. Where
Keras builds a static graph (TF 1, standalone Keras) the replicas are placed
the way the seeds did it, by device scopes around model construction; on TF 2
the placement lives inside a layer's call, because TF 2 Keras re-runs the
functional graph at fit time and would forget construction-time scopes.
"""
from .compat import Unsupported


class _NoScope(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def ratio_sizes(batch, ratios):
    """Rows per replica for a batch of `batch` rows (seed 001's rule)."""
    total = sum(ratios)
    sizes = [batch * r // total for r in ratios[:-1]]
    sizes.append(batch - sum(sizes))
    return sizes


def _ratio_bounds(ratios):
    total = sum(ratios)

    def bounds(batch, i):
        start = sum(batch * r // total for r in ratios[:i])
        stop = batch if i == len(ratios) - 1 else start + batch * ratios[i] // total
        return start, stop
    return bounds


def _equal_bounds(n):
    def bounds(batch, i):
        size = batch // n
        return i * size, (i + 1) * size
    return bounds


class Plan(object):
    """How one parallelism trains: build and compile inside `scope()`, then
    fit what `wrap(model)` returns, compiled with `compile_options`."""

    def __init__(self, stack, parallelism, trap=None):
        self.stack = stack
        self.name = parallelism["wrapper"]
        self.n = int(parallelism["devices"])
        self.ratios = [int(r) for r in (parallelism.get("ratios") or [1] * self.n)]
        self.compile_options = {}
        self.trap = trap
        self._scope = _NoScope()
        self.devices = None
        if self.name == "none":
            if self.n != 1:
                raise Unsupported("wrapper 'none' trains on one device, %d were asked" % self.n)
            return
        if self.n < 2 and self.name in ("ratio", "make_parallel"):
            raise Unsupported("%s splits batches across devices; it needs at least 2, %d asked"
                              % (self.name, self.n))
        self.devices = stack.replica_devices(self.n)
        if self.name == "mirrored":
            self.strategy = stack.mirrored_strategy(self.devices)
            self._scope = self.strategy.scope()
        elif self.name == "data_parallel":
            stack.set_data_parallel(self.devices)
            if trap == "clear_session":
                # Planted on purpose (a matrix's `trap:`): the known Keras 3 trap that silently
                # drops the distribution, so a "2-device" run trains on one. It must be caught.
                stack.clear()
        elif self.name in ("ratio", "make_parallel"):
            if not (stack.graph_mode or stack.tf is not None):
                raise Unsupported("%s places replicas with tf.device; the %s backend has none "
                                  "(its successor there is data_parallel)" % (self.name, stack.backend))
            self.compile_options = stack.compile_options()
        elif self.name == "multi_gpu_model":
            self._multi_gpu_model = stack.multi_gpu_model()
        else:
            raise Unsupported("unknown wrapper %r" % self.name)

    def scope(self):
        return self._scope

    def loss(self, loss):
        """The loss to compile with: `loss` itself, unless a matrix planted the trap of a
        replicated loss summed instead of averaged (`trap: loss_times_devices`): the loss,
        and so every gradient, N times what one device computes. Planted to prove that
        `harness diverge` finds a wrapper's scaling, never set by the harness on its own."""
        if self.trap != "loss_times_devices" or self.n < 2:
            return loss
        base, n = self.stack.keras.losses.get(loss), float(self.n)

        def summed_over_replicas(y_true, y_pred):
            return base(y_true, y_pred) * n
        return summed_over_replicas

    def wrap(self, model):
        if self.name in ("none", "mirrored", "data_parallel"):
            return model
        if self.name == "multi_gpu_model":
            return self._keras_multi_gpu_model(model)
        bounds = _ratio_bounds(self.ratios) if self.name == "ratio" else _equal_bounds(self.n)
        if self.stack.graph_mode:
            return _replicate_in_graph(self.stack, model, self.devices, bounds)
        return _replicate_in_layer(self.stack, model, self.devices, bounds)

    def _keras_multi_gpu_model(self, model):
        try:
            return self._multi_gpu_model(model, gpus=self.n)
        except ValueError as exc:
            if self.stack.device_kind == "cpu" and "expect the following devices" in str(exc):
                raise Unsupported("Keras' multi_gpu_model accepts GPUs only, these are virtual CPU "
                                  "devices: %s" % str(exc).splitlines()[0])
            raise


def _replicate_in_graph(stack, model, devices, bounds):
    """The seeds' construction: per device, slice the inputs and call the model
    under that device's scope; concatenate the outputs on the CPU."""
    tf = stack.tf
    layers = stack.keras.layers

    def take(x, index):
        start, stop = bounds(tf.shape(x)[0], index)
        return x[start:stop]

    outputs = []
    for i, device in enumerate(devices):
        with tf.device(device):
            with tf.name_scope("replica_%d" % i):
                sliced = [layers.Lambda(take, output_shape=tuple(x.get_shape().as_list()[1:]),
                                        arguments={"index": i})(x) for x in model.inputs]
                out = model(sliced if len(sliced) > 1 else sliced[0])
                outputs.append(out)
    with tf.device("/cpu:0"):
        merged = layers.concatenate(outputs, axis=0)
    return stack.keras.models.Model(model.inputs, merged)


def _replicate_in_layer(stack, model, devices, bounds):
    """The same replication on TF 2: the device scopes run inside the traced
    train step, where TF 2 honours them."""
    tf = stack.tf
    keras = stack.keras

    class Replicas(keras.layers.Layer):
        def __init__(self, inner, **kwargs):
            super(Replicas, self).__init__(**kwargs)
            self.inner = inner
            self.record_placement = False
            self.placed = None

        def call(self, x, training=None):
            batch = tf.shape(x)[0]
            outs = []
            for i, device in enumerate(devices):
                start, stop = bounds(batch, i)
                with tf.device(device):
                    outs.append(self.inner(x[start:stop], training=training))
            if self.record_placement and tf.executing_eagerly():
                self.placed = [o.device for o in outs]  # where each replica really ran (engagement)
            with tf.device("/cpu:0"):
                return tf.concat(outs, axis=0)

        def compute_output_shape(self, input_shape):
            try:
                return self.inner.compute_output_shape(input_shape)
            except NotImplementedError:
                # Keras 3.0-3.3's Functional has no compute_output_shape (Keras 3.4 added it);
                # the model, built from an Input, knows its output shape: the batch, then its own
                return (input_shape[0],) + tuple(self.inner.outputs[0].shape[1:])

    inputs = keras.layers.Input(shape=tuple(model.inputs[0].shape[1:]))
    return keras.models.Model(inputs, Replicas(model, name="replicas")(inputs))
