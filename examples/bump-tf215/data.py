"""The project's data: features whose label is the sign of the first four's sum."""

import numpy as np


def features(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2048, 16)).astype("float32")
    return x, (x[:, :4].sum(axis=1) > 0).astype("int32")
