"""`harness diverge` finds planted differences at the layer they were planted in.

One user factory, real Keras 3 on JAX in a real virtualenv, real processes; environments
that install the same packages and differ only in a variable the factory reads, so each
plants one difference: an activation, an initialiser, a default that moved (GRU's
``reset_after``), an extra layer, a factory that fails; and a wrapper trap that scales
every gradient by the device count. Identical stacks, and 1 against 2 devices without the
trap, find nothing above the floor. The reference side is run once and reused by every
comparison (the results store), as a user's second comparison reuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import harness

MATRIX = """\
name: planted
environments:
  - {name: base, python: "3.11", keras: "3.15.1", backend: jax}
  - {name: same, python: "3.11", keras: "3.15.1", backend: jax}
  - {name: act, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: activation}}
  - {name: init, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: initializer}}
  - {name: default, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: reset_after}}
  - {name: deeper, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: extra_layer}}
  - {name: broken, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: raise}}
workloads:
  - {name: f, model: user, path: ./f, build: "factory:build", data: "factory:data"}
  - {name: trap, model: user, path: ./f, build: "factory:build", data: "factory:data", trap: loss_times_devices}
  - {name: s, script: s.py}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: data_parallel, devices: 2}
batch_sizes: [32]
epochs: 2
timeouts: {wall: 300, progress: 240}
"""
FACTORY = """\
import os

import keras
import numpy as np

PLANT = os.environ.get("PLANT", "")


def build(**params):
    if PLANT == "raise":
        raise RuntimeError("planted: this side's factory fails")
    inputs = keras.Input((8, 4))
    x = keras.layers.GRU(8, reset_after=PLANT != "reset_after", name="gru")(inputs)
    x = keras.layers.Dense(16, activation="tanh" if PLANT == "activation" else "relu", name="hidden",
                           kernel_initializer="he_normal" if PLANT == "initializer" else "glorot_uniform")(x)
    if PLANT == "extra_layer":
        x = keras.layers.Dense(16, name="extra")(x)
    x = keras.layers.Dropout(0.2, name="drop")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return keras.Model(inputs, outputs)


def data(**params):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(256, 8, 4)).astype("float32")
    y = np.eye(3, dtype="float32")[(x[:, :, 0].sum(axis=1) > 0).astype(int) + (x[:, 0, 1] > 1)]
    return x, y
"""
LAYERS = ["gru", "hidden", "drop", "out"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("diverge")
    (root / "f").mkdir()
    (root / "f" / "factory.py").write_text(FACTORY)
    (root / "s.py").write_text("print('a script builds its own model')\n")
    (root / "m.yaml").write_text(MATRIX)
    return root


def diverge(root: Path, a: str, b: str, *extra: str):
    proc = harness("diverge", str(root / "m.yaml"), a, b, "--engine", "venv", "--out", str(root / "out"),
                   "--results", str(root / "results"), "--json", *extra, timeout=1200)
    record = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
    return proc, record


def _above(part: dict) -> list[str]:
    return [r["layer"] for r in part["layers"] if r.get("above")]


@pytest.mark.tf
def test_identical_stacks_report_no_divergence_above_the_floor(planted):
    proc, found = diverge(planted, "base/f/none-c1/", "same/f/none-c1/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not found["diverges"] and found["summary"] == "no divergence above the floor"
    assert [r["layer"] for r in found["layout"]["layers"]] == LAYERS
    assert found["layout"]["unmapped"] == [] and found["configurations"]["differences"] == []
    assert _above(found["forward"]) == [] and _above(found["backward"]) == []
    assert len(found["training"]["epochs"]) == 2 and found["training"]["first"] is None
    assert found["floor"] == "base/f/none-c1/b32/r0" and all(r["floor"] >= 0 for r in found["backward"]["layers"])
    assert found["randomness"]["reference"] == ["drop"]  # the dropout was set to 0 on both sides
    pages = list((planted / "out" / "planted").glob("*/index.html"))
    assert pages and all((p.parent / "divergence.json").is_file() for p in pages)
    assert any((p.parent / "layers.png").is_file() for p in pages)


@pytest.mark.tf
def test_an_activation_that_differs_is_found_at_its_layer(planted):
    proc, found = diverge(planted, "base/f/none-c1/", "act/f/none-c1/")
    assert proc.returncode == 1, proc.stderr[-3000:]
    diffs = found["configurations"]["differences"]
    assert [(d["layer"], d["key"], d["reference"], d["other"]) for d in diffs] == [("hidden", "activation", "relu",
                                                                                   "tanh")]
    assert found["layout"]["unmapped"] == []
    assert found["forward"]["first"]["layer"] == "hidden"
    assert "gru" not in _above(found["forward"])  # the layer before it still agrees
    assert found["training"]["first"]["epoch"] == 1


@pytest.mark.tf
def test_an_initialiser_that_differs_is_a_configuration_difference_at_its_layer(planted):
    """The weights are the reference's on both sides, so only the configuration can show it."""
    proc, found = diverge(planted, "base/f/none-c1/", "init/f/none-c1/")
    assert proc.returncode == 1, proc.stderr[-3000:]
    diffs = found["configurations"]["differences"]
    assert diffs and {d["layer"] for d in diffs} == {"hidden"}
    assert all(d["key"].startswith("kernel_initializer") for d in diffs), diffs
    assert _above(found["forward"]) == [] and _above(found["backward"]) == []


@pytest.mark.tf
def test_a_default_that_moved_leaves_its_layers_weights_unmapped(planted):
    proc, found = diverge(planted, "base/f/none-c1/", "default/f/none-c1/")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert found["layout"]["unmapped"] == [0]
    assert "reset_after" in found["layout"]["layers"][0]["mapped"]
    assert [d["key"] for d in found["configurations"]["differences"]] == ["reset_after"]
    assert found["forward"]["first"]["layer"] == "gru"


@pytest.mark.tf
def test_a_wrapper_that_scales_gradients_on_two_devices_is_found_as_a_scale(planted):
    proc, found = diverge(planted, "base/trap/none-c1/", "base/trap/data_parallel-c2/")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert _above(found["forward"]) == []                     # the outputs agree: the wrapper is in training
    assert found["backward"]["scale"] == pytest.approx(2.0, rel=1e-3)
    assert set(_above(found["backward"])) == {"gru", "hidden", "out"}
    assert len(found["stacks"]["other"]["devices"]) == 2   # the other side ran on two devices
    proc, found = diverge(planted, "base/f/none-c1/", "base/f/data_parallel-c2/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]   # without the trap: the same


@pytest.mark.tf
def test_what_cannot_be_compared_is_one_line_and_exit_2(planted):
    proc, _ = diverge(planted, "base/f/none-c1/", "deeper/f/none-c1/")
    assert proc.returncode == 2 and "extra" in proc.stderr and "deeper/f/none-c1/b32/r0" in proc.stderr, proc.stderr
    proc, _ = diverge(planted, "base/f/none-c1/", "broken/f/none-c1/")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "broken/f/none-c1/b32/r0" in proc.stderr and "factory.py:11" in proc.stderr   # which side, and where
    proc, _ = diverge(planted, "base/s/none-c1/", "same/s/none-c1/")
    assert proc.returncode == 2 and "base/s/none-c1/b32/r0" in proc.stderr
    proc, _ = diverge(planted, "base/f/", "same/f/none-c1/")   # names two cells
    assert proc.returncode == 2 and "CELL_A" in proc.stderr
    assert (planted / "m.yaml").read_text() == MATRIX   # nothing of the user's touched


@pytest.mark.tf
def test_the_report_publishes_each_divergence_as_a_page(planted):
    proc, _ = diverge(planted, "base/f/none-c1/", "act/f/none-c1/")
    assert proc.returncode == 1, proc.stderr[-3000:]
    site = planted / "site"
    proc = harness("report", str(planted / "out" / "cells"), "--diverge", str(planted / "out"), "--out", str(site))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    pages = {p: p.read_text() for p in (site / "diverge").glob("*/index.html")}
    page = next(text for text in pages.values() if "act/f/none-c1/b32/r0" in text)
    assert "activation" in page and "tanh" in page and "layers.png" in page   # the key that differs, the plot
    assert "diverge/" in (site / "index.html").read_text()                      # linked from the index


OWN_MATRIX = """\
name: own
environments:
  - {name: base, python: "3.11", keras: "3.15.1", backend: jax}
  - {name: spelt, python: "3.11", keras: "3.15.1", backend: jax, env: {PLANT: axis}}
workloads:
  - {name: f, model: user, path: ., build: "factory:build", data: "factory:data"}
parallelism:
  - {wrapper: none, devices: 1}
batch_sizes: [32]
epochs: 2
timeouts: {wall: 300, progress: 240}
"""
# Issue 54's model (Conv1D, BatchNormalization, LSTM); one side spells the normalised axis of its
# 3-D input from the end, the other from the start, as Keras 2.2.4 (-1) and tf.keras 2.15 ([2]) did.
AXIS_FACTORY = """\
import os

import keras
import numpy as np

SPELT = os.environ.get("PLANT") == "axis"


def build(**params):
    inputs = keras.Input((8, 4))
    x = keras.layers.Conv1D(6, 3, padding="same", name="conv")(inputs)
    x = keras.layers.BatchNormalization(axis=2 if SPELT else -1, name="norm")(x)
    x = keras.layers.LayerNormalization(axis=[2] if SPELT else -1, name="layernorm")(x)
    x = keras.layers.LSTM(8, name="lstm")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return keras.Model(inputs, outputs)


def data(**params):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(128, 8, 4)).astype("float32")
    y = np.eye(3, dtype="float32")[(x[:, :, 0].sum(axis=1) > 0).astype(int) + (x[:, 0, 1] > 1)]
    return x, y
"""


@pytest.mark.tf
def test_in_its_own_folder_an_axis_spelt_two_ways_is_no_difference_and_a_second_comparison_reruns_nothing(
        tmp_path):
    """Issue 54, run as a user runs it: `diverge` in the folder of the factory and the matrix (`path:
    .`), every option its default, so its output (diverge/, results/) lies inside the code folder.
    The axis spelt two ways is one axis (it was reported "norm.axis -1 -> 2"), and the second
    comparison finds the code unchanged -- its own record once changed the code's hash -- and
    reuses every side instead of running them again."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "m.yaml").write_text(OWN_MATRIX)
    (folder / "factory.py").write_text(AXIS_FACTORY)

    def compare():
        proc = harness("diverge", "m.yaml", "base/", "spelt/", "--engine", "venv", "--json", cwd=folder, timeout=1200)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return json.loads(proc.stdout), proc, {p: json.loads(p.read_text())["started"]
                                               for p in (folder / "diverge" / "cells").rglob("result.json")}
    found, _, first = compare()
    assert found["configurations"]["differences"] == [] and not found["diverges"], found["summary"]
    spelt = json.loads(next((folder / "diverge" / "cells").rglob("spelt/**/layers.json")).read_text())
    norm = next(layer for layer in spelt["layers"] if layer["name"] == "norm")
    assert norm["input_rank"] == 3
    again, proc, second = compare()
    assert len(first) == 3 and second == first, proc.stderr[-3000:]   # the three sides reused, none run again
    assert "changed since" not in proc.stderr + proc.stdout
    assert again["configurations"] == found["configurations"]
