"""A user's own model factory: a small GRU classifier and its data.

The harness calls ``build(**params)`` and ``data(**params)`` inside each
cell's environment (``params:`` in the matrix). Asking for a ``keras``
argument gets the Keras that cell runs (standalone Keras 2.2 on TF 1.12,
tf.keras on TF 2, Keras 3), so one factory serves every stack. Written for
Python 3.5+ (TF 1.x environments run Python 3.6).
"""
import numpy as np


def build(keras, units=32, timesteps=16, features=8, classes=4):
    layers = keras.layers
    inputs = layers.Input(shape=(timesteps, features))
    x = layers.GRU(units)(inputs)  # its reset_after default differs between Keras 2.2 and later
    outputs = layers.Dense(classes, activation="softmax")(x)
    return keras.models.Model(inputs, outputs)


def data(units=32, timesteps=16, features=8, classes=4, samples=2048):
    """Sequences labelled by which of `classes` fixed directions their mean points to."""
    rng = np.random.RandomState(7)
    x = rng.normal(size=(samples, timesteps, features)).astype("float32")
    directions = rng.normal(size=(features, classes))
    labels = x.mean(axis=1).dot(directions).argmax(axis=1)
    y = np.eye(classes, dtype="float32")[labels]
    split = int(samples * 0.8)
    return (x[:split], y[:split]), (x[split:], y[split:])
