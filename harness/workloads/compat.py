"""Every TensorFlow / Keras version difference, in one place.

The rest of the workloads package talks to a :class:`Stack` and never asks
which version it runs on. Four API families exist (the host's stacks.KERAS_APIS):

* ``standalone`` -- standalone Keras 2.x (``import keras``) on TF 1.x or TF 2.x;
* ``tf.keras``   -- the Keras bundled with TensorFlow (``tensorflow.keras``);
* ``tf_keras``   -- the legacy Keras 2 behind ``tf.keras`` on TF >= 2.16, which the
  host switches on with TF_USE_LEGACY_KERAS=1;
* ``keras3``     -- Keras 3 on a chosen backend (tensorflow, jax or torch).

Which Keras really ran is checked against the one asked (:meth:`Stack.check_keras`):
a forced pin or a stray variable can make TensorFlow load another one, and a
result that says ``ok`` for the wrong Keras is worse than an error.

Device set-up has to happen *before* the first model is built (TF 1 fixes the
device list when the session is created; TF 2 refuses logical-device changes
once the runtime is initialised; JAX reads XLA_FLAGS at import), so
:func:`load` does it while importing.
"""
import contextlib
import importlib
import importlib.util
import os
import platform
import sys

from .protocol import ENV_STACK_BYTECODE, MIRRORED_NEEDS, NO_CUDNN, cuda_version_text, cudnn_version_text


@contextlib.contextmanager
def stack_bytecode():
    """While the stack is imported, let Python write the bytecode of what it compiles, where the
    host says the environment is its own (ENV_STACK_BYTECODE: a virtualenv of the harness's
    cache). Cells run with PYTHONDONTWRITEBYTECODE=1, so nothing lands in the user's folders; but
    a virtualenv is built without bytecode, and every process then compiled its stack again --
    TensorFlow 2.15's import takes 7 s of CPU from source and 3 s from bytecode. Only the stack's
    import writes (the first process to import a module, atomically, as Python always does); the
    user's code, imported later, never does. A read-only environment is no error: Python skips."""
    wanted = os.environ.get(ENV_STACK_BYTECODE) == "1"
    before = sys.dont_write_bytecode
    if wanted:
        sys.dont_write_bytecode = False
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


class Unsupported(Exception):
    """The environment lacks what the cell needs; the cell is `unsupported`."""


class KerasMismatch(Exception):
    """The Keras that runs is not the one the environment asked for; the cell is an `error`."""


API_LABELS = {"standalone": "standalone keras", "tf.keras": "tf.keras", "tf_keras": "tf_keras",
              "keras3": "keras3"}


def running_api(module, version):
    """Which Keras family a loaded module is, from its name and version: tf.keras is a proxy
    whose name says what stands behind it (``keras.api._v2.keras`` on TF 2.6-2.15,
    ``tf_keras...`` with TF_USE_LEGACY_KERAS, ``tensorflow.python.keras`` before 2.6)."""
    top = module.split(".")[0]
    if top == "tf_keras":
        return "tf_keras"
    if top == "tensorflow":
        return "tf.keras"
    if major(version) >= 3:
        return "keras3"
    return "standalone" if module == "keras" else "tf.keras"


def keras_mismatch(asked_api, asked_version, module, version):
    """Why the running Keras is not the asked one, or None when it is. tf.keras on TF >= 2.16
    *is* Keras 3, so asking tf.keras and running keras3 is no mismatch."""
    ran = running_api(module, version)
    same_api = ran == asked_api or (asked_api == "tf.keras" and ran == "keras3")
    same_version = not asked_version or \
        (_version_tuple(asked_version) + (0, 0, 0))[:3] == (_version_tuple(version or "") + (0, 0, 0))[:3]
    if same_api and same_version:
        return None
    return "asked %s %s, ran %s %s (module %s)" % (
        API_LABELS.get(asked_api, asked_api), asked_version or "(any version)",
        API_LABELS.get(ran, ran), version, module)


def major(version):
    """A version's major number (0 when it has none: a missing or odd version)."""
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return 0


def _version_tuple(version):
    out = []
    for part in str(version).split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        out.append(int(digits or 0))
    return tuple(out)


def nvidia_driver():
    """The NVIDIA kernel driver's version, or None on a host without one."""
    try:
        with open("/proc/driver/nvidia/version") as fh:
            line = fh.readline()
    except (IOError, OSError):
        return None
    for token in line.split():
        if token[:1].isdigit() and "." in token:
            return token
    return None


def set_variables(api, backend, device_kind, device_count):
    """The variables a stack reads at import (or at backend start): the Keras 3 backend, and JAX's
    count of virtual CPU devices. Idempotent, so a warm launcher (``forkserver``) can set them
    before its imports and the cell again in :func:`load`."""
    if api != "keras3":
        return
    os.environ["KERAS_BACKEND"] = backend or "tensorflow"
    if backend == "jax" and device_kind == "cpu":
        flag = "--xla_force_host_platform_device_count=%d" % device_count
        flags = os.environ.get("XLA_FLAGS", "")
        if flag not in flags.split():
            os.environ["XLA_FLAGS"] = (flags + " " + flag).strip()


class Stack(object):
    """The imported deep-learning stack of one environment, ready to use."""

    def __init__(self, api, backend, device_kind, device_count):
        self.api = api
        self.backend = backend
        self.device_kind = device_kind
        self.device_count = device_count
        self.tf = None
        self.keras = None
        self.variable_names = list(KERAS_SWITCHES)  # reported by seen(): the environment's `env:` and switches
        self._session = None
        self._import()

    # -- import and device set-up -------------------------------------------
    def _import(self):
        set_variables(self.api, self.backend, self.device_kind, self.device_count)
        with stack_bytecode():
            self._import_keras()
        if self.tf1:
            self._tf1_session()

    def _import_keras(self):
        if self.api == "keras3":
            if self.backend in (None, "tensorflow"):
                self._import_tf()
            import keras  # the framework: imported after set_variables (see load)
            self.keras = keras
            return
        self._import_tf()
        if self.api == "standalone":
            import keras  # the framework: imported after set_variables (see load)
            self.keras = keras
        elif self.api in ("tf.keras", "tf_keras"):  # tf_keras: TF_USE_LEGACY_KERAS=1 points tf.keras at it
            self.keras = self.tf.keras
            # tf.keras may be a lazy proxy that imports on first use: use it now, so that an
            # import failure is raised here whole instead of being hidden by a later
            # getattr(..., default) and surfacing as a RecursionError.
            self.keras.layers  # noqa: B018 - the access is the point
        else:
            raise ValueError("unknown api %r" % self.api)

    def _import_tf(self):
        import tensorflow as tf  # the framework: imported after set_variables (see load)
        self.tf = tf
        if not self.tf1:
            self._tf2_devices()

    @property
    def tf1(self):
        return self.tf is not None and major(self.tf.__version__) == 1

    def _tf1_session(self):
        tf = self.tf
        config = tf.ConfigProto()
        config.gpu_options.allow_growth = True
        if self.device_kind == "cpu" and self.device_count > 1:
            config.device_count["CPU"] = self.device_count
        self._session = tf.Session(config=config)
        self.keras.backend.set_session(self._session)

    def _tf2_devices(self):
        tf = self.tf
        config = tf.config
        list_physical = getattr(config, "list_physical_devices", None) or \
            config.experimental.list_physical_devices
        for gpu in list_physical("GPU"):
            try:
                config.experimental.set_memory_growth(gpu, True)
            except (ValueError, RuntimeError):
                pass
        if self.device_kind == "cpu" and self.device_count > 1:
            cpus = list_physical("CPU")
            if hasattr(config, "set_logical_device_configuration"):
                config.set_logical_device_configuration(
                    cpus[0], [config.LogicalDeviceConfiguration()] * self.device_count)
            else:
                config.experimental.set_virtual_device_configuration(
                    cpus[0], [config.experimental.VirtualDeviceConfiguration()] * self.device_count)

    # -- what the environment looks like from inside ------------------------
    def device_names(self):
        if self.api == "keras3" and self.backend == "jax":
            import jax  # the framework, as load() imported it
            return ["%s:%d" % (d.platform, d.id) for d in jax.devices()]
        if self.api == "keras3" and self.backend == "torch":
            import torch  # the framework, as load() imported it
            return ["cpu:0"] + ["cuda:%d" % i for i in range(torch.cuda.device_count())]
        if self.tf1:
            return [d.name for d in self._session.list_devices()]
        list_logical = getattr(self.tf.config, "list_logical_devices", None) or \
            self.tf.config.experimental.list_logical_devices
        return [d.name for d in list_logical()]

    def seen(self):
        import numpy  # the framework, as load() imported it
        devices = self.device_names()
        gpus = [d for d in devices if "GPU" in d.upper() or d.startswith("cuda")]
        seen = {
            "python": platform.python_version(),
            "tensorflow": self.tf.__version__ if self.tf is not None else None,
            "keras": self.keras_version(),
            "keras_module": self.keras_module(),
            "keras_api": running_api(self.keras_module(), self.keras_version()),
            "keras_config": self.keras_config(),
            "numpy": numpy.__version__,
            "api": self.api,
            # Keras 3 without a backend named runs on TensorFlow (KERAS_BACKEND is set so): say it
            "backend": (self.backend or "tensorflow") if self.api == "keras3" else "tensorflow",
            "devices": devices,
            "gpus": gpus,
            "cuda": None,
            "cudnn": None,
            "driver": nvidia_driver(),
            "platform": platform.platform(),
            "variables": dict((k, os.environ.get(k)) for k in self.variable_names),
            "executable": sys.executable,
        }
        seen.update(self._cuda_versions())
        if gpus:
            try:
                seen["gpu_devices"] = self._gpu_details()
            except Exception as exc:  # noqa: BLE001 - provenance, not the experiment: say what failed
                seen["gpu_devices"] = {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
        return seen

    def keras_config(self):
        """The float type and image layout Keras runs with: a keras.json can set both, so the
        result says what they were, whatever set them."""
        try:
            backend = self.keras.backend
            return {"floatx": backend.floatx(), "image_data_format": backend.image_data_format()}
        except Exception as exc:  # noqa: BLE001 - provenance, not the experiment: say what failed
            return {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}

    def keras_module(self):
        """The name of the module that really provides Keras (tf.keras proxies name what they load)."""
        return self.keras.__name__

    def _gpu_details(self):
        """Model, memory and compute capability of each GPU, as the framework sees it."""
        out = []
        if self.api == "keras3" and self.backend == "jax":
            import jax  # the framework, as load() imported it
            for d in jax.devices("gpu"):
                stats = d.memory_stats() or {}
                out.append({"name": d.device_kind, "id": d.id,
                            "compute_capability": getattr(d, "compute_capability", None),
                            "memory_bytes": stats.get("bytes_limit")})
        elif self.api == "keras3" and self.backend == "torch":
            import torch  # the framework, as load() imported it
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                out.append({"name": p.name, "id": i, "compute_capability": "%d.%d" % (p.major, p.minor),
                            "memory_bytes": p.total_memory})
        elif self.tf1:
            from tensorflow.python.client import device_lib  # the framework, as load() imported it
            for d in device_lib.list_local_devices():
                if d.device_type == "GPU":
                    out.append({"name": d.physical_device_desc, "id": d.name, "memory_bytes": d.memory_limit})
        else:
            config = self.tf.config
            details = getattr(config.experimental, "get_device_details", None)
            for gpu in config.list_physical_devices("GPU"):
                info = details(gpu) if details else {}
                cc = info.get("compute_capability")
                out.append({"name": info.get("device_name"), "id": gpu.name,
                            "compute_capability": "%d.%d" % cc if cc else None})
        return out

    def keras_version(self):
        """The version of the package that provides Keras. tf.keras proxies (TF 2.13+) carry
        no __version__; the package they loaded (keras, tf_keras) does. Nothing is caught: a
        probe that fails is the cell's error, not a silent None."""
        top = self.keras_module().split(".")[0]
        # TF <= 2.5: the Keras inside TensorFlow reports its own version ("2.4.0"), which TF 2.0 and
        # 2.1 keep in tensorflow_core ("2.2.4-tf"): never TensorFlow's own version
        if top in ("tensorflow", "tensorflow_core"):
            return importlib.import_module(top + ".python.keras").__version__
        return sys.modules[top].__version__

    def check_keras(self, spec):
        """Raise KerasMismatch when the Keras that runs is not the one the spec asks for."""
        why = keras_mismatch(self.api, spec.get("keras_version"), self.keras_module(), self.keras_version())
        if why:
            raise KerasMismatch(why)

    def _cuda_versions(self):
        if self.api == "keras3" and self.backend == "torch":
            import torch  # the framework, as load() imported it
            cudnn = torch.backends.cudnn.version() if torch.cuda.is_available() else None
            return {"cuda": cuda_version_text(torch.version.cuda), "cudnn": cudnn_version_text(cudnn),
                    "torch": torch.__version__}
        if self.api == "keras3" and self.backend == "jax":
            import jax  # the framework, as load() imported it
            import jaxlib  # the framework, as load() imported it
            out = {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None)}
            if any(d.platform == "gpu" for d in jax.devices()):
                try:  # what the CUDA plugin loaded, as JAX reports it (a private module: may move)
                    from jax._src.lib import cuda_versions  # the framework's own module, as load() imported jax
                    out["cuda"] = cuda_version_text(cuda_versions.cuda_runtime_get_version())
                    out["cudnn"] = cudnn_version_text(cuda_versions.cudnn_get_version())
                except Exception as exc:  # noqa: BLE001 - provenance only: record why it is missing
                    out["cuda"] = "unknown (%s)" % type(exc).__name__
            return out
        info = getattr(self.tf.sysconfig, "get_build_info", None)
        if info is not None:
            build = info()
            return {"cuda": cuda_version_text(build.get("cuda_version")),
                    "cudnn": cudnn_version_text(build.get("cudnn_version"))}
        return {"cuda": "built with CUDA" if self.tf.test.is_built_with_cuda() else None}

    def replica_devices(self, n):
        """The names of `n` devices of the cell's kind to place replicas on.

        A host with fewer is not a failure of the wrapper: the cell is
        `unsupported` (2 GPUs asked, 1 present), with what was found.
        """
        kind = self.device_kind.upper()
        if self.api == "keras3" and self.backend == "jax":
            found = self.keras.distribution.list_devices(self.device_kind)
        elif self.api == "keras3" and self.backend == "torch":
            raise Unsupported("the torch backend has no device placement the wrappers can use")
        elif self.tf1:
            found = ["/%s:%d" % (self.device_kind, i) for i, d in
                     enumerate(d for d in self._session.list_devices() if (":%s:" % kind) in d.name.upper())]
        else:
            list_logical = getattr(self.tf.config, "list_logical_devices", None) or \
                self.tf.config.experimental.list_logical_devices
            found = [d.name for d in list_logical(kind)]
        if len(found) < n:
            raise Unsupported("%d %s devices asked, %d present: %s" % (n, self.device_kind, len(found), found))
        return list(found[:n])

    @property
    def graph_mode(self):
        """True where Keras builds a static TF graph (TF 1, or standalone Keras 2 on any TF):
        device scopes at model-construction time place the ops, as the seed wrappers assume."""
        return self.tf1 or (self.api == "standalone" and self.tf is not None)

    def multi_gpu_model(self):
        """Keras' own multi_gpu_model, exactly as this version ships it."""
        if self.api == "keras3":
            raise Unsupported("Keras 3 has no multi_gpu_model (removed with Keras 2); "
                              "its successor is keras.distribution.DataParallel")
        utils = self.keras.utils
        fn = getattr(utils, "multi_gpu_model", None)
        if fn is None and self.api == "standalone":
            # absent in this version is "unsupported"; present but failing to import is the error
            if importlib.util.find_spec("keras.utils.multi_gpu_utils") is not None:
                from keras.utils import multi_gpu_utils  # the framework's own module, only where it is asked for
                fn = getattr(multi_gpu_utils, "multi_gpu_model", None)
        if fn is None:
            raise Unsupported("%s %s has no multi_gpu_model (tf.keras dropped it in TF 2.4, "
                              "standalone Keras after 2.3.1)" % (self.api, self.keras_version()))
        return fn

    def mirrored_strategy(self, devices):
        """tf.distribute.MirroredStrategy: public, and fitting a tf.keras model built in its scope,
        from TF 1.14 (1.13 distributed only through compile(distribute=...)); never standalone Keras."""
        before_114 = self.tf1 and _version_tuple(self.tf.__version__) < (1, 14)
        if self.tf is None or self.api == "standalone" or before_114:
            raise Unsupported(MIRRORED_NEEDS % (self.api, self.keras_version(),
                                                self.tf.__version__ if self.tf else None))
        return self.tf.distribute.MirroredStrategy(devices=devices)

    def set_data_parallel(self, devices):
        if self.api != "keras3" or self.backend != "jax":
            raise Unsupported("keras.distribution.DataParallel runs on Keras 3 with the JAX backend only; "
                              "this is %s with backend %s" % (self.api, self.backend or "tensorflow"))
        dist = self.keras.distribution
        # keras.backend.clear_session() drops the global distribution: set it after any clear.
        dist.set_distribution(dist.DataParallel(devices=devices))

    def dataset(self, x, y, batch_size, seed, shuffle):
        """Arrays as a batched tf.data pipeline (seed 003's feeding question)."""
        if self.tf is None or self.tf1 or self.api == "standalone":
            raise Unsupported("fitting from tf.data needs TF 2 with tf.keras or Keras 3 "
                              "(standalone Keras 2 and TF 1 Keras take arrays); this is %s on TF %s"
                              % (self.api, self.tf.__version__ if self.tf else None))
        data = self.tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle:
            data = data.shuffle(len(x), seed=seed)
        return data.batch(batch_size).prefetch(2)

    def compile_options(self):
        # Keras 3 may XLA-compile the train step, which ignores tf.device scopes inside it.
        return {"jit_compile": False} if self.api == "keras3" and self.backend in (None, "tensorflow") else {}

    # -- building blocks ----------------------------------------------------
    def seed(self, seed):
        import random  # off the top: a warm launcher imports compat, then forks (< 3.7: children share its state)
        import numpy  # the framework, as load() imported it
        random.seed(seed)
        numpy.random.seed(seed)
        if self.api == "keras3":
            self.keras.utils.set_random_seed(seed)
        elif self.tf1:
            self.tf.set_random_seed(seed)
        else:
            self.tf.random.set_seed(seed)

    def rnn_layer(self, cell):
        """The layer class for a recurrent cell name of the matrix."""
        layers = self.keras.layers
        if cell == "gru":
            return layers.GRU
        if cell == "lstm":
            return layers.LSTM
        if cell in ("cudnn_gru", "cudnn_lstm"):
            name = "CuDNNGRU" if cell == "cudnn_gru" else "CuDNNLSTM"
            if self.api == "keras3":
                raise Unsupported("Keras 3 has no %s layer (its GRU/LSTM pick cuDNN themselves "
                                  "on the torch and tensorflow backends)" % name)
            if hasattr(layers, name):
                return getattr(layers, name)
            v1 = getattr(getattr(self.tf, "compat", None), "v1", None)
            layer = getattr(getattr(getattr(v1, "keras", None), "layers", None), name, None)
            if layer is None:
                raise Unsupported("%s is not available in %s %s" % (name, self.api, self.keras_version()))
            if not any("GPU" in d.upper() for d in self.device_names()):
                raise Unsupported(NO_CUDNN % name)
            return layer
        raise ValueError("unknown rnn cell %r" % cell)

    def adam(self, learning_rate):
        # The first positional argument is `lr` in Keras 2.2 and `learning_rate` later.
        return self.keras.optimizers.Adam(learning_rate)

    def callback_base(self):
        return self.keras.callbacks.Callback

    def clear(self):
        self.keras.backend.clear_session()


def metric(logs, name):
    """Read a metric whatever the version named it ('acc' in Keras 2.2, 'accuracy' later)."""
    aliases = {
        "accuracy": ("accuracy", "acc"),
        "val_accuracy": ("val_accuracy", "val_acc"),
    }
    for key in aliases.get(name, (name,)):
        if key in logs and logs[key] is not None:
            return float(logs[key])
    return None


# Variables that decide which Keras loads; seen() reports them whether set or not.
KERAS_SWITCHES = ("KERAS_BACKEND", "TF_USE_LEGACY_KERAS")


def load(spec):
    par = spec["parallelism"]
    stack = Stack(spec["api"], spec.get("backend"), par["device_kind"], int(par["devices"]))
    stack.variable_names = sorted(set(KERAS_SWITCHES) | set((spec["environment"].get("variables") or {})))
    return stack
