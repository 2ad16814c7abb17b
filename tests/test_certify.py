"""`harness certify`: one device against N on Keras 3 + JAX, two virtual CPU devices, real
virtualenvs and processes. A plain model is equivalent within the floor; a planted per-replica bug
-- a layer that scales its output when the model is distributed -- is found at its layer, forward;
the wrapper trap that scales every gradient by the device count is found as a scale; a loss that
turns NaN on two devices is a finding of its own; a model that
differs and names a control which agrees differs as expected, named; a model that differs with a
control that differs too stays "differs"."""

from __future__ import annotations

import json

import pytest

from .conftest import harness

MATRIX = """\
name: certify-planted
environments:
  - {name: jax, python: "3.11", keras: "3.15.1", backend: jax}
workloads:
  - {name: plain, model: user, path: ./f, build: "factory:build", data: "factory:data"}
  - {name: planted, model: user, path: ./f, build: "factory:planted", data: "factory:data"}
  - {name: trap, model: user, path: ./f, build: "factory:build", data: "factory:data", trap: loss_times_devices}
  - {name: nan, model: user, path: ./f, build: "factory:poisoned", data: "factory:data"}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: data_parallel, devices: 2}
batch_sizes: [32]
epochs: 2
timeouts: {wall: 300, progress: 240}
"""
FACTORY = """\
import keras
import numpy as np


class Scaled(keras.layers.Layer):
    \"\"\"The planted bug: an output that depends on whether the model is distributed.\"\"\"

    def call(self, x):
        return x * (1.25 if keras.distribution.distribution() is not None else 1.0)


def build(**params):
    inputs = keras.Input((8,))
    x = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return keras.Model(inputs, outputs)


def planted(**params):
    inputs = keras.Input((8,))
    x = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    x = Scaled(name="scaled")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return keras.Model(inputs, outputs)


class Poisoned(keras.layers.Layer):
    \"\"\"A NaN that appears only when the model is distributed (as NaN metrics under a strategy do).\"\"\"

    def call(self, x):
        return x * (float("nan") if keras.distribution.distribution() is not None else 1.0)


def poisoned(**params):
    inputs = keras.Input((8,))
    x = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    x = Poisoned(name="poisoned")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return keras.Model(inputs, outputs)


def data(**params):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(320, 8)).astype("float32")  # 256 training rows: whole batches of 32
    y = np.eye(3, dtype="float32")[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1)]
    return x, y
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("certify")
    (root / "f").mkdir()
    (root / "f" / "factory.py").write_text(FACTORY)
    (root / "m.yaml").write_text(MATRIX)
    return root


def certify(root, name: str, *extra: str):
    out = root / f"c-{name}"
    proc = harness("certify", str(root / "m.yaml"), "--engine", "venv", "--results", str(root / "r"),
                   "--out", str(out), *extra, timeout=1800)
    record = json.loads((out / "certificate.json").read_text()) if (out / "certificate.json").is_file() else None
    return proc, record, out


@pytest.mark.tf
def test_one_against_two_devices_equivalent_a_planted_bug_at_its_layer_and_a_gradient_scale(planted):
    proc, record, out = certify(planted, "all")
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]   # something differs
    by = {p["workload"]: p for p in record["pairs"]}
    assert set(by) == {"plain", "planted", "trap", "nan"}, by
    assert by["plain"]["verdict"] == "equivalent", by["plain"]
    bug = by["planted"]
    assert bug["verdict"] == "differs" and bug["where"]["forward"]["layer"] == "scaled", bug   # at its layer
    trap = by["trap"]
    assert trap["verdict"] == "differs" and trap["where"]["scale"] == pytest.approx(2.0, rel=1e-3), trap
    nan = by["nan"]   # a loss that is no number on two devices: a finding of its own, whatever the verdict
    assert nan["finding"].startswith("metric out of range: many") and "nan" in nan["finding"], nan
    assert "finding" not in by["plain"] and not nan["ranges"]["one"], (by["plain"], nan)
    assert all(p["devices"] == 2 and p["wrapper"] == "data_parallel" for p in record["pairs"])
    md = (out / "CERTIFICATE.md").read_text()
    assert "| jax | plain | 1 cpu | data_parallel | 2 cpu | equivalent |" in md, md


@pytest.mark.tf
def test_a_difference_its_control_removes_is_expected_and_named(planted):
    # the planted layer's difference, with `plain` (the same model without that layer) as its control
    proc, record, _ = certify(planted, "control", "--only", "jax/planted/*", "--control", "planted=plain:reduction")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    [pair] = record["pairs"]
    assert pair["verdict"] == "differs as expected" and pair["expected"] == "a loss or metric reduced per replica"
    assert pair["control"]["agrees"] and pair["control"]["workload"] == "plain", pair["control"]
    # a control that differs too explains nothing: the pair stays "differs"
    proc, record, _ = certify(planted, "bad-control", "--only", "jax/planted/*", "--control", "planted=trap:batchnorm")
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    [pair] = record["pairs"]
    assert pair["verdict"] == "differs" and not pair["control"]["agrees"], pair


@pytest.mark.quick
@pytest.mark.parametrize("text", ["planted", "planted=plain", "planted=plain:nonsense", "=plain:batchnorm"])
def test_a_control_that_is_not_workload_control_key_is_one_line_and_exit_2(planted, text):
    proc = harness("certify", str(planted / "m.yaml"), "--control", text, "--engine", "venv",
                   "--results", str(planted / "r-bad"), "--out", str(planted / "c-bad"))
    assert proc.returncode == 2 and "--control" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
        proc.stderr


BN_MATRIX = """\
name: certify-bn
environments:
  - {name: tf215, python: "3.11", tensorflow: "2.15.1"}
workloads:
  - {name: bn, model: user, path: ./f, build: "bn:build", data: "bn:data"}
  - {name: bn-frozen, model: user, path: ./f, build: "bn:frozen", data: "bn:data"}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: mirrored, devices: 2}
batch_sizes: [32]
epochs: 2
timeouts: {wall: 600, progress: 400}
"""
BN_FACTORY = """\
import numpy as np
import tensorflow as tf


def build(trainable_bn=True, **params):
    inputs = tf.keras.Input((8,))
    x = tf.keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    norm = tf.keras.layers.BatchNormalization(name="norm")
    norm.trainable = trainable_bn     # frozen: it normalises with its moving statistics, in training too
    x = norm(x)
    outputs = tf.keras.layers.Dense(3, activation="softmax", name="out")(x)
    return tf.keras.Model(inputs, outputs)


def frozen(**params):
    return build(trainable_bn=False)


def data(**params):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(320, 8)).astype("float32")
    y = np.eye(3, dtype="float32")[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1)]
    return x, y
"""


@pytest.mark.tf
def test_batchnorm_under_mirrored_strategy_differs_as_expected_and_its_frozen_control_agrees(tmp_path):
    """tf.keras 2 (TensorFlow 2.15), MirroredStrategy on two virtual CPU devices: BatchNormalization
    normalises each replica's half of the batch with that half's statistics, so the gradients part
    from one device's; the same model with the layer frozen agrees -- the difference is named."""
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "bn.py").write_text(BN_FACTORY)
    (tmp_path / "m.yaml").write_text(BN_MATRIX)
    proc, record, _ = certify(tmp_path, "bn", "--control", "bn=bn-frozen:batchnorm")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    by = {p["workload"]: p for p in record["pairs"]}
    bn = by["bn"]
    assert bn["verdict"] == "differs as expected", bn
    assert bn["expected"] == "BatchNormalization statistics per replica" and bn["control"]["agrees"], bn
    assert bn["where"]["backward"] and not bn["where"]["forward"], bn["where"]   # training, not inference
    assert by["bn-frozen"]["verdict"] == "equivalent", by["bn-frozen"]
    assert all(p["wrapper"] == "mirrored" and p["devices"] == 2 for p in record["pairs"])
