"""A cell of `harness diverge`: the model looked at layer by layer, in a neutral form.

The reference side builds the cell's model (a built-in one or the user's factory),
fixes one batch of its training data and writes what the other side needs: per-layer
configurations, weights (names and shapes, the arrays), the batch. A following side
builds its own model, puts the reference's weights into it layer by layer where they
fit, and runs the same batch. Both sides then write the same things:

* each layer's configuration, as plain JSON;
* each layer's output on the batch (inference mode);
* each weight's gradient, read as the update of one plain SGD step through the cell's
  wrapper (so a wrapper that scales or drops part of a batch shows), taken twice with
  two step sizes: the difference of the two readings is this method's own rounding;
* the loss curve of a short training from the same weights, the data in order.

Dropout and noise layers are set to zero in a twin of the model rebuilt from its own
configuration (the weights copied over), so the two sides' random masks cannot pass
for a difference; where the model cannot be rebuilt so, that is written down and the
backward and training parts say it. Arrays go to ``ARRAYS_FILE`` (.npz), the rest to
``LAYERS_FILE``; the host (harness/diverge.py) compares them. Python 3.5 syntax.
"""
import hashlib
import json
import os

from .compat import Unsupported, metric
from .protocol import DIVERGE_ARRAYS, DIVERGE_LAYERS, DIVERGE_REFERENCE, INPUTS_DIR, OUTPUT_DIR
from .user import Feed, _batches

STEPS = (1.0, 0.5)  # SGD learning rates of the two gradient readings
_RANDOM_KEYS = ("dropout", "recurrent_dropout")


class NotComparable(Exception):
    """What the follower found that makes a layer-by-layer comparison meaningless (its layers
    are not the reference's); written into its record for the host to say, not a crash."""


def run(stack, plan, spec, model, train, loss, log, record, outdir):
    how = spec["workload"]["diverge"]
    out = os.path.join(outdir, OUTPUT_DIR)
    if not os.path.isdir(out):
        os.makedirs(out)
    twin, zeroed, twin_note = _deterministic(model)
    layers = _layers(twin)
    arrays = {}
    doc = {"role": how["role"], "zeroed": zeroed, "twin": twin_note, "layers": [], "problem": None}
    if how["role"] == "reference":
        x, y = _batch(train, int(how.get("rows") or spec["batch_size"]))
    else:
        ref = _reference(outdir)
        x, y = ref["batch/x"], ref["batch/y"]
    arrays["batch/x"], arrays["batch/y"] = x, y
    for i, layer in enumerate(layers):
        weights = layer.get_weights()
        doc["layers"].append({"index": i, "name": layer.name, "class": type(layer).__name__,
                              "config": _plain(_config(layer)), "input_rank": _input_rank(layer),
                              "weights": [{"name": _weight_name(v), "shape": list(w.shape)}
                                          for v, w in zip(layer.weights, weights)],
                              "mapped": None})
    if how["role"] != "reference":
        try:
            _map(layers, doc["layers"], ref)
        except NotComparable as exc:
            doc["problem"] = str(exc)
            _write(out, doc, arrays)
            record["diverge"] = {"role": how["role"], "problem": doc["problem"]}
            return
    for i, layer in enumerate(layers):
        for j, w in enumerate(layer.get_weights()):
            arrays["w/%d/%d" % (i, j)] = w
    log.emit("diverge", role=how["role"], layers=len(layers), rows=int(len(x)))
    doc["forward"] = _forward(stack, twin, layers, x, arrays)
    trainable = plan.wrap(twin)
    start = [layer.get_weights() for layer in layers]
    doc["loss"] = None
    # the floor's run takes the batch's rows in reverse: the same sums, added in another order
    xs, ys = (x[::-1], y[::-1]) if how.get("reorder") else (x, y)
    for k, lr in enumerate(STEPS):
        trainable.compile(optimizer=stack.keras.optimizers.SGD(lr), loss=plan.loss(loss), **plan.compile_options)
        if k == 0:
            doc["loss"] = _scalar(trainable.test_on_batch(x, y))
        _one_step(trainable, xs, ys)
        for i, layer in enumerate(layers):
            for j, (before, after) in enumerate(zip(start[i], layer.get_weights())):
                arrays["g%d/%d/%d" % (k, i, j)] = (before.astype("float64") - after.astype("float64")) / lr
            layer.set_weights(start[i])
    try:
        doc["curve"], doc["curve_error"] = _curve(stack, plan, trainable, train, loss, spec, how), None
    except Exception as exc:  # noqa: BLE001 - the layers above are measured: keep them, say what failed
        doc["curve"], doc["curve_error"] = [], "%s: %s" % (type(exc).__name__, str(exc)[:300])
    doc["data_sha256"] = _digest(train)
    _write(out, doc, arrays)
    record["diverge"] = {"role": how["role"], "layers": len(layers), "rows": int(len(x)), "loss": doc["loss"]}


def _one_step(trainable, xs, ys):
    """One SGD step on the whole batch. TF 2.0-2.1's train_on_batch cannot step a model built in
    a MirroredStrategy's scope (its variables' handles exist only in a replica context); fit() on
    one batch of the same rows, in order, is the same step there."""
    try:
        trainable.train_on_batch(xs, ys)
    except ValueError:  # what else fails here fails in fit() too, and is said from there
        trainable.fit(xs, ys, batch_size=len(xs), epochs=1, shuffle=False, verbose=0)


def _reference(outdir):
    import numpy as np  # deferred: numpy is the stack's, imported with the framework
    path = os.path.join(outdir, INPUTS_DIR, DIVERGE_REFERENCE, DIVERGE_ARRAYS)
    with np.load(path, allow_pickle=False) as data:
        ref = dict((k, data[k]) for k in data.files)
    with open(os.path.join(outdir, INPUTS_DIR, DIVERGE_REFERENCE, DIVERGE_LAYERS)) as fh:
        ref["layers"] = json.load(fh)["layers"]
    return ref


def _write(out, doc, arrays):
    import numpy as np  # deferred: numpy is the stack's, imported with the framework
    np.savez(os.path.join(out, DIVERGE_ARRAYS), **arrays)
    with open(os.path.join(out, DIVERGE_LAYERS), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)


# -- the model: a twin without randomness, its layers, their configurations -------------
def _zero_random(value, class_name=""):
    """`value` (a config) with dropout and noise set to 0; the keys that were changed."""
    changed = []
    if isinstance(value, dict):
        cls = value.get("class_name", class_name)
        for key in list(value):
            item = value[key]
            random_key = key in _RANDOM_KEYS or (key == "rate" and "Dropout" in str(class_name)) or \
                (key == "stddev" and "GaussianNoise" in str(class_name))
            if random_key and isinstance(item, (int, float)) and not isinstance(item, bool) and item > 0:
                value[key] = 0.0
                changed.append(key)
            elif isinstance(item, (dict, list)):
                changed.extend(_zero_random(item, cls if key == "config" else ""))
    elif isinstance(value, list):
        for item in value:
            changed.extend(_zero_random(item))
    return changed


def _deterministic(model):
    """(twin, zeroed layer names, note): the model rebuilt from its configuration with dropout
    and noise at 0 and the same weights; the model itself when nothing is random or it cannot
    be rebuilt (the note says why)."""
    try:
        config = model.get_config()
    except Exception as exc:  # noqa: BLE001 - a subclassed model has no config: say so
        return model, [], "kept as built: get_config failed (%s)" % type(exc).__name__
    layer_configs = config.get("layers", []) if isinstance(config, dict) else config
    zeroed = []
    for layer in layer_configs:
        if isinstance(layer, dict) and _zero_random(layer.get("config"), layer.get("class_name", "")):
            zeroed.append(layer.get("config", {}).get("name") or layer.get("class_name"))
    if not zeroed:
        return model, [], None
    try:
        twin = type(model).from_config(config)
        twin.set_weights(model.get_weights())
    except Exception as exc:  # noqa: BLE001 - a custom layer unknown to from_config: keep the model
        return model, [], "kept as built, dropout on: rebuilding from its configuration failed (%s: %s)" % (
            type(exc).__name__, str(exc)[:200])
    return twin, zeroed, None


def _layers(model):
    return [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]


def _config(layer):
    try:
        return layer.get_config()
    except Exception as exc:  # noqa: BLE001 - a custom layer without get_config: say so
        return {"<get_config failed>": type(exc).__name__}


def _input_rank(layer):
    """The rank of the layer's input, batch axis included, or None where the model does not say:
    what an axis in its configuration counts against (the host makes -1 and [2] one axis of a
    3-D input, harness/layerdiff.py). A layer of several inputs: the first's (they share a rank
    wherever an axis is given, as Concatenate's)."""
    try:
        tensor = layer.input
        if isinstance(tensor, (list, tuple)):
            tensor = tensor[0]
        return int(len(tensor.shape))
    except Exception:  # noqa: BLE001 - no single input, a shape of unknown rank: no rank, said as None
        return None


def _plain(value):
    """A configuration as plain JSON: numbers, strings, lists and mappings; anything else by name."""
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    name = getattr(value, "__name__", None) or getattr(value, "name", None)
    return "<%s %s>" % (type(value).__name__, name) if isinstance(name, str) else "<%s>" % type(value).__name__


def _weight_name(variable):
    name = getattr(variable, "path", None) or getattr(variable, "name", "")
    return str(name).split(":")[0].split("/")[-1]


# -- the follower's weights: the reference's, layer by layer ------------------------------
def _map(layers, docs, ref):
    import numpy as np  # deferred: numpy is the stack's, imported with the framework
    theirs = ref["layers"]
    if len(theirs) != len(layers):
        raise NotComparable(
            "the models differ in their layers: the reference has %d (%s), this side %d (%s)"
            % (len(theirs), _names(theirs), len(layers), _names(docs)))
    for i, (layer, mine, their) in enumerate(zip(layers, docs, theirs)):
        arrays = [ref["w/%d/%d" % (i, j)] for j in range(len(their["weights"]))]
        shapes = [list(a.shape) for a in arrays]
        own = [w["shape"] for w in mine["weights"]]
        if not own and not shapes:
            mine["mapped"] = "no weights"
        elif own == shapes:
            layer.set_weights([a.astype(np.asarray(w).dtype) for a, w in zip(arrays, layer.get_weights())])
            mine["mapped"] = "one to one"
        else:
            mine["mapped"] = "cannot map: the reference's weights have shapes %s, this layer's %s" % (shapes, own)


def _names(docs, shown=8):
    names = ["%s(%s)" % (d["name"], d["class"]) for d in docs]
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


# -- what is measured ---------------------------------------------------------------------
def _batch(train, rows):
    """The first `rows` rows of the training data (arrays), or the first batch of a feed."""
    import numpy as np  # deferred: numpy is the stack's, imported with the framework
    if isinstance(train, Feed):
        first = next(iter(_batches(train.source)))
        x, y = first[0], first[1]
    else:
        x, y = train[0][:rows], train[1][:rows]
    if isinstance(x, (list, tuple, dict)) or isinstance(y, (list, tuple, dict)):
        raise Unsupported("diverge compares models with one input array and one label array")
    return np.asarray(x), np.asarray(y)


def _forward(stack, model, layers, x, arrays):
    """Each layer's output on `x` (inference mode), where a layer has one output tensor."""
    import numpy as np  # deferred: numpy is the stack's, imported with the framework
    tensors, notes = [], {}
    for i, layer in enumerate(layers):
        try:
            out = layer.output
        except Exception as exc:  # noqa: BLE001 - a shared layer has several outputs: say so
            notes[str(i)] = "no single output (%s)" % type(exc).__name__
            continue
        if isinstance(out, (list, tuple)):
            notes[str(i)] = "several outputs"
            continue
        tensors.append((i, out))
    if not tensors:
        return {"notes": notes}
    lens = stack.keras.models.Model(model.inputs, [t for _, t in tensors])
    got = lens.predict(x, batch_size=len(x), verbose=0)
    if len(tensors) == 1:
        got = [got]
    for (i, _), value in zip(tensors, got):
        arrays["out/%d" % i] = np.asarray(value)
    return {"notes": notes}


def _curve(stack, plan, trainable, train, loss, spec, how):
    """Per-epoch loss from the shared weights, the data in order (no shuffle), whole batches
    only: a last short batch is cut, so that no side fails or differs on its remainder alone
    (the ordinary run of the cell says what a remainder does). The floor's run (`reorder`) takes
    each batch's rows in reverse: the same training, its sums added in another order, so the
    curves' own scatter -- float rounding, amplified by training -- is measured, not assumed."""
    epochs = int(how.get("epochs") or spec["epochs"])
    trainable.compile(optimizer=stack.adam(float(spec["workload"].get("learning_rate", 0.001))),
                      loss=plan.loss(loss), metrics=["accuracy"], **plan.compile_options)
    if isinstance(train, Feed):
        hist = trainable.fit(train.source, epochs=epochs, verbose=0)
    else:
        batch = int(spec["batch_size"])
        whole = max(batch, len(train[0]) // batch * batch)
        x, y = train[0][:whole], train[1][:whole]
        if how.get("reorder") and whole % batch == 0:  # each batch's rows reversed: its sums in another order
            x, y = (a.reshape((whole // batch, batch) + a.shape[1:])[:, ::-1].reshape(a.shape) for a in (x, y))
        hist = trainable.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0)
    logs = hist.history
    return [{"epoch": e + 1, "loss": metric(dict((k, v[e]) for k, v in logs.items()), "loss"),
             "accuracy": metric(dict((k, v[e]) for k, v in logs.items()), "accuracy")}
            for e in range(len(logs.get("loss", [])))]


def _digest(train):
    if isinstance(train, Feed):
        return None
    h = hashlib.sha256()
    for a in train:
        h.update(a.tobytes())
    return h.hexdigest()


def _scalar(value):
    if isinstance(value, (list, tuple)):
        value = value[0]
    return float(value)
