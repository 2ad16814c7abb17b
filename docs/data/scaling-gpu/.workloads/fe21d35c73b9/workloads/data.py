"""Deterministic synthetic data with a learnable rule.

The seeds trained on private or downloaded data (a small text file, MNIST).
Nothing may be downloaded at run time here, and accuracy must mean something
(the seed-000 symptom is *halved accuracy* on 2 GPUs), so each generator draws
inputs from a fixed-seed RandomState and labels them by a hidden rule that a
model of the right kind can learn but chance cannot guess. Same seed, same
data, on every numpy the matrix pins (RandomState's stream is frozen).
"""
import numpy as np


def _one_hot(labels, classes):
    out = np.zeros((len(labels), classes), dtype="float32")
    out[np.arange(len(labels)), labels] = 1.0
    return out


def _split(x, y, validation):
    n_val = int(round(len(x) * validation))
    n_train = len(x) - n_val
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def sequences(samples, timesteps, features, classes, seed, validation=0.2):
    """Sequences whose class depends on *when* features were high.

    The label is the argmax of two fixed projections, one of the first half of
    the sequence and one of the second half; a recurrent model must keep order
    to get it right, so a GRU/LSTM learns it and chance stays at 1/classes.
    """
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(samples, timesteps, features)).astype("float32")
    w_early = rng.normal(size=(features, classes))
    w_late = rng.normal(size=(features, classes))
    half = max(1, timesteps // 2)
    scores = x[:, :half].mean(axis=1).dot(w_early) + x[:, half:].mean(axis=1).dot(w_late)
    labels = scores.argmax(axis=1)
    return _split(x, _one_hot(labels, classes), validation)


def images(samples, height, width, channels, classes, seed, noise=1.0, validation=0.2):
    """MNIST-shaped images: a class-specific template, shifted, under noise.

    Stands in for MNIST (seed 004) without a download: a convnet separates the
    templates well above chance, a linear model on raw pixels less well.
    """
    rng = np.random.RandomState(seed)
    templates = rng.normal(size=(classes, height + 4, width + 4, channels)).astype("float32")
    labels = rng.randint(0, classes, size=samples)
    dy = rng.randint(0, 5, size=samples)
    dx = rng.randint(0, 5, size=samples)
    x = np.empty((samples, height, width, channels), dtype="float32")
    for i in range(samples):
        x[i] = templates[labels[i], dy[i]:dy[i] + height, dx[i]:dx[i] + width]
    x += noise * rng.normal(size=x.shape).astype("float32")
    return _split(x, _one_hot(labels, classes), validation)


def vectors(samples, features, seed, validation=0.2):
    """Wide binary-classification vectors for the seed-002 dense model.

    Label = sign of a fixed projection, as binary 0/1 (the seed's sigmoid head).
    """
    rng = np.random.RandomState(seed)
    x = rng.rand(samples, features).astype("float32")
    w = rng.normal(size=(features,))
    margin = (x - 0.5).dot(w)
    y = (margin > 0).astype("float32").reshape(-1, 1)
    return _split(x, y, validation)
