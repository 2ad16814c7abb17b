"""A cell reads only what its matrix says: never the user's home. A ``~/.keras/keras.json``
that asks for float64 and channels-first -- which Keras reads at import -- bends no cell on the
venv or local engine, fresh or forked from a warm launcher; no cell sees the user's
``~/.config``, none writes into the user's home, and none sees what an earlier cell left in its
own. Real Keras 3 in a real virtualenv, real processes; the harness itself runs with the
planted home as its ``HOME``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cells import Environment
from harness.engines.venv import VenvEngine
from harness.files.paths import cache_dir
from harness.results.store import iter_results

from .conftest import harness

MATRIX = """\
name: home
environments:
  - {name: k3, python: "3.11", keras: "3.15.1", backend: jax}
workloads:
  - {name: script, script: home.py}
  - {name: factory, model: user, path: ./f, build: "factory:build", data: "factory:data"}
epochs: 1
repeats: 3
timeouts: {wall: 300, progress: 240}
"""
SCRIPT = """\
import glob
import os

import keras
from workloads.metrics import report

home = os.path.expanduser("~")
report("float64", float(keras.config.floatx() == "float64"))
report("channels_first", float(keras.config.image_data_format() == "channels_first"))
report("sees_user_config", float(os.path.exists(os.path.join(home, ".config", "planted-marker"))))
report("sees_earlier_cells", float(len(glob.glob(os.path.join(home, "left-by-*")))))
open(os.path.join(home, "left-by-%d" % os.getpid()), "w").close()
"""
FACTORY = """\
import glob
import os

import keras
import numpy as np


def _check():
    home = os.path.expanduser("~")
    problems = []
    if keras.config.floatx() != "float32" or keras.config.image_data_format() != "channels_last":
        problems.append("the user's keras.json bent the cell")
    if os.path.exists(os.path.join(home, ".config", "planted-marker")):
        problems.append("the cell sees the user's ~/.config")
    if glob.glob(os.path.join(home, "left-by-*")):
        problems.append("the cell sees what an earlier cell left in its home")
    if problems:
        raise RuntimeError("; ".join(problems))
    open(os.path.join(home, "left-by-%d" % os.getpid()), "w").close()


def build(**params):
    _check()
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])


def data(**params):
    x = np.random.RandomState(0).normal(size=(64, 4)).astype("float32")
    return x, np.eye(2, dtype="float32")[(x[:, 0] > 0).astype(int)]
"""
KERAS_JSON = {"floatx": "float64", "image_data_format": "channels_first", "epsilon": 1e-07, "backend": "jax"}


@pytest.fixture
def planted_home(tmp_path):
    """The user's home, with a Keras configuration and a file of its own, and what the harness
    needs of the real one named by variable (its caches, pyenv's interpreters)."""
    home = tmp_path / "home"
    (home / ".keras").mkdir(parents=True)
    (home / ".keras" / "keras.json").write_text(json.dumps(KERAS_JSON))
    (home / ".config").mkdir()
    (home / ".config" / "planted-marker").write_text("the user's own\n")
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    env = {"HOME": str(home), "HARNESS_CACHE": str(cache_dir()), "PYENV_ROOT": pyenv}
    (tmp_path / "home.py").write_text(SCRIPT)
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "factory.py").write_text(FACTORY)
    (tmp_path / "m.yaml").write_text(MATRIX)
    return home, env


def _check(results: dict, home: Path) -> list[str]:
    assert len(results) == 6, sorted(results)
    for cell, r in results.items():
        assert r["status"] == "ok", (cell, r.get("error"))       # a factory that saw the user's home raised
        m = r["metrics"]
        if r["workload"] == "script":
            assert (m["float64"], m["channels_first"]) == (0.0, 0.0), (cell, m)   # the keras.json bent nothing
            assert m["sees_user_config"] == 0.0 and m["sees_earlier_cells"] == 0.0, (cell, m)
        else:   # recorded, whatever set it
            assert r["seen"]["keras_config"] == {"floatx": "float32", "image_data_format": "channels_last"}, r["seen"]
        assert "user's home is not read" in r["exit"]["home"], r["exit"]
    assert not list(home.glob("left-by-*")) and json.loads((home / ".keras" / "keras.json").read_text()) == KERAS_JSON
    assert sorted(p.name for p in home.iterdir()) == [".config", ".keras"]  # nothing written into the user's home
    return [(r["warmth"] or {}).get("launch") for r in results.values()]


@pytest.mark.tf
def test_the_users_keras_json_bends_no_venv_cell_fresh_or_warm(tmp_path, planted_home):
    home, env = planted_home
    launches = []
    for label, flags in (("fresh", ["--fresh"]), ("warm", [])):
        proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(tmp_path / label),
                       *flags, env=env, timeout=1800)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        launches += _check({r["cell"]: r for _, r in iter_results(tmp_path / label)}, home)
    assert "warm" in launches and "fresh" in launches, launches          # both ways of starting a cell were seen


@pytest.mark.tf
def test_the_users_keras_json_bends_no_local_cell(tmp_path, planted_home):
    home, env = planted_home
    with VenvEngine() as engine:   # held in use while the local run's cells are in it
        venv = engine.prepare(Environment(name="k3", python="3.11", keras="3.15.1", backend="jax"),
                              tmp_path / "build.log")   # the same virtualenv as the venv test's (cached)
        python = str(Path(venv.handle) / "bin" / "python")
        proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "local", "--python", f"3.11={python}",
                       "--results", str(tmp_path / "r"), "--fresh", env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check({r["cell"]: r for _, r in iter_results(tmp_path / "r")}, home)
