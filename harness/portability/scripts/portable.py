"""Saved on one release, loaded on another: the script both sides of a portability pair run.

``python portable.py save``: train the models below a little (seeded), save each in every
format this stack writes, and leave the files, the reference inputs and this stack's own
predictions in $HARNESS_OUTPUT with a manifest (``written.json``).

``python portable.py load``: for every writer's files handed to this cell (the folders under
$HARNESS_INPUT's parent, one per writer), load each file by every way a user would try on this
stack, predict on the writer's reference inputs, and write what happened to ``loads.json`` in
$HARNESS_OUTPUT: per writer, model, format and way, "loaded" with the largest difference from the
writer's predictions, or the error that refused it, or "unknown" with why this stack cannot read
that format at all. The host judges (harness/portability/judge.py): this script only observes.

It is the harness's own script, but it reads nothing of the harness: what a user's script
would do, on Keras 2.2 (standalone, TF 1), tf.keras 2.x, tf-keras and Keras 3 on any backend.
Python 3.5 syntax, like every file that runs inside an environment.
"""
import importlib.util
import json
import os
import random
import shutil
import sys
import traceback

import numpy as np



def _api():
    """The Keras family this cell's environment asked (its spec), as the harness's workloads read it."""
    try:
        with open(os.environ["HARNESS_SPEC"]) as f:
            return json.load(f)["api"]
    except (KeyError, OSError, ValueError):
        return sys.argv[2] if len(sys.argv) > 2 else "keras3"


API = _api()
SEED = 1234
SAMPLES = 64


def keras_module():
    if API in ("tf.keras", "tf_keras"):
        # inside the cell, the framework is imported where it is chosen: the stack's API names which Keras
        import tensorflow as tf
        return tf.keras
    import keras  # as above: the framework, deferred to where the API chose it
    return keras


keras = keras_module()


def version(name):
    try:
        return __import__(name).__version__
    except Exception:  # noqa: BLE001 - absent or broken: said as None
        return None


def keras_version():
    """The version of the package that provides this Keras, read from what is loaded: tf.keras
    proxies (TF 2.13+) carry no __version__, the package behind them (keras, tf_keras) does; TF <= 2.5
    keeps Keras's own version inside TensorFlow (2.0 and 2.1 in tensorflow_core: "2.2.4-tf")."""
    top = keras.layers.Layer.__module__.split(".")[0]
    if top in ("tensorflow", "tensorflow_core"):
        return __import__(top + ".python.keras", fromlist=["keras"]).__version__
    return sys.modules[top].__version__


def keras_major():
    return int(keras_version().split(".")[0])


def tensorflow(found=[]):  # noqa: B006 - the one import, asked once
    if not found:
        try:
            # inside the cell, the framework is imported when asked: a Keras 3 stack on JAX or torch has none
            import tensorflow as tf
        except Exception:  # noqa: BLE001 - no TensorFlow in this stack (Keras 3 on JAX or torch)
            tf = None
        found.append(tf)
    return found[0]


# -- the models: the seeds' recurrent and convolutional ones, and a custom layer ----------
class Scale(keras.layers.Layer):
    """A user's own layer: one trainable factor per feature, and a setting in its config."""

    def __init__(self, offset=0.5, **kwargs):
        super(Scale, self).__init__(**kwargs)
        self.offset = offset

    def build(self, input_shape):
        self.factor = self.add_weight(name="factor", shape=(int(input_shape[-1]),), initializer="ones")
        super(Scale, self).build(input_shape)

    def call(self, inputs):
        return inputs * self.factor + self.offset

    def get_config(self):
        config = super(Scale, self).get_config()
        config["offset"] = self.offset
        return config


CUSTOM = {"Scale": Scale}


def users_custom_objects(folder):
    """A user's own layers and functions (`portability check --custom FILE`, handed beside their
    file as custom_objects.py), by name, as `custom_objects=` takes them."""
    path = os.path.join(folder, "custom_objects.py")
    if not os.path.isfile(path):
        return {}
    spec = importlib.util.spec_from_file_location("custom_objects", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and callable(value) and getattr(value, "__module__", None) == "custom_objects"}
SHAPES = {"gru": (6, 4), "lstm": (6, 4), "convnet": (8, 8, 1), "custom": (5,)}
USER = "user"   # the name a user's own file is offered under (`offer`)


def build(name):
    """The architecture, written as a user writes it: each layer's defaults are this release's."""
    L = keras.layers
    shape = SHAPES[name]
    if name == "gru":
        layers = [L.GRU(8, input_shape=shape), L.Dense(3, activation="softmax")]
    elif name == "lstm":
        layers = [L.LSTM(8, input_shape=shape), L.Dense(3, activation="softmax")]
    elif name == "convnet":
        layers = [L.Conv2D(4, (3, 3), activation="relu", input_shape=shape), L.MaxPooling2D((2, 2)),
                  L.Flatten(), L.Dense(3, activation="softmax")]
    else:
        layers = [L.Dense(8, activation="tanh", input_shape=shape), Scale(name="scale"),
                  L.Dense(3, activation="softmax")]
    model = keras.models.Sequential(layers)
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return model


def data(name):
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(SAMPLES,) + SHAPES[name]).astype("float32")
    y = np.eye(3, dtype="float32")[rng.randint(0, 3, size=SAMPLES)]
    return x, y


def seed():
    """The writer's seeds: Python's, NumPy's, TensorFlow's -- and Keras's own helper on Keras 3
    only, whose backends (JAX) have no global seed. Not Keras 2's `set_random_seed`: on tf-keras
    2.16-2.18 under Python 3.12 it breaks every layer built after it (keras-team/tf-keras#803),
    which would cost the grid those stacks' files. Readers seed nothing: loading draws no numbers."""
    random.seed(SEED)
    np.random.seed(SEED)
    tf = tensorflow()
    if tf is not None:
        setter = getattr(getattr(tf, "random", None), "set_seed", None) or getattr(tf, "set_random_seed", None)
        if setter:
            setter(SEED)
    utils = getattr(keras, "utils", None)
    if keras_major() >= 3 and hasattr(utils, "set_random_seed"):
        utils.set_random_seed(SEED)


# -- writing ---------------------------------------------------------------------------------
def formats():
    """Every format this stack may write, with how: the writer tries each, and says what refused."""
    tf = tensorflow()
    v3 = keras_major() >= 3
    out = [("h5", "model.h5", lambda m, p: m.save(p)),
           ("weights-h5", "model.weights.h5" if v3 else "weights.h5", lambda m, p: m.save_weights(p))]
    if v3 or at_least(keras_version(), 2, 12):
        out.append(("keras", "model.keras", lambda m, p: m.save(p)))
    if tf_backend() and at_least(tf.__version__, 2, 0):
        if v3:
            out.append(("savedmodel", "savedmodel", lambda m, p: tf.saved_model.save(m, p)))
        else:
            out.append(("savedmodel", "savedmodel", lambda m, p: m.save(p, save_format="tf")))
        out.append(("tf-checkpoint", "checkpoint/ckpt", lambda m, p: tf.train.Checkpoint(model=m).write(p)))
    if v3 and hasattr(keras.Model, "export") and tf is not None:
        out.append(("export", "export", lambda m, p: m.export(p)))
    return out


def at_least(text, major, minor):
    """Whether a version ("2.15.1", "2.2.4-tf") is at least major.minor."""
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= (major, minor)


def tf_backend():
    """Whether this Keras runs on TensorFlow (Keras 2 always; Keras 3 when its backend is)."""
    if tensorflow() is None:
        return False
    return keras_major() < 3 or keras.backend.backend() == "tensorflow"


def save(out):
    seed()
    written = {"stack": stack(), "models": {}}
    for name in SHAPES:
        x, y = data(name)
        model = build(name)
        model.fit(x, y, epochs=2, batch_size=16, verbose=0)
        np.save(os.path.join(out, name + ".inputs.npy"), x[:16])
        np.save(os.path.join(out, name + ".predictions.npy"), np.asarray(model.predict(x[:16], verbose=0)))
        files = {}
        for fmt, file_name, how in formats():
            path = os.path.join(out, name, file_name)
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
            try:
                how(model, path)
                files[fmt] = os.path.relpath(path, out)
            except Exception as exc:  # noqa: BLE001 - a format this release refused to write: said
                files[fmt] = {"error": family(exc)}
        written["models"][name] = {"files": files, "inputs": name + ".inputs.npy",
                                   "predictions": name + ".predictions.npy"}
    with open(os.path.join(out, "written.json"), "w") as f:
        json.dump(written, f, indent=1, sort_keys=True)
    print("written: %s" % ", ".join(sorted(written["models"])))


def stack():
    return {"api": API, "keras": keras_version(), "tensorflow": version("tensorflow"),
            "backend": keras.backend.backend() if keras_major() >= 3 else "tensorflow",
            "numpy": np.__version__, "h5py": version("h5py"), "python": "%d.%d.%d" % sys.version_info[:3]}


def family(exc):
    """The error as a family: its type and the first line of its message, without paths."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    return "%s: %s" % (type(exc).__name__, text)


# -- reading ---------------------------------------------------------------------------------
def ways(fmt, name):
    """(way, how) for every way a user of this stack would try on a file of `fmt`; (None, why) when
    this stack cannot know the format at all, or (a user's file) the architecture is not known."""
    if name not in SHAPES and fmt in ("weights-h5", "tf-checkpoint"):
        return [(None, "weights alone load into the architecture that wrote them, which only its code knows")]
    tf = tensorflow()
    load = keras.models.load_model
    v3 = keras_major() >= 3
    if fmt in ("h5", "keras"):
        if fmt == "keras" and not (v3 or at_least(keras_version(), 2, 12)):
            return [(None, "Keras %s knows no .keras archive (tf.keras reads it from 2.12)" % keras_version())]
        out = [("load_model", lambda p, name: load(p, custom_objects=CUSTOM)),
               ("load_model compile=False", lambda p, name: load(p, custom_objects=CUSTOM, compile=False))]
        if v3:
            out.append(("load_model safe_mode=False",
                        lambda p, name: load(p, custom_objects=CUSTOM, compile=False, safe_mode=False)))
        return out
    if fmt == "weights-h5":
        return [("load_weights", lambda p, name: _into(build(name), "load_weights", p))]
    if fmt in ("savedmodel", "export"):
        if tf is None or not at_least(tf.__version__, 2, 0):
            return [(None, "a SavedModel needs TensorFlow 2 to load")]
        out = [("tf.saved_model.load", lambda p, name: _Signature(tf, tf.saved_model.load(p)))]
        if v3 and hasattr(keras.layers, "TFSMLayer"):
            out.append(("TFSMLayer", lambda p, name: _Signature(
                tf, keras.layers.TFSMLayer(p, call_endpoint="serving_default"), called=True, signed=_signed(tf, p))))
        if not v3 and fmt == "savedmodel":
            out.append(("load_model", lambda p, name: load(p, custom_objects=CUSTOM)))
        return out
    if fmt == "tf-checkpoint":
        if not tf_backend() or not at_least(tf.__version__, 2, 0):
            return [(None, "a TF checkpoint restores into a model on TensorFlow 2 only")]
        return [("tf.train.Checkpoint.read", lambda p, name: _restored(tf, build(name), p))]
    return [(None, "unknown format %s" % fmt)]


def _signed(tf, path):
    """The SavedModel's own signatures, for the input shape a TFSMLayer does not say (None when
    TensorFlow cannot load it: the layer may still)."""
    try:
        return tf.saved_model.load(path)
    except Exception:  # noqa: BLE001 - only the inputs' shape is lost
        return None


def _into(model, method, path):
    getattr(model, method)(path)
    return model


def _restored(tf, model, path):
    tf.train.Checkpoint(model=model).read(path).assert_existing_objects_matched()
    return model


class _Signature(object):
    """A loaded SavedModel (or a TFSMLayer) called as a model is: predict on the inputs."""

    def __init__(self, tf, loaded, called=False, signed=None):
        self.tf, self.loaded, self.called = tf, loaded, called
        self.signed = signed if signed is not None else loaded   # what holds the serving signature

    def input_spec(self):
        """(shape, dtype name) of the serving signature's first input, or (None, None)."""
        signatures = getattr(self.signed, "signatures", None)
        if signatures is None or "serving_default" not in signatures:
            return None, None
        args, kwargs = signatures["serving_default"].structured_input_signature
        specs = [kwargs[k] for k in sorted(kwargs)] if kwargs else list(args)
        if not specs or not hasattr(specs[0], "shape"):
            return None, None
        return list(specs[0].shape.as_list()), specs[0].dtype.name

    def predict(self, x, verbose=0):
        tensor = self.tf.constant(x)
        signatures = getattr(self.loaded, "signatures", None)
        if not self.called and signatures is not None and "serving_default" in signatures:
            fn = signatures["serving_default"]
            named = fn.structured_input_signature[1]  # a signature takes its inputs by name
            out = fn(**{sorted(named)[0]: tensor}) if named else fn(tensor)
        else:
            out = self.loaded(tensor)
        if isinstance(out, dict):
            out = out[sorted(out)[0]]
        return np.asarray(out)


def read(out, inputs_root):
    found = {"stack": stack(), "writers": {}}
    for writer in sorted(os.listdir(inputs_root)):
        folder = os.path.join(inputs_root, writer)
        try:
            with open(os.path.join(folder, "written.json")) as f:
                written = json.load(f)
        except (OSError, ValueError) as exc:
            found["writers"][writer] = {"error": "no manifest: %s" % family(exc)}
            continue
        try:
            CUSTOM.update(users_custom_objects(folder))
            custom_error = None
        except Exception as exc:  # noqa: BLE001 - the user's layers do not import on this stack: said, and
            custom_error = family(exc)  # every file is still tried (a way that needs them then says so)
        models = {}
        for name, entry in sorted(written["models"].items()):
            if name not in SHAPES and name != USER and entry.get("inputs"):
                continue  # a model of the grid this reader does not know (a newer writer's): not its to judge
            x = np.load(os.path.join(folder, entry["inputs"])) if entry.get("inputs") else None
            expected = np.load(os.path.join(folder, entry["predictions"])) if entry.get("predictions") else None
            models[name] = {}
            for fmt, where in sorted(entry["files"].items()):
                if isinstance(where, dict):
                    continue
                keep = os.path.join(out, "predictions", "%s__%s__%s.npy" % (writer, name, fmt))
                models[name][fmt] = read_one(folder, name, fmt, where, x, expected, keep)
        found["writers"][writer] = {"stack": written["stack"], "models": models}
        if custom_error:
            found["writers"][writer]["custom_error"] = custom_error
    with open(os.path.join(out, "loads.json"), "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    print("read the files of %d writer(s)" % len(found["writers"]))


def read_one(folder, name, fmt, where, x, expected, keep):
    """Every way of loading one file; the first way's predictions are kept (`keep`), so the host
    can compare readers where the writer left none (a user's own file)."""
    path = os.path.join(folder, where)
    tried = []
    for way, how in ways(fmt, name):
        if way is None:
            return {"unknown": how}
        try:
            model = how(path, name)
        except Exception as exc:  # noqa: BLE001 - a refusal is the observation
            tried.append({"way": way, "loaded": False, "error": family(exc), "where": _where(exc)})
            continue
        try:  # it loaded: what fails from here on is predicting, and said so
            inputs = x if x is not None else drawn_inputs(model)
            got = np.asarray(model.predict(inputs, verbose=0))
            entry = {"way": way, "loaded": True}
            if not any(t.get("loaded") for t in tried):
                if not os.path.isdir(os.path.dirname(keep)):
                    os.makedirs(os.path.dirname(keep))
                np.save(keep, got)
                entry["predictions"] = os.path.relpath(keep, os.path.dirname(os.path.dirname(keep)))
            if expected is not None and got.shape != expected.shape:
                entry["shape"] = list(got.shape)
            elif expected is not None:
                entry["max_abs_diff"] = float(np.max(np.abs(got.astype("float64") - expected.astype("float64"))))
            tried.append(entry)
        except Exception as exc:  # noqa: BLE001 - loaded, but it does not predict
            tried.append({"way": way, "loaded": False, "error": "predict: " + family(exc), "where": _where(exc)})
    return {"tried": tried}


def drawn_inputs(model):
    """Sixteen inputs drawn with one seed from the model's own input: every reader draws the same
    ones, so their predictions compare. Token ids where the model reads them (an Embedding first,
    or integer inputs): integers below the vocabulary's size (0 or 1 when it is not known)."""
    shape, dtype, vocabulary = input_spec(model)
    if shape is None:
        raise ValueError("the model's input shape is not known here: give inputs (portability check --inputs)")
    dims = [int(d) if d is not None else 8 for d in list(shape)[1:]]
    rng = np.random.RandomState(SEED)
    if vocabulary is not None or (dtype or "").startswith(("int", "uint")):
        return rng.randint(0, vocabulary or 2, size=[16] + dims).astype(dtype or "int32")
    return rng.normal(size=[16] + dims).astype("float32")


def input_spec(model):
    """(shape, dtype name, vocabulary size or None) of a model's first input."""
    if isinstance(model, _Signature):
        shape, dtype = model.input_spec()
        return shape, dtype, None
    shape = getattr(model, "input_shape", None)
    if shape is None and getattr(model, "inputs", None):
        shape = tuple(model.inputs[0].shape)
    if isinstance(shape, list):
        shape = shape[0]
    inputs = getattr(model, "inputs", None) or []
    dtype = getattr(getattr(inputs[0], "dtype", None), "name", None) if inputs else None
    if inputs and isinstance(getattr(inputs[0], "dtype", None), str):
        dtype = inputs[0].dtype
    first = [layer for layer in getattr(model, "layers", []) if type(layer).__name__ != "InputLayer"][:1]
    vocabulary = getattr(first[0], "input_dim", None) if first and "Embedding" in type(first[0]).__name__ else None
    return shape, dtype, vocabulary


def _where(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return "%s:%d" % (os.path.basename(frames[-1][0]), frames[-1][1]) if frames else None


FORMAT_OF = ((".weights.h5", "weights-h5"), (".h5", "h5"), (".hdf5", "h5"), (".keras", "keras"))


def offer(out, source, custom=None, inputs=None):
    """A user's own file (`portability check`), handed to every reader as a writer's files are --
    with their layers' code and their inputs (a .npy array), when given, beside it -- but without
    the writer's predictions: each reader predicts on the user's inputs, else on inputs drawn with
    one seed from the model's own input, and the host compares the readers."""
    name = os.path.basename(source.rstrip(os.sep))
    fmt = "savedmodel" if os.path.isdir(source) else next(
        (f for suffix, f in FORMAT_OF if name.lower().endswith(suffix)), "h5")
    target = os.path.join(out, USER, name)
    os.makedirs(os.path.dirname(target))
    (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, target)
    if custom:
        shutil.copy(custom, os.path.join(out, "custom_objects.py"))
    if inputs:
        shutil.copy(inputs, os.path.join(out, "user_inputs.npy"))
    written = {"stack": stack(), "models": {USER: {"files": {fmt: os.path.relpath(target, out)},
                                                     "inputs": "user_inputs.npy" if inputs else None,
                                                     "predictions": None}}}
    with open(os.path.join(out, "written.json"), "w") as f:
        json.dump(written, f, indent=1, sort_keys=True)
    print("offered %s as %s" % (name, fmt))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = os.environ.get("HARNESS_OUTPUT") or "."
    if mode == "save":
        save(out)
    elif mode == "offer":  # offer PATH DIGEST CUSTOM INPUTS ('-': none): the digest names their content
        given = [a if a != "-" else None for a in sys.argv[4:6]] + [None, None]
        offer(out, sys.argv[2], given[0], given[1])
    elif mode == "load":
        first = os.environ.get("HARNESS_INPUT")
        if not first:
            sys.exit("load: no writer's files were handed to this cell (needs: the writers' save cells)")
        read(out, os.path.dirname(first))
    else:
        sys.exit("usage: portable.py save | load | offer PATH DIGEST CUSTOM|- INPUTS|-")


if __name__ == "__main__":
    main()
