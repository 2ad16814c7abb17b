"""Deterministic synthetic data with a learnable rule.

The seeds trained on private or downloaded data (a small text file, MNIST).
Nothing may be downloaded at run time here, and accuracy must mean something
(the seed-000 symptom is *halved accuracy* on 2 GPUs), so each generator draws
inputs from a fixed-seed RandomState and labels them by a hidden rule that a
model of the right kind can learn but chance cannot guess. Same seed, same
data, on every numpy the matrix pins (RandomState's stream is frozen).
"""
import hashlib
import json
import os
import shutil
import stat

import numpy as np

from .protocol import ENV_DATA_DIR

DATA_VERSION = 1  # bump when a generator changes what it draws
# What happened to each data set this process asked for: "generated" (no cache), "written"
# (generated and kept), "mapped" (read from the cache) -- recorded in workload.json.
SOURCES = []


def _private(folder):
    """The cache folder is used only if it is ours and nobody else can write it."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _cached(name, args, make):
    """(x, y) for a generator call: mapped read-only from the data cache when a cell wrote it
    before, else generated (and written there for the next cell, atomically: a folder renamed
    into place). The key holds numpy's version, so a set is only reused where generating it
    again would give the same bits."""
    folder = os.environ.get(ENV_DATA_DIR)
    if not folder or not _private(folder):
        SOURCES.append({"data": name, "source": "generated"})
        return make()
    blob = json.dumps([DATA_VERSION, name, args, np.__version__], sort_keys=True)
    key = "%s-%s" % (name, hashlib.sha256(blob.encode()).hexdigest()[:20])
    where = os.path.join(folder, key)
    if os.path.exists(os.path.join(where, "y.npy")):
        x = np.load(os.path.join(where, "x.npy"), mmap_mode="r", allow_pickle=False)
        y = np.load(os.path.join(where, "y.npy"), mmap_mode="r", allow_pickle=False)
        SOURCES.append({"data": name, "source": "mapped", "key": key})
        return x, y
    x, y = make()
    tmp = "%s.tmp-%d" % (where, os.getpid())
    try:
        os.mkdir(tmp, 0o700)
        np.save(os.path.join(tmp, "x.npy"), x, allow_pickle=False)
        np.save(os.path.join(tmp, "y.npy"), y, allow_pickle=False)
        os.rename(tmp, where)  # a folder another cell renamed first stays; ours goes
        source = "written"
    except OSError:
        source = "generated"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    SOURCES.append({"data": name, "source": source, "key": key})
    return x, y


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
    def make():
        rng = np.random.RandomState(seed)
        x = rng.normal(size=(samples, timesteps, features)).astype("float32")
        w_early = rng.normal(size=(features, classes))
        w_late = rng.normal(size=(features, classes))
        half = max(1, timesteps // 2)
        scores = x[:, :half].mean(axis=1).dot(w_early) + x[:, half:].mean(axis=1).dot(w_late)
        return x, _one_hot(scores.argmax(axis=1), classes)
    x, y = _cached("sequences", [samples, timesteps, features, classes, seed], make)
    return _split(x, y, validation)


def images(samples, height, width, channels, classes, seed, noise=1.0, validation=0.2):
    """MNIST-shaped images: a class-specific template, shifted, under noise.

    Stands in for MNIST (seed 004) without a download: a convnet separates the
    templates well above chance, a linear model on raw pixels less well.
    """
    def make():
        rng = np.random.RandomState(seed)
        templates = rng.normal(size=(classes, height + 4, width + 4, channels)).astype("float32")
        labels = rng.randint(0, classes, size=samples)
        dy = rng.randint(0, 5, size=samples)
        dx = rng.randint(0, 5, size=samples)
        x = np.empty((samples, height, width, channels), dtype="float32")
        for i in range(samples):
            x[i] = templates[labels[i], dy[i]:dy[i] + height, dx[i]:dx[i] + width]
        x += noise * rng.normal(size=x.shape).astype("float32")
        return x, _one_hot(labels, classes)
    x, y = _cached("images", [samples, height, width, channels, classes, seed, noise], make)
    return _split(x, y, validation)


def vectors(samples, features, seed, validation=0.2):
    """Wide binary-classification vectors for the seed-002 dense model.

    Label = sign of a fixed projection, as binary 0/1 (the seed's sigmoid head).
    """
    def make():
        rng = np.random.RandomState(seed)
        x = rng.rand(samples, features).astype("float32")
        w = rng.normal(size=(features,))
        margin = (x - 0.5).dot(w)
        return x, (margin > 0).astype("float32").reshape(-1, 1)
    x, y = _cached("vectors", [samples, features, seed], make)
    return _split(x, y, validation)
