"""Programs ahead (harness/workloads/ahead.py): a cell standing by with the host's leave traces
and compiles its train and test steps before it is handed its GPUs, and then trains exactly as
it would have -- the same losses, bit for bit -- with nothing left to trace in fit.

Real Keras 3 on JAX (on the CPU, where training is deterministic) in real cell processes, driven
through the standby file as the host drives a follower: the cell prepares, waits at its
`standby` mark until the file is removed, then trains. One and two (virtual) devices: Keras's
DataParallel lays the steps out over a mesh.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness.results.store import iter_results
from harness.workloads.protocol import STANDBY_FILE, STANDBY_PROGRAMS

from .conftest import harness

pytestmark = pytest.mark.tf

MATRIX = """\
name: ahead
environments:
  - {python: "3.11", keras: "3.15.1", backend: jax}
workloads:
  - {model: rnn, cell: gru, layers: 2, units: 16, dense: 16, dropout: 0.2, timesteps: 8, features: 4, classes: 3,
     samples: 640}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: data_parallel, devices: 2}
batch_sizes: [64]
epochs: 3
"""


def _cell(python: str, staged: Path, spec: Path, outdir: Path, standby: str | None) -> dict:
    """Run one cell process as an engine does (`python -m workloads SPEC OUTDIR`, the workloads
    package from the run's `staged` copy). With `standby` (the standby file's content), hand it
    over once it waits at its mark."""
    outdir.mkdir()
    if standby is not None:
        (outdir / STANDBY_FILE).write_text(standby)
    proc = subprocess.Popen([python, "-m", "workloads", str(spec), str(outdir)], cwd=outdir,
                            env={**os.environ, "PYTHONPATH": str(staged)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if standby is not None:
            events = outdir / "events.jsonl"
            deadline = time.monotonic() + 600
            while '"standby"' not in (events.read_text() if events.exists() else ""):
                assert proc.poll() is None, proc.stdout.read()[-3000:]
                assert time.monotonic() < deadline, "never reached its standby mark"
                time.sleep(0.05)
            (outdir / STANDBY_FILE).unlink()  # the hand-over
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    return json.loads((outdir / "workload.json").read_text())


def _losses(workload: dict) -> list:
    return [(e["loss"], e["val_loss"]) for e in workload["epochs"]]


def test_a_cell_that_prepares_its_programs_ahead_trains_the_same_and_traces_nothing_in_fit(tmp_path):
    matrix = tmp_path / "ahead.yaml"
    matrix.write_text(MATRIX)
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "results"), timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {r["cell"]: (folder, r) for folder, r in iter_results(tmp_path / "results" / "ahead")}
    assert len(results) == 2
    for cell, (folder, result) in sorted(results.items()):
        assert result["status"] == "ok", (cell, result.get("error"))
        python = str(Path(result["provenance"]["venv"]) / "bin" / "python")
        staged = next((tmp_path / "results" / "ahead" / ".workloads").glob("*/workloads")).parent
        spec = tmp_path / (cell.replace("/", "_") + ".json")
        shutil.copy(Path(folder) / "spec.json", spec)
        plain = _cell(python, staged, spec, tmp_path / (spec.stem + "-plain"), None)
        ahead = _cell(python, staged, spec, tmp_path / (spec.stem + "-ahead"), STANDBY_PROGRAMS + "\n")
        waited = _cell(python, staged, spec, tmp_path / (spec.stem + "-waited"), "")  # standing by, without leave

        assert ahead["timing"]["programs_ahead"]["programs"] == ["train", "test"], ahead["timing"]
        assert "programs_ahead" not in plain["timing"] and "programs_ahead" not in waited["timing"]
        assert ahead["timing"]["standby"]["prepared_seconds"] >= ahead["timing"]["phases"]["compiled"]
        # the same training, bit for bit, as the harness's own run of the cell and as a cell that
        # stood by without preparing its programs
        assert _losses(ahead) == _losses(plain) == _losses(waited), cell
        assert _losses(plain) == [(e["loss"], e["val_loss"]) for e in result["epochs"]], cell
        # fit traced its steps itself where they were not prepared, and nothing where they were
        assert plain["warmth"]["traced_in_fit"] >= 2, plain["warmth"]
        assert ahead["warmth"]["traced_in_fit"] == 0, ahead["warmth"]
