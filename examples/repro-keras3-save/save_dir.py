"""Save a trained model to a folder path, then load it back.

Code written for Keras 2 often ends with ``model.save("some/folder")``:
on TF 2.x with Keras 2 that writes a SavedModel folder (on Keras 2.2, an
HDF5 file at that path). Keras 3 (the Keras of TF >= 2.16) refuses any path
without a ``.keras`` or ``.h5`` extension with a ValueError. Publicly
reported, e.g. https://github.com/adriangb/scikeras/issues/314 and
https://github.com/KevinMenden/scaden/issues/129.

Run by the harness, this script is the cell: its exit status and exception
give the status, the failing line of this file gives the signature, and the
numbers it reports (``workloads.metrics.report``) land in the report.
Files left in $HARNESS_OUTPUT are handed to the cells that need this one.
Python 3.5+ (no f-strings: TF 1.x runs on Python 3.6).
"""
import os
import sys

import numpy as np

try:
    from workloads.metrics import report
except ImportError:  # outside the harness: no metrics, same script
    def report(name, value):
        return False


def keras_module():
    if os.environ.get("KERAS_BACKEND") or sys.argv[1:2] == ["keras"]:
        import keras
        return keras
    try:
        import tensorflow as tf
        if hasattr(tf, "keras") and int(tf.__version__.split(".")[0]) >= 2:
            return tf.keras
    except ImportError:
        pass
    import keras
    return keras


def main():
    keras = keras_module()
    inputs = keras.layers.Input(shape=(6,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(hidden)
    model = keras.models.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    rng = np.random.RandomState(0)
    x = rng.normal(size=(64, 6)).astype("float32")
    y = np.eye(3, dtype="float32")[rng.randint(0, 3, size=64)]
    model.fit(x, y, epochs=1, verbose=0)
    report("parameters", model.count_params())

    out = os.environ.get("HARNESS_OUTPUT", ".")
    folder = os.path.join(out, "model")       # no extension: a folder, as Keras 2 code wrote it
    model.save(folder)
    loaded = keras.models.load_model(folder)
    same = np.allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    report("reloaded_matches", 1.0 if same else 0.0)
    if not same:
        sys.exit("the reloaded model predicts differently")


main()
