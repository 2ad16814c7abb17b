"""Saved with one stack, loaded with another: ``chain.py save`` / ``chain.py load``.

``save`` (run on TF 2.15, whose tf.keras is Keras 2) writes ``model.keras`` into
$HARNESS_OUTPUT; the matrix's ``needs:`` hands that file, read-only, to the
``load`` cells (on TF 2.15 and on Keras 3), which find it under $HARNESS_INPUT.
Both report the parameter count, and the matrix expects it equal across stacks.
"""
import os
import sys

import numpy as np
from workloads.metrics import report


def keras_module():
    if os.environ.get("KERAS_BACKEND"):
        import keras
        return keras
    import tensorflow as tf
    return tf.keras


def save(keras):
    inputs = keras.layers.Input(shape=(10,))
    x = keras.layers.Dense(16, activation="relu")(inputs)
    x = keras.layers.Dropout(0.1)(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    model = keras.models.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.RandomState(1)
    model.fit(rng.normal(size=(32, 10)), np.eye(2)[rng.randint(0, 2, 32)], epochs=1, verbose=0)
    model.save(os.path.join(os.environ["HARNESS_OUTPUT"], "model.keras"))
    report("parameters", model.count_params())


def load(keras):
    path = os.path.join(os.environ["HARNESS_INPUT"], "model.keras")
    model = keras.models.load_model(path)
    report("parameters", model.count_params())
    report("output_units", model.output_shape[-1])


if __name__ == "__main__":
    {"save": save, "load": load}[sys.argv[1]](keras_module())
