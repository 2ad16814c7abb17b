"""Held-out cells (matrices/held-out.yaml): setups the harness was never tuned to, written as a
new user would, run in real virtualenvs. Each must give its status and a signature that names
the real cause -- the root of a chained exception, the missing native library, the running
Keras that differs from the one asked -- never a wrapper's re-raise or "Traceback (most recent
call last):".

The whole matrix runs with TF_USE_LEGACY_KERAS=1 and KERAS_BACKEND=torch set for the harness:
a variable that leaked into a cell would change its answer (tf.keras would become tf_keras)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from harness.environments import interpreters
from harness.host.supervise import RawOutcome
from harness.matrix import load
from harness.names import file_name
from harness.results.store import iter_results
from harness.status import outcome
from harness.workloads.protocol import EXIT_ERROR

from .conftest import ROOT, harness

MATRIX = "matrices/held-out.yaml"
KNOWN = {
    # cell: (status, the signature must contain)
    "tf2.15.1-standalone-keras2.2.4/gru-small/none-c1/b128/r0":
        ("error", "import: ImportError: cannot import name 'Iterable' from 'collections'"),
    "tf2.15.1-tf.keras-keras2.2.4/gru-small/none-c1/b128/r0":
        ("error", "import: ImportError: cannot import name 'Iterable' from 'collections'"),
    "tf2.3.4-keras2.2.4/gru-small/none-c1/b128/r0": ("error", "get_default_graph"),
    "tf2.21-tf_keras/gru-small/none-c1/b128/r0": ("ok", ""),
    "tf2.21-tf_keras2.15.1/gru-small/none-c1/b128/r0":
        ("error", "has no attribute 'register_load_context_function'"),
    "tf2.21-standalone/gru-small/none-c1/b128/r0": ("error", "keras mismatch: asked standalone keras"),
    # the missing library, named first (the loader's sentence after it is the host C library's, not ours)
    "tf1.12-keras2.2.4-tensorflow-gpu/gru-small/none-c1/b128/r0": ("error", "import: ImportError: libcublas.so.9.0"),
    "tf1.12-keras2.2.4/gru-small/make_parallel-c2/b127/r0": ("error", "Incompatible shapes: <shape> vs. <shape>"),
    "tf2.15/gru-small/make_parallel-c2/b127/r0": ("error", "Incompatible shapes: <shape> vs. <shape>"),
}
LEAKS = {"TF_USE_LEGACY_KERAS": "1", "KERAS_BACKEND": "torch"}


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    proc = harness("run", MATRIX, "--engine", "venv", "--results", str(out), timeout=5400, env=LEAKS)
    return proc, {r["cell"]: r for _, r in iter_results(out)}


def test_the_matrix_names_the_known_answers():
    cells = {c.id: c for c in load(ROOT / MATRIX).cells}
    assert set(cells) == set(KNOWN)
    for cell, (status, _) in KNOWN.items():
        assert cells[cell].expect["status"] == status, cell


@pytest.mark.parametrize("cell", sorted(KNOWN))
def test_held_out_cell_names_the_real_cause(held_out, cell):
    _, results = held_out
    status, signature = KNOWN[cell]
    r = results[cell]
    err = r.get("error") or {}
    got = err.get("signature") or ""
    assert r["status"] == status, (cell, got, r.get("reason"), r["logs"]["stderr_tail"][-1500:])
    assert signature.lower() in got.lower(), (cell, got)
    assert "Traceback" not in got and "cannot be imported" not in got, got
    assert r["expectation"]["met"], r["expectation"]


def test_a_wrapper_reraise_keeps_its_outer_message(held_out):
    err = held_out[1]["tf2.15.1-tf.keras-keras2.2.4/gru-small/none-c1/b128/r0"]["error"]
    assert "Keras cannot be imported" in err["outer"]["message"], err
    assert err["chain"][0]["link"] == "context" and "Iterable" in err["chain"][-1]["message"]


def test_a_native_library_failure_keeps_tensorflows_message(held_out):
    err = held_out[1]["tf1.12-keras2.2.4-tensorflow-gpu/gru-small/none-c1/b128/r0"]["error"]
    assert "Failed to load the native TensorFlow runtime" in err["outer"]["message"]   # TF 1.12.0's, pinned
    # the root: an ImportError naming the missing library first (the rest of that line is the host loader's)
    assert err["kind"] == "import" and err["type"].rsplit(".", 1)[-1] == "ImportError", err
    assert err["message"].startswith("libcublas.so.9.0"), err


def test_the_result_says_which_keras_ran(held_out):
    results = held_out[1]
    legacy = results["tf2.21-tf_keras/gru-small/none-c1/b128/r0"]
    assert legacy["seen"]["keras_api"] == "tf_keras" and legacy["seen"]["keras_module"].startswith("tf_keras")
    assert legacy["seen"]["variables"] == {"KERAS_BACKEND": None, "TF_USE_LEGACY_KERAS": "1"}
    bundled = results["tf2.15/gru-small/make_parallel-c2/b127/r0"]["seen"]
    assert bundled["keras_api"] == "tf.keras", "a TF_USE_LEGACY_KERAS set for the harness leaked into the cell"
    assert bundled["variables"] == {"KERAS_BACKEND": None, "TF_USE_LEGACY_KERAS": None}
    wrong = results["tf2.21-standalone/gru-small/none-c1/b128/r0"]
    # TF 2.21 leaves its Keras unpinned: Keras 3 or later, never the standalone Keras 2 asked
    assert wrong["seen"]["keras_api"] == "keras3" and int(wrong["seen"]["keras"].split(".")[0]) >= 3


def test_a_run_with_every_held_out_cell_as_expected_exits_zero(held_out):
    proc, results = held_out
    assert set(results) == set(KNOWN)
    assert proc.returncode == 0, proc.stdout[-3000:]


FORCED = "tf2.15.1-standalone-keras2.2.4/gru-small/none-c1/b128/r0"


def test_a_forced_bundle_reproduces_from_an_empty_folder(tmp_path, held_out):
    """keras==2.2.4 forced onto TF 2.15: the environment's freeze holds pins pip refuses
    together; run.sh must make the venv the way it was made and give the same answer."""
    out = tmp_path / "bundles"
    harness("repro", FORCED, "--matrix", MATRIX, "--engine", "venv", "--out", str(out), check=True, timeout=1800)
    bundle = out / file_name(FORCED)
    lock = (bundle / "environment" / "requirements.lock").read_text()
    assert "keras==" not in lock.lower() and "tensorflow-cpu==2.15.1" in lock
    assert (bundle / "environment" / "forced.txt").read_text() == "keras==2.2.4\n"
    clean = tmp_path / "elsewhere"
    shutil.copytree(bundle, clean, ignore=shutil.ignore_patterns("attempts"))
    run = subprocess.run(["bash", "run.sh"], cwd=clean, capture_output=True, text=True, timeout=1800,
                         env={**os.environ, **LEAKS, "PYTHON": interpreters.find("3.11")[0]})
    assert run.returncode == EXIT_ERROR, run.stdout + run.stderr[-3000:]
    assert '"outcome": "error"' in run.stdout
    workload = json.loads((clean / "out" / "workload.json").read_text())
    raw = RawOutcome(exit_code=run.returncode, signal=None, timed_out=None, seconds=None)
    replayed = outcome.classify(raw, workload, None, run.stderr[-4000:])
    original = held_out[1][FORCED]
    assert (replayed.status, replayed.error["signature"]) == (original["status"], original["error"]["signature"])
