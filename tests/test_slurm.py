"""The Slurm executor against a real Slurm (``.ci/slurm-up`` brings up a single node with two fake
GPUs and accounting). Skipped with the reason when no Slurm answers, unless HARNESS_REQUIRE_SLURM=1.
Array tasks of one run share the results folder side by side, as on a real cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.portability import publish
from harness.results.store import iter_results

from .conftest import ROOT, harness

pytestmark = pytest.mark.slurm

# The environment of matrices/faults.yaml, so every matrix here reuses its virtualenv.
ENV = """environments:
  - python: "3.11"
    tensorflow: "2.15.0"
    packages: ["numpy<2"]
"""


@pytest.fixture(scope="module")
def slurm() -> None:
    why = None
    try:
        info = subprocess.run(["sinfo", "-h", "-o", "%T %G"], capture_output=True, text=True, timeout=30)
        if info.returncode != 0 or not info.stdout.strip():
            why = f"no Slurm answers: {info.stderr.strip() or 'sinfo lists no node'}"
        else:
            acct = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True, timeout=30)
            if acct.returncode != 0 or "disabled" in acct.stderr:
                why = f"Slurm answers but has no accounting (sacct: {acct.stderr.strip()})"
    except FileNotFoundError:
        why = "no Slurm client on PATH (.ci/slurm-up brings up a single-node cluster)"
    except subprocess.TimeoutExpired:
        why = "slurmctld does not answer"
    if why:
        if os.environ.get("HARNESS_REQUIRE_SLURM") == "1":
            pytest.fail(f"Slurm is required here: {why}")
        pytest.skip(why)


def submit(matrix: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    return harness("run", str(matrix), "--engine", "venv", "--results", str(results), "--executor", "slurm",
                   *args, check=True)


def wait(matrix: Path, results: Path, seconds: int = 240) -> str:
    out = harness("status", str(matrix), "--results", str(results), "--wait", str(seconds), check=True).stdout
    assert "running 0" in out and "queued 0" in out, out
    return out


def by_cell(results: Path) -> dict[str, dict]:
    return {r["cell"]: r for _, r in iter_results(results)}


def submissions(run_dir: Path) -> list[Path]:
    return sorted((run_dir / ".slurm").glob("*/submission.json"))


def jobs(sub: Path) -> list[str]:
    return [json.loads(line)["job"] for line in (sub.parent / "jobs.jsonl").read_text().splitlines()]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def time_limited(slurm, tmp_path_factory):
    """A task that only Slurm's time limit ends, submitted when the file's first test starts: its
    minute is waited for by the last test of the file, while the tests between run beside it."""
    # The harness's own limits are far away; Slurm's one minute ends the task first. The cell is a
    # control cell whose matrix expects it to finish: the kill is drift, in `status` and in the report.
    tmp_path = tmp_path_factory.mktemp("time-limit")
    matrix = write(tmp_path / "slow.yaml", ENV + """workloads:
  - {model: fault, fault: hang}
batch_sizes: [1]
timeouts: {wall: 900, progress: 900}
expect:
  - {workload: fault-hang, status: ok, why: "a control cell that Slurm kills"}
""")
    submitted = submit(matrix, tmp_path / "results", "--sbatch-arg=--time=1")
    return tmp_path, matrix, submitted


def test_a_submission_returns_while_its_task_runs(time_limited):
    """`--executor slurm` submits and returns: the task is still queued or running after it."""
    tmp_path, matrix, submitted = time_limited
    assert "submitted array" in submitted.stdout and "1 cell(s)" in submitted.stdout, submitted.stdout
    proc = harness("status", str(matrix), "--results", str(tmp_path / "results"))
    assert "running 1" in proc.stdout or "queued 1" in proc.stdout, proc.stdout


def test_faults_give_the_same_statuses_as_a_local_run(slurm, tmp_path):
    faults = ROOT / "matrices" / "faults.yaml"
    harness("run", str(faults), "--engine", "venv", "--results", str(tmp_path / "local"), check=True)
    out = submit(faults, tmp_path / "slurm").stdout
    assert "submitted array" in out and "7 cell(s)" in out, out
    wait(faults, tmp_path / "slurm")

    local, remote = by_cell(tmp_path / "local"), by_cell(tmp_path / "slurm")
    assert set(local) == set(remote) and len(remote) == 7
    for cell, want in local.items():
        got = remote[cell]
        assert (got["status"], got["error"]["signature"]) == (want["status"], want["error"]["signature"]), cell
        assert got["expectation"]["met"], (cell, got["error"])
    assert remote["tf2.15/fault-hang/none-c1/b1/r0"]["status"] == "timeout"

    run_dir = tmp_path / "slurm" / "faults"
    [sub] = submissions(run_dir)
    logs = sorted((sub.parent / "logs").glob("*.out"))
    assert len(logs) == 7 and all("reused (venv)" in log.read_text() for log in logs), \
        "the environment is prepared once on the submit side; tasks reuse it"
    seen = [json.loads(p.read_text()) for p in (sub.parent / "tasks").glob("*.json")]
    assert {s["CUDA_VISIBLE_DEVICES"] for s in seen} == {""}, "a task granted no GPU sees none"

    again = submit(faults, tmp_path / "slurm").stdout
    assert "7 of 7 cells already have results" in again and "nothing to submit" in again, again


def test_fresh_reaches_the_tasks(slurm, tmp_path):
    """`run --fresh --executor slurm`: each task runs its cell clean-room (no caches, nothing decided
    before launch), as the local run does; without it a task gets the caches and the host's verdicts."""
    matrix = write(tmp_path / "m.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
  - {name: dp, model: rnn, cell: gru, layers: 1, units: 4, samples: 64}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: data_parallel, devices: 2}
include:
  - {workload: fault-exception, wrapper: none}
  - {workload: dp, wrapper: data_parallel}
batch_sizes: [8]
epochs: 1
""")
    for label, flags in (("fresh", ["--fresh"]), ("warm", [])):
        submit(matrix, tmp_path / label, *flags)
        wait(matrix, tmp_path / label)
    fresh, warm = by_cell(tmp_path / "fresh"), by_cell(tmp_path / "warm")
    assert set(fresh) == set(warm) and len(fresh) == 2
    dp = next(c for c in fresh if "data_parallel" in c)
    fault = next(c for c in fresh if "fault" in c)
    assert fresh[dp]["status"] == warm[dp]["status"] == "unsupported"
    assert fresh[dp]["reason"] == warm[dp]["reason"], "the same words, launched or decided on the host"
    assert fresh[dp]["exit"] is not None and warm[dp]["exit"] is None, "--fresh launches it; else the host decides"
    assert fresh[fault]["warmth"]["caches"] == [] and "HARNESS_DATA_DIR" in warm[fault]["warmth"]["caches"]


def test_cancelled_tasks_run_again_on_the_next_submission(slurm, tmp_path):
    matrix = write(tmp_path / "three.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
  - {model: fault, fault: abort}
  - {model: fault, fault: silent_exit}
batch_sizes: [1]
timeouts: {wall: 60, progress: 30}
""")
    results = tmp_path / "results"
    submit(matrix, results, "--sbatch-arg=--hold")  # held, so the test decides what runs and what is cancelled
    [sub] = submissions(results / "three")
    [job] = jobs(sub)
    subprocess.run(["scontrol", "release", f"{job}_0"], check=True, timeout=30)
    subprocess.run(["scancel", f"{job}_1", f"{job}_2"], check=True, timeout=30)
    out = wait(matrix, results)
    assert "finished 1 (error 1)" in out and "missing 2" in out, out
    assert out.count("cancelled while pending") == 2, out
    first = by_cell(results)["tf2.15/fault-exception/none-c1/b1/r0"]

    out = submit(matrix, results).stdout
    assert "1 of 3 cells already have results" in out and "2 cell(s)" in out, out
    newest = submissions(results / "three")[-1]
    assert (newest.parent / "cells.txt").read_text().split() == [
        "tf2.15/fault-abort/none-c1/b1/r0", "tf2.15/fault-silent_exit/none-c1/b1/r0"]
    out = wait(matrix, results)
    assert "finished 3 (crash 2, error 1)" in out and "missing 0" in out, out
    assert by_cell(results)["tf2.15/fault-exception/none-c1/b1/r0"]["started"] == first["started"], \
        "the finished cell was not run again"


def test_a_gpu_task_sees_the_gpus_slurm_grants(slurm, tmp_path):
    matrix = write(tmp_path / "gpus.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
parallelism:
  - {wrapper: mirrored, devices: 2, device_kind: gpu}
batch_sizes: [1]
timeouts: {wall: 60, progress: 30}
""")
    submit(matrix, tmp_path / "results")
    wait(matrix, tmp_path / "results")
    [sub] = submissions(tmp_path / "results" / "gpus")
    assert "#SBATCH --gres=gpu:2" in (sub.parent / "array-0.sh").read_text()
    [seen] = [json.loads(p.read_text()) for p in (sub.parent / "tasks").glob("*.json")]
    assert seen["CUDA_VISIBLE_DEVICES"] == "0,1", seen
    [result] = by_cell(tmp_path / "results").values()
    assert result["status"] == "error", "the cell itself ran in the allocation"


def test_bad_slurm_section_is_one_clear_line(tmp_path):
    matrix = write(tmp_path / "bad.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
slurm: {partiton: gpu, throttle: 0}
""")
    proc = harness("run", str(matrix), "--executor", "slurm", "--results", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "slurm.partiton: unknown key; did you mean 'partition'?" in proc.stderr
    assert "slurm.throttle: expected at least 1, got 0" in proc.stderr


def test_a_task_killed_for_memory_is_oom(slurm, tmp_path):
    # The cell's own limit (an address-space limit in a virtualenv) is far above what the `slurm:` section
    # gives the task, so Slurm's memory enforcement kills it first.
    matrix = write(tmp_path / "greedy.yaml", ENV + """workloads:
  - {model: fault, fault: memory}
batch_sizes: [1]
timeouts: {wall: 120, progress: 60}
memory_limit: 6g
slurm: {mem: 400m}
""")
    submit(matrix, tmp_path / "results")
    out = wait(matrix, tmp_path / "results")
    assert "finished 1 (oom 1)" in out, out
    [result] = by_cell(tmp_path / "results").values()
    assert result["status"] == "oom" and result["error"]["slurm_state"] == "OUT_OF_MEMORY", result["error"]
    assert "Slurm killed the task for memory" in result["error"]["message"]


def test_ctrl_c_while_submitting_loses_nothing(slurm, tmp_path):
    # Ctrl-C arrives at the worst moment: while sbatch is submitting the first array. sbatch here is the
    # real one, behind a wrapper that interrupts its caller first.
    real = shutil.which("sbatch")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "sbatch", f'#!/bin/sh\nkill -INT $PPID\nexec {real} "$@"\n').chmod(0o755)
    matrix = write(tmp_path / "two.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: none, devices: 1, device_kind: gpu}
batch_sizes: [1]
timeouts: {wall: 60, progress: 30}
""")
    results = tmp_path / "results"
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(results), "--executor", "slurm",
                   env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 130, proc.stdout + proc.stderr
    [sub] = submissions(results / "two")
    assert len(jobs(sub)) == 1, "the array sbatch accepted is written down; the second was never sent"
    out = wait(matrix, results)
    assert "finished 1 (error 1)" in out and "missing 1" in out, out
    out = submit(matrix, results).stdout
    assert "1 of 2 cells already have results" in out and "1 cell(s)" in out, out
    assert "finished 2 (error 2)" in wait(matrix, results)


@pytest.mark.docker
def test_cells_run_in_containers_from_array_tasks(slurm, docker_client, tmp_path):
    # The image is built once on the submit side (it is the one the Docker engine tests build) and the
    # node's task runs its container: a planted segfault and a real container OOM kill, as locally.
    faults = ROOT / "matrices" / "faults.yaml"
    only = ["--only", "tf2.15/fault-segfault/*", "--only", "tf2.15/fault-memory/*"]
    out = harness("run", str(faults), "--engine", "docker", "--results", str(tmp_path), "--executor", "slurm",
                  *only, check=True).stdout
    assert "2 cell(s)" in out, out
    wait(faults, tmp_path)
    results = {r["workload"]: r for r in by_cell(tmp_path).values()}
    assert set(results) == {"fault-segfault", "fault-memory"}
    assert results["fault-segfault"]["error"]["signal"] == "SIGSEGV"
    assert results["fault-memory"]["exit"]["container_oom_flag"] is True
    assert all(r["engine"] == "docker" and r["expectation"]["met"] for r in results.values())


def test_cells_asking_the_same_resources_share_an_array(tmp_path):
    from harness.matrix import load
    from harness.options.slurm import SlurmOptions
    from harness.run.executors.slurm.queue import _expand
    from harness.run.executors.slurm.submit import plan
    m = load(write(tmp_path / "mixed.yaml", ENV + """workloads:
  - {model: fault, fault: exception}
  - {model: fault, fault: abort}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: mirrored, devices: 2, device_kind: gpu}
batch_sizes: [1]
timeouts: {wall: 100, progress: 30}
memory_limit: 2g
slurm: {partition: from-matrix, throttle: 3, sbatch_args: ["--qos=a"]}
"""))
    opts = SlurmOptions.merged(m.slurm, partition="from-cli", sbatch_args=["--qos=b"])
    assert (opts.partition, opts.throttle, opts.sbatch_args) == ("from-cli", 3, ["--qos=a", "--qos=b"])
    arrays = plan(m.cells, opts)
    assert [(len(a.cells), a.offset, a.resources.directives()) for a in arrays] == [
        (2, 0, ["--cpus-per-task=1", "--time=7", "--mem=3072M"]),
        (2, 2, ["--cpus-per-task=2", "--time=7", "--gres=gpu:2", "--mem=3072M"])]
    assert _expand("12_[4-6,9%2]") == ["12_4", "12_5", "12_6", "12_9"] and _expand("12_3") == ["12_3"]


def test_a_started_task_is_not_taken_for_its_cancelled_siblings():
    """Slurm 22's own answers, seen in a run: task 0 of a held array released and running, tasks 1
    and 2 cancelled while still pending. sacct's summary record '251_[0-2]' says CANCELLED for all
    three -- before and after task 0 ran -- and task 0's own records (squeue's RUNNING, then
    sacct's COMPLETED) must win, or the status gives up on a cell that is about to finish."""
    from harness.run.executors.slurm.queue import merge
    running = merge("251_0|RUNNING|vm|0:01|None\n", "251_[0-2]|CANCELLED by 0||00:00:00|0:0\n")
    assert running["251_0"]["state"] == "RUNNING"
    assert running["251_1"]["state"] == running["251_2"]["state"] == "CANCELLED"
    done = merge("", "251_0|COMPLETED|vm|00:00:01|0:0\n251_[0-2]|CANCELLED by 0||00:00:00|0:0\n")
    assert done["251_0"]["state"] == "COMPLETED" and done["251_2"]["state"] == "CANCELLED"
    # the queue's stale PENDING for a task the summary says was cancelled: accounting's word wins
    assert merge("251_1|PENDING||0:00|JobHeldUser\n", "251_[1-2]|CANCELLED by 0||00:00:00|0:0\n")[
        "251_1"]["state"] == "CANCELLED"


def test_the_users_own_code_runs_in_array_tasks(slurm, tmp_path):
    """A model factory and scripts of the user's (tests/test_user_workloads.py's project) run in
    Slurm tasks as they do here: the code staged once by content on the shared results folder,
    statuses, the user's file and line, reported metrics and the code's hash in every result."""
    from .test_user_workloads import K3, TF1, TF2, _project, _results

    matrix = _project(tmp_path)
    # this cluster gives a task 1 GiB per CPU by default (DefMemPerCPU): Keras 3 on TF 2.21 needs more
    submit(matrix, tmp_path / "results", "--sbatch-arg=--mem=3G")
    proc = harness("status", str(matrix), "--results", str(tmp_path / "results"), "--wait", "900")
    out = proc.stdout
    assert "running 0" in out and "queued 0" in out, out
    results = _results(tmp_path / "results" / "byo")
    assert len(results) == 12, out
    # `same_as: tf2.15` compares cells of different tasks: judged once all are in, as a local run does
    # (Keras 2.2's GRU has fewer parameters: the TF 1.12 cells are the matrix's documented drift)
    for cell, r in results.items():
        if "/mine/" in cell:
            assert r["expectation"]["met"] is (not cell.startswith(TF1)), (cell, r["expectation"])
    assert proc.returncode == 1 and out.count("NOT as expected") == 2, out
    for env in (TF1, TF2, K3):
        for label in ("none-c1", "make_parallel-c2"):
            r = results[f"{env}/mine/{label}/b128/r0"]
            assert r["status"] == "ok", (r["cell"], r.get("error"))
            assert r["code"]["kind"] == "factory" and r["provenance"]["code_sha256"] == r["code"]["sha256"]
            slurm = r["provenance"]["slurm"]  # the array task that ran it, as Slurm names it
            assert re.fullmatch(r"\d+_\d+", slurm["job"]) and slurm["node"], slurm
        assert results[f"{env}/mine/make_parallel-c2/b128/r0"]["engagement"]["ran_on"] == 2
        fine = results[f"{env}/fine/none-c1/b128/r0"]
        assert fine["status"] == "ok" and fine["metrics"] == {"answer": 42, "half": 0.5}
        assert fine["expectation"]["met"] is True
        crash = results[f"{env}/crashes/none-c1/b128/r0"]
        assert crash["status"] == "error" and crash["error"]["where"] == "bug.py:9 in explode", crash["error"]
    assert results[f"{TF1}/mine/none-c1/b128/r0"]["parameters"] < results[f"{TF2}/mine/none-c1/b128/r0"]["parameters"]


def test_bisect_runs_each_round_as_array_tasks(slurm, tmp_path):
    """examples/packaging-legacy searched with --executor slurm: every release's cell runs in an
    array task (which rebuilds the cell -- not the matrix's own -- from its submission), each
    round waited for; the answer and the evidence are the local search's. A second search finds
    every result in place and submits nothing."""
    example = ROOT / "examples" / "packaging-legacy" / "matrix.yaml"
    args = ["bisect", str(example), "--package", "packaging", "--good", "21.2", "--bad", "22.0",
            "--engine", "venv", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "bundles"),
            "--executor", "slurm", "--sbatch-arg=--mem=2G"]
    proc = harness(*args, timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first bad: packaging 22.0   last good: packaging 21.3" in proc.stdout
    assert "legacy_version.py:8" in proc.stdout
    run_dir = tmp_path / "results" / "packaging-legacy"
    subs = submissions(run_dir)
    assert len(subs) >= 2, "both ends, then each round: submitted to Slurm"
    derived = [json.loads((s.parent / "derived.json").read_text()) for s in subs]
    assert all(d and all(e["package"] == "packaging" for e in d.values()) for d in derived), derived
    results = by_cell(run_dir)
    assert {r["cell"].split("/")[0] for r in results.values()} >= {"keras3.0.5-jax-packaging21.3",
                                                                  "keras3.0.5-jax-packaging22.0"}, sorted(results)
    assert all(re.fullmatch(r"\d+_\d+", r["provenance"]["slurm"]["job"]) for r in results.values())
    bundle = next(p for p in (tmp_path / "bundles").iterdir() if p.is_dir())
    assert (bundle / "run.sh").exists() and "packaging22.0" in bundle.name
    again = harness(*args, timeout=600)
    assert again.returncode == 0 and "first bad: packaging 22.0" in again.stdout, again.stdout[-3000:]
    assert len(submissions(run_dir)) == len(subs), "every cell already had its result"


def test_a_task_cancelled_while_pending_is_said_to_be_cancelled():
    """What a real Slurm's accounting prints for an array cancelled before any task started (one
    record for the whole array, no node) once the queue has forgotten it: each task was
    cancelled while pending -- never 'no record'."""
    from harness.run.executors.slurm.board import missing_why
    from harness.run.executors.slurm.queue import merge, task_state
    states = merge("", "516|CANCELLED by 0|None assigned|00:00:00|0:0\n")
    for task in ("516_0", "516_3"):
        assert missing_why(task, task_state(states, task)) == f"cancelled while pending (task {task}): it never started"
    started = merge("", "517_1|CANCELLED by 0|node1|00:00:04|0:15\n")
    assert missing_why("517_1", task_state(started, "517_1")) == "CANCELLED (task 517_1) without a result"
    assert "no record" in missing_why("518_0", task_state({}, "518_0"))


def test_the_portability_grid_runs_as_array_tasks_writers_first_then_readers(slurm, tmp_path):
    """`portability run --executor slurm`: the writers go first, the readers wait for their files
    and go with the next call, and what the tasks left publishes as a local grid does."""
    (tmp_path / "stacks.yaml").write_text(ENV)
    results = tmp_path / "r"
    run = ("portability", "run", str(tmp_path / "stacks.yaml"), "--engine", "venv", "--results", str(results),
           "--executor", "slurm")
    first = harness(*run, check=True)
    assert "held back" in first.stdout, first.stdout   # the reader needs the writer's files
    wait(results / "grid.yaml", results)
    harness(*run, check=True)
    assert "finished 2 (ok 2)" in wait(results / "grid.yaml", results)
    harness("portability", "publish", "--results", str(results), "--out", str(tmp_path / "out"), check=True)
    records = publish.expanded(json.loads((tmp_path / "out" / "portability.json").read_text()))
    assert {(r["writer"], r["reader"]) for r in records} == {("tf2.15", "tf2.15")}
    assert all(r["verdict"] == "same" for r in records if r["format"] in ("h5", "keras", "weights-h5")), records


def test_a_task_at_its_time_limit_is_a_timeout(time_limited):
    """Last in the file: the task submitted by its first test (`time_limited`) has had its minute."""
    tmp_path, matrix, _ = time_limited
    proc = harness("status", str(matrix), "--results", str(tmp_path / "results"), "--wait", "300")
    out = proc.stdout
    assert "running 0" in out and "queued 0" in out, out
    assert "finished 1 (timeout 1)" in out, out
    assert proc.returncode == 1 and "NOT as expected" in out, "status exits 1 on a drifted control cell"
    [(folder, result)] = list(iter_results(tmp_path / "results"))
    assert result["expectation"] == {"status": "ok", "signature": None, "met": False,
                                     "why": "a control cell that Slurm kills"}, "the verdict path judges it"
    report = harness("report", str(tmp_path / "results"), "--out", str(tmp_path / "site"), check=True)
    assert "Traceback" not in report.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Control cells that drifted" in index and "a control cell that Slurm kills" in index
    assert result["status"] == "timeout"
    assert result["error"]["slurm_state"] == "TIMEOUT"
    assert "Slurm ended the task at its time limit" in result["error"]["message"]
    assert "last event: hanging" in result["error"]["message"], "what the cell recorded before the kill is kept"
    assert (folder / "slurm.log").exists() and (folder / "events.jsonl").exists()
    assert not list(folder.parent.glob("*.partial-*")), "the killed task's half-written folder is cleared"
