"""Control cells (matrices/controls.yaml): failures whose answer is known in
advance, observed for real. If one drifts -- a pin that changed, a
classification that broke -- these tests fail."""

from __future__ import annotations

import pytest

from harness.matrix import load
from harness.results.store import iter_results

from .conftest import ROOT, harness

KNOWN = {
    # cell: (status, the signature must contain)
    "tf2.3.4-keras2.2.4/gru-small/none-c1/b128/r0": ("error", "get_default_graph"),
    "tf2.3.4-keras2.2.5/gru-small/none-c1/b128/r0": ("error", "does not support TensorFlow"),
    "tf2.2.3-keras2.3.1/gru-small/multi_gpu_model-c2/b128/r0": ("error", "experimental_list_devices"),
    "tf2.15-numpy2/gru-small/none-c1/b128/r0": ("error", "import:"),
    "tf1.12-keras2.2.4/cudnngru-small/none-c1/b128/r0": ("unsupported", "cuDNN kernels only"),
    "tf2.15/cudnngru-small/none-c1/b128/r0": ("unsupported", "cuDNN kernels only"),
    "tf1.12-keras2.2.4/gru-small/make_parallel-c3/b128/r0": ("error", "Incompatible shapes"),
    "tf2.15/gru-small/make_parallel-c3/b128/r0": ("error", "are incompatible"),
    "tf1.12-keras2.2.4/gru-small/ratio-c3/b128/r0": ("ok", ""),
    "tf2.15/gru-small/ratio-c3/b128/r0": ("ok", ""),
    "tf1.12-keras2.2.4/gru-small/make_parallel-c2/b128/r0": ("ok", ""),
    "tf1.12-keras2.2.4/gru-small/ratio-c2/b128/r0": ("ok", ""),
    "tf1.12-keras2.2.4/gru-oddtail/make_parallel-c2/b128/r0": ("error", "Incompatible shapes"),
}


@pytest.fixture(scope="module")
def control_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    proc = harness("run", "matrices/controls.yaml", "--engine", "venv", "--results", str(out), timeout=3600)
    return proc, {r["cell"]: r for _, r in iter_results(out)}


def test_the_matrix_names_the_known_answers():
    cells = {c.id: c for c in load(ROOT / "matrices/controls.yaml").cells}
    for cell, (status, signature) in KNOWN.items():
        assert cells[cell].expect["status"] == status, cell
        assert signature.lower() in (cells[cell].expect.get("signature") or "").lower(), cell


@pytest.mark.parametrize("cell", sorted(KNOWN))
def test_control_gives_its_known_answer(control_results, cell):
    _, results = control_results
    status, signature = KNOWN[cell]
    r = results[cell]
    got = (r.get("error") or {}).get("signature") or r.get("reason") or ""  # unsupported: its reason
    assert r["status"] == status, (cell, got, r.get("reason"))
    assert signature.lower() in got.lower(), (cell, got)
    assert r["expectation"]["met"], r["expectation"]


def test_a_run_with_every_control_met_exits_zero(control_results):
    proc, results = control_results
    assert all(r["expectation"]["met"] for r in results.values())
    assert proc.returncode == 0, proc.stdout[-3000:]
