"""The local executor for real: cells side by side on disjoint GPU and CPU sets,
the same answers as one at a time, two runs sharing one results folder, and
cells that die with a killed harness. Real processes throughout; the GPU
inventory is declared (``--gpus``), which is how CI tests GPU packing
without GPUs: every cell must see exactly its own set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results.store import iter_results

from .conftest import ROOT, as_from_a_terminal, harness

pytestmark = pytest.mark.tf


def _results(folder: Path) -> dict[str, dict]:
    return {r["cell"]: r for _, r in iter_results(folder)}


def _span(folder: Path, result: dict) -> tuple[float, float]:
    """When the cell held its slot, on the host's clock (a cell that stood by: from the hand-over)."""
    return tuple(result["timing"]["window"])


def test_each_gpu_cell_sees_only_its_own_gpus_and_neighbours_never_share(tmp_path):
    proc = harness("run", "tests/matrices/gpu-sets.yaml", "--engine", "venv", "--gpus", "0,1,2,3",
                   "--results", str(tmp_path), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "gpu-sets"
    results = _results(run)
    assert len(results) == 12
    spans = {}
    for cell, r in results.items():
        if "-g5/" in cell:
            assert r["status"] == "unsupported"
            assert "5 GPUs asked, this host has 4" in r["reason"]
            continue
        assert r["status"] == "ok", (cell, r.get("error"))
        given = r["resources"]["cuda_visible_devices"]
        start = json.loads((run / cell / "events.jsonl").read_text().splitlines()[0])
        assert start["cuda_visible_devices"] == given, cell          # seen inside == assigned
        assert len(given.split(",")) == r["parallelism"]["devices"]
        spans[cell] = (*_span(run, r), set(given.split(",")), set(r["resources"]["cpus"]))
    overlapped = 0
    cells = sorted(spans)
    for i, a in enumerate(cells):
        for b in cells[i + 1:]:
            (a0, a1, ga, ca), (b0, b1, gb, cb) = spans[a], spans[b]
            if a0 < b1 and b0 < a1:  # ran at the same time
                overlapped += 1
                assert not ga & gb, (a, b, ga, gb)
                assert not ca & cb, (a, b, ca, cb)
    assert overlapped, "no two cells ran side by side"
    assert "on gpu " in proc.stdout  # the terminal says what ran where
    # a warm run: a cell that found no free GPUs stood by on a running cell's set (or a piece of
    # a larger one), prepared, and was handed it when that cell ended -- never two cells on one GPU
    followers = {c: r for c, r in results.items() if r["timing"].get("standby")}
    assert followers, "no cell stood by"
    for cell, r in followers.items():
        start, _, gpus, _ = spans[cell]
        before = [c for c in spans if c != cell and gpus <= spans[c][2] and abs(spans[c][1] - start) < 1.0]
        assert before, (cell, "was handed its GPUs by no cell that ended then")
        assert r["timing"]["held_seconds"] < r["timing"]["total_seconds"]  # its process started ahead
        events = [json.loads(line)["event"] for line in (run / cell / "events.jsonl").read_text().splitlines()]
        assert events.index("standby") < events.index("go") < events.index("idle")
        assert not (run / cell / "standby").exists()
        leader = results[before[0]]["warmth"]["beside"]
        assert any(b["kind"] == "next cell preparing" and b["name"] == cell for b in leader), leader
        assert not any(b["name"] == cell for b in r["warmth"]["beside"])  # its own preparation is not beside it


def _statuses(folder: Path) -> dict[str, tuple[str, str]]:
    return {c: (r["status"], (r.get("error") or {}).get("signature") or "") for c, r in _results(folder).items()}


def test_packed_run_gives_the_same_answers_as_one_at_a_time(tmp_path):
    packed = harness("run", "matrices/faults.yaml", "--engine", "venv", "--results", str(tmp_path / "p"),
                     timeout=1800)
    serial = harness("run", "matrices/faults.yaml", "--engine", "venv", "--jobs", "1",
                     "--results", str(tmp_path / "s"), timeout=1800)
    assert packed.returncode == 0 and serial.returncode == 0, packed.stdout[-2000:] + serial.stdout[-2000:]
    assert _statuses(tmp_path / "p") == _statuses(tmp_path / "s")
    assert len(_statuses(tmp_path / "p")) == 7
    # side by side in the packed run, never in the serial one
    def overlaps(folder):
        spans = [_span(folder / "faults", r) for r in _results(folder).values()]
        return sum(1 for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1])
    assert overlaps(tmp_path / "p") > 0
    assert overlaps(tmp_path / "s") == 0


def test_two_runs_on_one_results_folder_both_finish_with_every_result(tmp_path):
    args = [sys.executable, "-m", "harness", "run", "matrices/faults.yaml", "--engine", "venv",
            "--results", str(tmp_path)]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=1800) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    results = _results(tmp_path / "faults")
    assert len(results) == 7
    assert all(r["expectation"]["met"] for r in results.values())
    assert not list((tmp_path / "faults").glob("**/*.partial-*"))


def _cell_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "workloads" in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


def test_kill_9_of_the_harness_leaves_no_cell_process_and_the_rerun_resumes(tmp_path):
    """The hang cell would run until its limit; with the harness killed, it must go at once,
    and the next run removes what it left: its partial folder and its temp folder."""
    args = [sys.executable, "-m", "harness", "run", "matrices/faults.yaml", "--engine", "venv", "--jobs", "2",
            "--only", "*fault-exception*", "--only", "*fault-hang*", "--results", str(tmp_path)]
    temp = tmp_path / "tmp"  # the harness's temp folder, where each cell gets its own
    temp.mkdir()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "TMPDIR": str(temp)})
    marker = str(tmp_path)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:   # wait until the hang cell is running and the exception one has finished
        hanging = list((tmp_path / "faults").glob("**/fault-hang/**/*.partial-*/events.jsonl"))
        if hanging and "hanging" in hanging[0].read_text() and _cell_processes(marker) \
                and _results(tmp_path / "faults"):
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the hang cell never started")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone = time.monotonic() + 15
    while _cell_processes(marker) and time.monotonic() < gone:
        time.sleep(0.2)
    assert _cell_processes(marker) == [], "a cell process outlived the harness"
    finished = _results(tmp_path / "faults")
    assert [c for c in finished if "fault-exception" in c], "the finished cell's result was lost"
    left = [p.name for p in temp.iterdir()]
    assert len(left) == 1 and left[0].startswith("harness-cell-"), left  # the killed cell's; the finished one's went
    (temp / "unrelated").mkdir()  # not a cell's: stays
    again = harness("run", "matrices/faults.yaml", "--engine", "venv", "--only", "*fault-exception*",
                    "--only", "*fault-hang*", "--results", str(tmp_path), timeout=600)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "removed 1 half-written cell folder" in again.stdout
    assert [p.name for p in temp.iterdir()] == ["unrelated"], "the dead run's cell temp folder is removed"
    assert "1 of 2 cells already have results" in again.stdout
    assert len(_results(tmp_path / "faults")) == 2


def test_ctrl_c_during_a_packed_run_keeps_finished_results_and_resumes(tmp_path):
    args = [sys.executable, "-m", "harness", "run", "matrices/faults.yaml", "--engine", "venv",
            "--results", str(tmp_path)]
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)}, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(_results(tmp_path / "faults")) < 2:
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "interrupted" in err and "Traceback" not in err, err[-3000:]
    kept = _results(tmp_path / "faults")
    assert 2 <= len(kept) < 7
    assert not list((tmp_path / "faults").glob("**/*.partial-*"))
    assert _cell_processes(str(tmp_path)) == []
    assert not list(temp.iterdir()), "an interrupted cell's temp folder (or a launcher's) is left"
    again = harness("run", "matrices/faults.yaml", "--engine", "venv", "--results", str(tmp_path), timeout=900)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"{len(kept)} of 7 cells already have results" in again.stdout
    assert len(_results(tmp_path / "faults")) == 7


HANG_IN_A_CONTAINER = """
name: orphan
environments:
  - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
workloads:
  - {model: fault, fault: hang}
batch_sizes: [1]
timeouts: {wall: 20, progress: 600}
"""


@pytest.mark.docker
def test_kill_9_of_the_harness_leaves_no_container_past_the_wall_limit(tmp_path, docker_client):
    matrix = tmp_path / "orphan.yaml"
    matrix.write_text(HANG_IN_A_CONTAINER)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "docker",
                             "--results", str(tmp_path / "r")], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)

    def ours():
        return [c for c in docker_client.containers.list(filters={"label": "tfkeras-harness"})
                if (c.labels or {}).get("tfkeras-harness.pid") == str(proc.pid)]

    deadline = time.monotonic() + 1200      # the image may have to be built first
    while time.monotonic() < deadline and not ours():
        assert proc.poll() is None, "the harness ended before its cell started"
        time.sleep(0.5)
    assert ours(), "the cell's container never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone = time.monotonic() + 20 + 10 + 30  # wall + the backstop's grace + slack
    while ours() and time.monotonic() < gone:
        time.sleep(1)
    assert ours() == [], "a container outlived its wall limit after the harness was killed"


def test_a_run_whose_every_cell_cannot_run_ends(tmp_path):
    """Unsupported and unavailable cells alone: recorded, and the run exits (it once waited forever)."""
    matrix = tmp_path / "nothing-runs.yaml"
    matrix.write_text('name: nothing-runs\nenvironments: [{python: "3.11", tensorflow: "9.9.9"}]\n'
                      'workloads: [{model: idle, seconds: 1}]\n'
                      'parallelism: [{wrapper: none, devices: 1}, {wrapper: data_parallel, devices: 64, '
                      'device_kind: gpu}]\n')
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(r["status"] for r in _results(tmp_path / "r" / "nothing-runs").values()) == \
        ["unavailable", "unavailable"]
