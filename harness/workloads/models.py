"""The seed models, built with the functional API (the one spelling that
works unchanged from Keras 2.2 to Keras 3) and their synthetic data.

Each builder returns ``(model, (train, validation), loss)``.
"""
from . import data


def _classifier_head(layers, x, dense, classes, dropout):
    if dense:
        x = layers.Dense(dense, activation="relu")(x)
    if dropout:
        x = layers.Dropout(dropout)(x)
    return layers.Dense(classes, activation="softmax")(x)


def rnn(stack, w, seed):
    """Seed 000: stacked recurrent layers (default 4 x GRU-512) + Dense-128 + softmax.

    `layer_args` pins the recurrent layers' arguments (the matrix checks their names), so two
    releases whose defaults differ can build the same model."""
    layers = stack.keras.layers
    Cell = stack.rnn_layer(w.get("cell", "gru"))
    n_layers = int(w.get("layers", 4))
    pinned = dict((str(k), v) for k, v in (w.get("layer_args") or {}).items())
    inputs = layers.Input(shape=(int(w["timesteps"]), int(w["features"])))
    x = inputs
    for i in range(n_layers):
        x = Cell(int(w.get("units", 512)), return_sequences=i < n_layers - 1, **pinned)(x)
    outputs = _classifier_head(layers, x, int(w.get("dense", 128)), int(w["classes"]), w.get("dropout", 0))
    model = stack.keras.models.Model(inputs, outputs)
    splits = data.sequences(int(w["samples"]), int(w["timesteps"]), int(w["features"]),
                            int(w["classes"]), seed)
    return model, splits, "categorical_crossentropy"


def convnet(stack, w, seed):
    """Seed 004: the Keras MNIST example convnet (2 conv, pool, dense 128) on synthetic images."""
    layers = stack.keras.layers
    shape = (int(w.get("height", 28)), int(w.get("width", 28)), int(w.get("channels", 1)))
    inputs = layers.Input(shape=shape)
    x = layers.Conv2D(32, (3, 3), activation="relu")(inputs)
    x = layers.Conv2D(64, (3, 3), activation="relu")(x)
    x = layers.MaxPooling2D(pool_size=(2, 2))(x)
    x = layers.Dropout(0.25)(x)
    x = layers.Flatten()(x)
    outputs = _classifier_head(layers, x, int(w.get("dense", 128)), int(w["classes"]), 0.5)
    model = stack.keras.models.Model(inputs, outputs)
    splits = data.images(int(w["samples"]), shape[0], shape[1], shape[2], int(w["classes"]), seed,
                         noise=float(w.get("noise", 1.0)))
    return model, splits, "categorical_crossentropy"


def maxing(stack, w, seed):
    """Seed 001: an MNIST-shaped convnet with far more layers than it needs,
    meant to saturate a device (its author: "don't try and make it converge")."""
    layers = stack.keras.layers
    shape = (int(w.get("height", 28)), int(w.get("width", 28)), int(w.get("channels", 1)))
    inputs = layers.Input(shape=shape)
    x = inputs
    for _ in range(int(w.get("blocks", 3))):
        for _ in range(int(w.get("convs_per_block", 3))):
            x = layers.Conv2D(int(w.get("filters", 64)), (3, 3), padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(pool_size=(2, 2), padding="same")(x)
    x = layers.Flatten()(x)
    outputs = _classifier_head(layers, x, int(w.get("dense", 512)), int(w["classes"]), 0)
    model = stack.keras.models.Model(inputs, outputs)
    splits = data.images(int(w["samples"]), shape[0], shape[1], shape[2], int(w["classes"]), seed)
    return model, splits, "categorical_crossentropy"


def dense(stack, w, seed):
    """Seed 002: the large dense model (8000 -> 4000 -> 2000 -> 500 -> 300 -> 1,
    41,157,101 parameters at the default widths), binary cross-entropy."""
    layers = stack.keras.layers
    widths = [int(v) for v in w.get("widths", [4000, 2000, 500, 300])]
    inputs = layers.Input(shape=(int(w.get("features", 8000)),))
    x = layers.Dense(widths[0], activation="tanh")(inputs)
    for width in widths[1:]:
        x = layers.Dense(width, activation="relu")(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = stack.keras.models.Model(inputs, outputs)
    splits = data.vectors(int(w["samples"]), int(w.get("features", 8000)), seed)
    return model, splits, "binary_crossentropy"


BUILDERS = {"rnn": rnn, "convnet": convnet, "maxing": maxing, "dense": dense}


def build(stack, workload, seed):
    return BUILDERS[workload["model"]](stack, workload, seed)
