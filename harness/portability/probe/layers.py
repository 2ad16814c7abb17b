"""Where a loaded model parts from its writer's: every layer's output on the writer's inputs, and
which of the writer's settings, put back, makes it predict as the writer did.

``python layers.py FILE FORMAT MODEL WAY INPUTS PREDICTIONS DIGEST``: load FILE (a grid writer's
file of MODEL in FORMAT) by WAY, exactly as the grid's reader does (``portable.ways``: the same
ways, the same architectures built with this release's defaults), compute the output of every
layer on INPUTS (a .npy array) and leave in $HARNESS_OUTPUT ``layers.json`` -- per layer its
place, name, class and configuration -- and ``layers.npz``, the outputs in that order.

Handed the writer's own probe (``needs:``, in $HARNESS_INPUT), it also tries each setting of a
layer whose value differs between the two stacks (not how weights are initialised, regularised
or constrained: the loaded weights replace those): the model built again with the writer's value
for that one setting, the loaded weights set into it, and its predictions' largest difference
from the writer's (PREDICTIONS) -- then with every such setting at once. A default that moved
between releases shows as the setting that mends it. DIGEST names the file's content, so a file
written again is probed again. The host judges (harness/portability/explain.py); this script
only observes. Python 3.5 syntax, like every file that runs inside an environment.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
import portable  # noqa: E402 - the grid's own reader, beside this folder: its ways and architectures


def jsonable(value):
    """A layer's configuration as JSON keeps it: what is not a plain value, as its text."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


# settings that do not change what a layer computes from loaded weights, or only how it is written down
NOT_COMPUTED = ("name", "trainable", "dtype", "batch_input_shape", "input_shape")
NOT_COMPUTED_SUFFIXES = ("_initializer", "_regularizer", "_constraint")


def computed(key):
    return key not in NOT_COMPUTED and not key.endswith(NOT_COMPUTED_SUFFIXES)


def layer_configs(config):
    """The layers' entries of a Sequential's configuration (a list on Keras 2.2, a dict after)."""
    return config["layers"] if isinstance(config, dict) else config


def rebuilt(model, changes):
    """The model built again from its configuration with `changes` ({(layer, key): value}), its
    weights set from the loaded model."""
    config = model.get_config()
    entries = [e for e in layer_configs(config) if e.get("class_name") != "InputLayer"]
    for (index, key), value in changes.items():
        entries[index]["config"][key] = value
    clone = type(model).from_config(config, custom_objects=portable.CUSTOM)
    clone.set_weights(model.get_weights())
    return clone


GRID = np.linspace(-6.0, 6.0, 241).astype("float32")   # where activations are compared: step 0.05


def activation_values(name_or_function):
    """An activation of this release (a name, or a function) on GRID, as a list; None where this
    release has none by that name."""
    keras = portable.keras
    try:
        f = keras.activations.get(name_or_function)
        ops = getattr(keras, "ops", None)
        if ops is not None and hasattr(ops, "convert_to_numpy"):   # Keras 3, on any backend
            return np.asarray(ops.convert_to_numpy(f(ops.convert_to_tensor(GRID)))).tolist()
        backend = keras.backend
        return np.asarray(backend.eval(f(backend.constant(GRID)))).tolist()
    except Exception:  # noqa: BLE001 - no such activation here
        return None


def activations_of(layers):
    """{name: its values on GRID} for every activation a layer's configuration names."""
    names = set(v for layer in layers for k, v in layer["config"].items()
                if k.endswith("activation") and isinstance(v, str))
    return dict((n, activation_values(n)) for n in sorted(names))


def keras2_hard_sigmoid(x):
    """Keras 2's hard_sigmoid (Keras 3 made its own x/6 + 1/2, as JAX's and PyTorch's are:
    keras-team/keras#19477)."""
    ops = getattr(portable.keras, "ops", None) or portable.keras.backend
    return ops.clip(0.2 * x + 0.5, 0.0, 1.0)


# earlier definitions of activations a later release defines otherwise: tried where the writer's
# values on GRID are this definition's and this release's own are not
DEFINITIONS = {"hard_sigmoid": (keras2_hard_sigmoid, "Keras 2's: clip(0.2x + 0.5, 0, 1)")}


def redefined(writer, mine):
    """{name: (function, what it is)} for each activation the writer's release computes otherwise
    than this one, where a known definition gives the writer's values."""
    out = {}
    for name, theirs in sorted((writer or {}).items()):
        own = (mine or {}).get(name)
        if theirs is None or own is not None and np.allclose(own, theirs, atol=1e-6):
            continue   # the same function here (or the writer's release has none by that name)
        known = DEFINITIONS.get(name)
        if known is not None and np.allclose(activation_values(known[0]) or [np.nan], theirs, atol=1e-6):
            out[name] = known
    return out


def tried(model, changes, x, expected):
    """The model built again with `changes`: its predictions' largest difference from the
    writer's, or the error."""
    said = {"settings": [{"layer": i, "key": k, "value": v} for (i, k), v in sorted(changes.items())]}
    try:
        got = np.asarray(rebuilt(model, changes).predict(x, verbose=0))
        said["max_abs_diff"] = float(np.max(np.abs(got.astype("float64") - expected.astype("float64"))))
    except Exception as exc:  # noqa: BLE001 - a setting this release cannot take: said
        said["error"] = portable.family(exc)
    return said


def settings_back(model, mine, writer, x, expected, definitions=None):
    """Each computed setting whose value differs from the writer's, put back alone, then all at
    once: the largest difference of the model's predictions from the writer's, or the error. Then,
    where the writer's release defines a named activation otherwise (`definitions`, `redefined`'s),
    those settings once more, each with the writer's own function in place of its name."""
    differing = {}
    for index, (a, b) in enumerate(zip(mine, writer)):
        for key in sorted(set(a["config"]) & set(b["config"])):
            if computed(key) and a["config"][key] != b["config"][key]:
                differing[(index, key)] = b["config"][key]
    trials = [{k: v} for k, v in sorted(differing.items())]
    if len(trials) > 1:
        trials.append(dict(differing))
    out = [tried(model, changes, x, expected) for changes in trials]
    definitions = definitions or {}
    named = dict(((index, key), value) for index, b in enumerate(writer) for key, value in b["config"].items()
                 if key.endswith("activation") and isinstance(value, str) and value in definitions)
    if named:
        changes = dict(differing)
        changes.update((place, definitions[name][0]) for place, name in named.items())
        said = tried(model, changes, x, expected)
        for entry in said["settings"]:
            name = named.get((entry["layer"], entry["key"]))
            if name is not None:
                entry["value"], entry["definition"] = name, definitions[name][1]
        out.append(said)
    return out


def probe(path, fmt, name, way, inputs, predictions, out):
    how = dict(portable.ways(fmt, name)).get(way)
    if how is None:
        return {"error": "this stack has no way %r for the format %s" % (way, fmt)}
    model = how(path, name)
    layers = [layer for layer in getattr(model, "layers", None) or [] if type(layer).__name__ != "InputLayer"]
    if not layers:
        return {"error": "loaded by %s, the model has no layers to follow (a SavedModel's signature is one "
                         "function)" % way}
    keras = portable.keras
    follow = keras.models.Model(model.inputs, [layer.output for layer in layers])
    outputs = follow.predict(np.load(inputs), verbose=0)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    np.savez(os.path.join(out, "layers.npz"), *[np.asarray(o) for o in outputs])
    found = {"layers": [{"index": i, "name": layer.name, "class": type(layer).__name__,
                         "config": jsonable(layer.get_config())} for i, layer in enumerate(layers)],
             "stack": portable.stack(), "way": way}
    found["activations"] = activations_of(found["layers"])
    handed = os.environ.get("HARNESS_INPUT")
    if handed and os.path.isfile(os.path.join(handed, "layers.json")):
        with open(os.path.join(handed, "layers.json")) as f:
            writer = json.load(f)
        if writer.get("layers") and len(writer["layers"]) == len(found["layers"]):
            try:
                for name in writer.get("activations") or {}:   # the writer's names too, as this release computes them
                    if name not in found["activations"]:
                        found["activations"][name] = activation_values(name)
                redone = redefined(writer.get("activations"), found["activations"])
                found["redefined"] = dict((name, what) for name, (_, what) in redone.items())
                found["settings_back"] = settings_back(model, found["layers"], writer["layers"], np.load(inputs),
                                                       np.load(predictions), redone)
            except Exception as exc:  # noqa: BLE001 - the model does not rebuild from its configuration here
                found["settings_back_error"] = portable.family(exc)
    return found


def main():
    if len(sys.argv) < 8:
        sys.exit("usage: layers.py FILE FORMAT MODEL WAY INPUTS PREDICTIONS DIGEST")
    out = os.environ.get("HARNESS_OUTPUT") or "."
    found = probe(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], out)
    with open(os.path.join(out, "layers.json"), "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    if "error" in found:
        sys.exit(found["error"])
    print("followed %d layers" % len(found["layers"]))


if __name__ == "__main__":
    main()
