"""Planted faults -- a real segfault, abort, OOM, hang, exception, import
failure and silent exit -- classified by the real engines.

The faults fire before TensorFlow is imported, so a bare environment (just a
Python) is enough and these tests stay fast.
"""

from __future__ import annotations

import os

import pytest
from rich.console import Console

from harness.cells import Cell, Environment, Limits, Parallelism, Workload
from harness.matrix import Matrix
from harness.run.runner import Runner

from .conftest import containers_under

BARE = Environment(name="bare", python="3.11")

CASES = {
    # fault: (status, signature must contain)
    "segfault": ("crash", "SIGSEGV"),
    "abort": ("crash", "SIGABRT"),
    "exception": ("error", "exception: RuntimeError: planted fault"),
    "import": ("error", "import: ModuleNotFoundError"),
    "silent_exit": ("crash", "silent-exit"),
    "hang": ("timeout", "no progress within the progress limit; last event: hanging"),
    "memory": ("oom", "oom"),
}


def fault_cells() -> list[Cell]:
    limits = Limits(wall=120, progress=5, memory="300m")
    return [Cell(environment=BARE, workload=Workload(name=f"fault-{kind}", model="fault", params={"fault": kind}),
                 parallelism=Parallelism(), batch_size=1, epochs=1, repeat=0, limits=limits)
            for kind in CASES]


def run_faults(engine, tmp_path) -> dict[str, dict]:
    cells = fault_cells()
    m = Matrix(path=tmp_path / "faults.yaml", name="faults", description="", sha256="", cells=cells)
    results = Runner(m, engine, tmp_path / "results", Console(quiet=True)).complete(cells)
    return {r["workload"].removeprefix("fault-"): r for r in results}


def check(results: dict[str, dict]) -> None:
    assert set(results) == set(CASES)
    for kind, (status, sig) in CASES.items():
        r = results[kind]
        assert r["status"] == status, (kind, r["status"], r["error"], r["logs"]["stderr_tail"][-500:])
        assert sig in r["error"]["signature"] + r["error"]["message"], (kind, r["error"])
    assert results["segfault"]["error"]["signal"] == "SIGSEGV"
    tail = results["segfault"]["logs"]["stderr_tail"]
    assert "faults.py" in tail and "_segfault" in tail, \
        ("faulthandler's stack must be kept for signals: it names the frame the fault fired in", tail[-1500:])
    assert results["abort"]["error"]["signal"] == "SIGABRT"


def test_planted_faults_in_virtualenvs(tmp_path):
    from harness.engines.venv import VenvEngine
    results = run_faults(VenvEngine(), tmp_path)
    check(results)
    assert results["memory"]["error"]["type"].endswith("MemoryError")


@pytest.mark.docker
def test_planted_faults_in_containers(tmp_path, docker_client):
    from harness.engines.docker import DockerEngine
    engine = DockerEngine(docker_client, console=Console(quiet=True))
    results = run_faults(engine, tmp_path)
    check(results)
    assert results["memory"]["exit"]["container_oom_flag"] is True, "a real OOM kill, seen by the engine"
    leftovers = containers_under(docker_client, tmp_path, pid=os.getpid())
    assert not leftovers


def test_a_fault_of_the_harness_around_a_cell_is_that_cells_result_and_the_run_goes_on(tmp_path):
    """The harness's own code failing around a cell -- here an engine whose preparation of one
    environment raises what no engine means to raise -- ends as that cell's recorded `error`,
    marked as the harness's, with its traceback beside it; the other environment's cells run on,
    and the next run tries the faulted cell again."""
    from harness.engines.venv import VenvEngine
    from harness.results.store import ResultStore

    class Planted(VenvEngine):  # a bug in the harness, planted where an engine prepares
        def prepare(self, env, log_path):
            if env.name == "broken":
                raise KeyError("planted: the harness's own bug while preparing")
            return super().prepare(env, log_path)

    limits = Limits(wall=120, progress=30)
    cells = [Cell(environment=Environment(name=name, python="3.11"),
                  workload=Workload(name="fault-silent_exit", model="fault", params={"fault": "silent_exit"}),
                  parallelism=Parallelism(), batch_size=1, epochs=1, repeat=0, limits=limits)
             for name in ("bare", "broken")]
    m = Matrix(path=tmp_path / "m.yaml", name="harness-fault", description="", sha256="", cells=cells)
    runner = Runner(m, Planted(), tmp_path / "results", Console(quiet=True))
    results = {r["environment"]: r for r in runner.complete(cells)}
    assert set(results) == {"bare", "broken"}, "no cell is lost"
    assert results["bare"]["status"] == "crash", "the healthy environment's cell ran as it would have"
    faulted = results["broken"]
    assert faulted["status"] == "error" and faulted["error"]["kind"] == "harness", faulted["error"]
    assert "KeyError" in faulted["error"]["type"] and "harness's own code" in faulted["reason"]
    folder = tmp_path / "results" / "harness-fault" / cells[1].id
    assert "Planted" in (folder / "harness.log").read_text() or "prepare" in (folder / "harness.log").read_text()
    assert ResultStore(tmp_path / "results", "harness-fault").needs_run(cells[1])
    assert not ResultStore(tmp_path / "results", "harness-fault").needs_run(cells[0])
