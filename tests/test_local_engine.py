"""The local engine runs cells on an interpreter that already holds the stack
(a GPU node without network or Docker), and refuses one whose versions differ
from the pins instead of reporting numbers for the wrong stack."""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness.cells import Environment
from harness.engines.venv import VenvEngine
from harness.results.store import iter_results

from .conftest import harness

MATRIX = textwrap.dedent("""
    name: local-check
    environments:
      - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
      - {name: wrong-pin, python: "3.11", tensorflow: "2.14.0"}
    workloads:
      - {model: rnn, cell: gru, layers: 1, units: 8, dense: 8, timesteps: 4, features: 4, samples: 512}
    epochs: 2
    """)


def test_local_engine_uses_the_interpreter_as_it_is(tmp_path):
    env = Environment(name="tf2.15", python="3.11", tensorflow="2.15.0", packages=("numpy<2",))
    (tmp_path / "m.yaml").write_text(MATRIX)
    with VenvEngine() as engine:   # held in use while the local run's cells are in it
        venv = engine.prepare(env, tmp_path / "build.log")  # the same venv the other tests use (cached)
        python = str(Path(venv.handle) / "bin" / "python")
        proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "local", "--python", f"3.11={python}",
                       "--results", str(tmp_path / "r"))
    results = {r["environment"]: r for _, r in iter_results(tmp_path / "r")}
    assert results["tf2.15"]["status"] == "ok", results["tf2.15"].get("error")
    assert results["tf2.15"]["engine"] == "local" and results["tf2.15"]["seen"]["tensorflow"] == "2.15.0"
    wrong = results["wrong-pin"]
    assert wrong["status"] == "unavailable"
    assert "tensorflow-cpu==2.14.0 (found 2.15.0)" in wrong["reason"], wrong["reason"]
    assert proc.returncode == 0, proc.stderr[-2000:]
