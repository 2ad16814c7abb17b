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


def settings_back(model, mine, writer, x, expected):
    """Each computed setting whose value differs from the writer's, put back alone, then all at
    once: the largest difference of the model's predictions from the writer's, or the error."""
    differing = {}
    for index, (a, b) in enumerate(zip(mine, writer)):
        for key in sorted(set(a["config"]) & set(b["config"])):
            if computed(key) and a["config"][key] != b["config"][key]:
                differing[(index, key)] = b["config"][key]
    trials = [{k: v} for k, v in sorted(differing.items())]
    if len(trials) > 1:
        trials.append(dict(differing))
    out = []
    for changes in trials:
        said = {"settings": [{"layer": i, "key": k, "value": v} for (i, k), v in sorted(changes.items())]}
        try:
            got = np.asarray(rebuilt(model, changes).predict(x, verbose=0))
            said["max_abs_diff"] = float(np.max(np.abs(got.astype("float64") - expected.astype("float64"))))
        except Exception as exc:  # noqa: BLE001 - a setting this release cannot take: said
            said["error"] = portable.family(exc)
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
    handed = os.environ.get("HARNESS_INPUT")
    if handed and os.path.isfile(os.path.join(handed, "layers.json")):
        with open(os.path.join(handed, "layers.json")) as f:
            writer = json.load(f)
        if writer.get("layers") and len(writer["layers"]) == len(found["layers"]):
            try:
                found["settings_back"] = settings_back(model, found["layers"], writer["layers"], np.load(inputs),
                                                       np.load(predictions))
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
