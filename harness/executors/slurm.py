"""Running a matrix on a Slurm cluster: one job-array task per cell.

The client is generated ``sbatch`` scripts plus ``squeue``/``sacct``, not
submitit. submitit pickles a Python callable per task and learns a job's state
only from sacct (without accounting it waits forever on a crashed job); here a
task's whole contract is a readable shell script and a line number, so a user
can read, rerun or cancel it with Slurm's own tools, a later shell (or another
person) can see what was submitted, and nothing but Slurm's CLI is needed.

Everything lives in the shared results folder, so the nodes, the submit side
and any later ``harness status`` read the same files:

    <results>/<run>/.slurm/<submission>/
        submission.json   what was asked: engine, --rerun, the arrays and their resources
        cells.txt         one cell id per line; task i of array k runs line offset_k + i
        <matrix file>     the matrix as submitted (tasks read this copy, not a file edited since)
        array-<k>.sh      the sbatch script of array k
        jobs.jsonl        {"array": k, "job": ID}, appended as each sbatch returns
        logs/ID_i.out     each task's output
        tasks/<line>.json what the task saw (node, job, CUDA_VISIBLE_DEVICES)

Inside its allocation a task runs its one cell through the ordinary Runner, so
results are written exactly as a local run writes them. What Slurm decides
about a task that left no result is read back from the queue and accounting:
a time-limit kill becomes a ``timeout`` result and a memory kill an ``oom``
result; anything else (cancelled, node failure, preemption) says nothing
about the cell, so it is noted and the cell runs again on the next submission.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .. import outcome, record
from ..cells import Cell, size_bytes
from ..engines.base import Engine
from ..errors import EnvironmentUnavailable, UserError
from ..matrix import Matrix
from ..store import PARTIAL, SPEC, ResultStore, read_json, write_json

SLURM_DIR = ".slurm"
MAX_ARRAY = 1000  # Slurm's default MaxArraySize is 1001: larger groups are split into several arrays
DEFAULT_TIME_MARGIN = 300.0  # seconds on top of the cell's wall limit: start-up, environment check, writing
# States in which a task may still produce a result.
ACTIVE = frozenset({"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING", "CONFIGURING",
                    "STAGE_OUT", "SIGNALING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "STOPPED"})
# What Slurm's verdict says about the cell itself, when the task left no result. Only these two map onto
# the status vocabulary; CANCELLED, NODE_FAIL, PREEMPTED, FAILED, BOOT_FAIL, DEADLINE say nothing about
# the cell, which therefore stays without a result and runs again on the next submission.
VERDICTS = {
    "TIMEOUT": ("timeout", "Slurm ended the task at its time limit"),
    "OUT_OF_MEMORY": ("oom", "Slurm killed the task for memory"),
}
EVIDENCE = ("events.jsonl", "workload.json", "stdout.log", "stderr.log")
# Without cgroups (jobacct_gather's OverMemoryKill) Slurm kills a task over --mem and calls it FAILED;
# its own line in the task's log is then the evidence of a memory kill.
MEMORY_KILL_LINE = "Exceeded job memory limit"


# -- options and resources ---------------------------------------------------

@dataclass
class SlurmOptions:
    """Where and how to submit: the matrix's ``slurm:`` section, then the command line on top."""

    partition: str | None = None
    account: str | None = None
    throttle: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time_margin: float = DEFAULT_TIME_MARGIN
    sbatch_args: list[str] = field(default_factory=list)
    python: str = sys.executable  # the interpreter the nodes run the task with (shared filesystem)

    @classmethod
    def merged(cls, section: dict, partition: str | None = None, account: str | None = None,
               throttle: int | None = None, sbatch_args: list[str] | None = None) -> SlurmOptions:
        opts = cls(**{k: v for k, v in section.items() if k != "sbatch_args"})
        opts.sbatch_args = list(section.get("sbatch_args") or []) + list(sbatch_args or [])  # the last one wins
        if partition:
            opts.partition = partition
        if account:
            opts.account = account
        if throttle is not None:
            if throttle < 1:
                raise UserError(f"--throttle expects at least 1, got {throttle}")
            opts.throttle = throttle
        return opts


def _megabytes(size: str) -> int:
    return math.ceil(size_bytes(size) / (1 << 20))


@dataclass(frozen=True)
class Resources:
    """What one array asks per task; cells asking the same share an array."""

    gpus: int
    cpus: int
    minutes: int
    mem_mb: int | None = None

    def directives(self) -> list[str]:
        out = [f"--cpus-per-task={self.cpus}", f"--time={self.minutes}"]
        if self.gpus:
            out.append(f"--gres=gpu:{self.gpus}")
        if self.mem_mb:
            out.append(f"--mem={self.mem_mb}M")
        return out


def resources(cell: Cell, opts: SlurmOptions) -> Resources:
    """GPUs from the cell's devices; the time limit is its wall limit plus a margin, so the harness's
    own watchdog (a `timeout` with evidence) acts before Slurm's kill does. Memory: the cell's limit
    plus 1 GiB for the task's own processes, unless the options say otherwise."""
    par = cell.parallelism
    gpus = par.devices if par.device_kind == "gpu" else 0
    mem = _megabytes(opts.mem) if opts.mem else (_megabytes(cell.limits.memory) + 1024
                                                  if cell.limits.memory else None)
    return Resources(gpus=gpus, cpus=opts.cpus_per_task or max(1, par.devices),
                     minutes=max(1, math.ceil((cell.limits.wall + opts.time_margin) / 60)), mem_mb=mem)


@dataclass
class Array:
    index: int
    offset: int  # first line of cells.txt
    cells: list[Cell]
    resources: Resources


def plan(cells: list[Cell], opts: SlurmOptions) -> list[Array]:
    groups: dict[Resources, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(resources(cell, opts), []).append(cell)
    arrays: list[Array] = []
    offset = 0
    for res in sorted(groups, key=lambda r: (r.gpus, r.cpus, r.minutes, r.mem_mb or 0)):
        members = groups[res]
        for start in range(0, len(members), MAX_ARRAY):
            chunk = members[start:start + MAX_ARRAY]
            arrays.append(Array(len(arrays), offset, chunk, res))
            offset += len(chunk)
    return arrays


# -- talking to Slurm ---------------------------------------------------------

def _slurm(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise UserError(f"'{argv[0]}' is not on PATH: the slurm executor needs Slurm's client commands "
                        "(Debian/Ubuntu: apt-get install slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"'{' '.join(argv[:2])}' did not answer within {timeout:.0f} s: is slurmctld up?") from None


def _expand(job_id: str) -> list[str]:
    """'12_3' -> ['12_3']; sacct's pending summary '12_[4-6,9%2]' -> ['12_4', '12_5', '12_6', '12_9']."""
    if "[" not in job_id:
        return [job_id]
    base, _, rest = job_id.partition("_[")
    out = []
    for part in rest.rstrip("]").split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        out += [f"{base}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def queue_states(job_ids: list[str]) -> dict[str, dict]:
    """State per array task ('ID_i', or 'ID_*' for the array's tasks without a record of their own):
    accounting's final word where it has one, else the queue's.

    sacct can lag squeue by a few seconds after a task ends, and squeue forgets finished jobs after
    MinJobAge: each covers the other's gap. A task neither knows is absent from the answer.
    """
    if not job_ids:
        return {}
    states: dict[str, dict] = {}
    queue = _slurm("squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%N|%M|%r")
    for line in queue.stdout.splitlines():  # exits 1 once every job has left the queue: that is fine
        key, state, node, elapsed, reason = (line.split("|") + [""] * 5)[:5]
        for k in _expand(key.strip()):
            states[k] = {"state": state, "node": node, "elapsed": elapsed, "reason": reason, "from": "squeue"}
    acct = _slurm("sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,NodeList,Elapsed,ExitCode")
    for line in acct.stdout.splitlines():
        key, state, node, elapsed, code = (line.split("|") + [""] * 5)[:5]
        state = state.split(" ")[0]  # 'CANCELLED by 0'
        for k in _expand(key.strip()):
            if state not in ACTIVE or k not in states:
                states[k] = {"state": state, "node": node, "elapsed": elapsed, "exit_code": code, "from": "sacct"}
    for key in [k for k in states if "_" not in k]:  # the array's record for the tasks it never split off
        base = states.pop(key)                        # (e.g. pending tasks cancelled together): each of them
        states[f"{key}_*"] = base
    return states


def task_state(states: dict[str, dict], task: str | None) -> dict | None:
    if not task:
        return None
    return states.get(task) or states.get(task.split("_")[0] + "_*")


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C or a kill during 'sbatch, then write down the job id' would leave a running array the
    submit side knows nothing of; the signal waits until the id is on disk."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# -- submissions on disk ------------------------------------------------------

@dataclass
class Submission:
    path: Path
    meta: dict
    cells: list[str]
    jobs: dict[int, str]  # array index -> job id
    refused: dict[int, str] = field(default_factory=dict)  # array index -> sbatch's error

    @property
    def submitted(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.meta["submitted"])

    def tasks(self) -> Iterator[tuple[int, str, str | None]]:
        """(line, cell id, 'JOB_i' or None when the array never got a job id). Cells of arrays that
        sbatch refused were never submitted: they are not listed, so an earlier submission still speaks."""
        for arr in self.meta["arrays"]:
            if arr["index"] in self.refused:
                continue
            job = self.jobs.get(arr["index"])
            for i in range(arr["count"]):
                line = arr["offset"] + i
                yield line, self.cells[line], f"{job}_{i}" if job else None


def submissions(store: ResultStore) -> list[Submission]:
    root = store.run_dir / SLURM_DIR
    out = []
    for meta_path in sorted(root.glob("*/submission.json")) if root.exists() else []:
        meta = read_json(meta_path)
        if not isinstance(meta, dict):
            continue
        jobs, refused = {}, {}
        jobs_file = meta_path.parent / "jobs.jsonl"
        for line in jobs_file.read_text().splitlines() if jobs_file.exists() else []:
            try:
                entry = json.loads(line)
                if "refused" in entry:
                    refused[int(entry["array"])] = str(entry["refused"])
                else:
                    jobs[int(entry["array"])] = str(entry["job"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a kill: that array's state is then unknown, its results still count
        cells = (meta_path.parent / "cells.txt").read_text().splitlines()
        out.append(Submission(meta_path.parent, meta, cells, jobs, refused))
    return out


# -- what each cell is doing: the board -------------------------------------

@dataclass
class Entry:
    cell: str
    where: str  # 'finished' | 'queued' | 'running' | 'missing'
    status: str | None = None  # the result's status, when finished
    task: str | None = None    # 'JOB_i'
    state: str | None = None   # Slurm's state
    note: str | None = None
    drifted: bool = False  # a control cell whose result is not what the matrix expects


def _result_is_new(result: dict | None, since: dt.datetime) -> bool:
    try:
        return result is not None and dt.datetime.fromisoformat(result["started"]) >= since.replace(microsecond=0)
    except (KeyError, TypeError, ValueError):
        return False


def board(matrix: Matrix, store: ResultStore, console: Console | None = None) -> list[Entry]:
    """Every cell of the matrix: finished (a result), queued or running (a live task), or missing.

    Reading the board is also when Slurm's verdicts are written down: a task that ended at its time
    limit or for memory without a result gets a `timeout` / `oom` result here, once.
    """
    latest: dict[str, tuple[Submission, int, str | None]] = {}
    subs = submissions(store)
    for sub in subs:  # oldest first: a later submission of a cell supersedes an earlier one
        for line, cell_id, task in sub.tasks():
            latest[cell_id] = (sub, line, task)
    jobs = sorted({task.split("_")[0] for _, _, task in latest.values() if task})
    states = queue_states(jobs) if jobs else {}
    return [_entry(matrix, store, cell, latest.get(cell.id), states, console) for cell in matrix.cells]


def _entry(matrix: Matrix, store: ResultStore, cell: Cell, latest: tuple[Submission, int, str | None] | None,
           states: dict[str, dict], console: Console | None) -> Entry:
    """Where the cell stands, and whether a control cell's result drifted from its expected answer."""
    from ..runner import check_expectation
    entry = _where(matrix, store, cell, latest, states, console)
    result = store.existing(cell) if entry.where == "finished" else None
    entry.drifted = bool(result and (check_expectation(cell, result) or {}).get("met") is False)
    return entry


def _where(matrix: Matrix, store: ResultStore, cell: Cell, latest: tuple[Submission, int, str | None] | None,
           states: dict[str, dict], console: Console | None) -> Entry:
    result = store.existing(cell)
    if latest is None:
        return Entry(cell.id, "finished", result["status"]) if result else Entry(cell.id, "missing")
    sub, line, task = latest
    if _result_is_new(result, sub.submitted):
        return Entry(cell.id, "finished", result["status"], task)
    info = task_state(states, task)
    state = info["state"] if info else None
    if state in ("FAILED", "CANCELLED") and task and _killed_for_memory(sub, task):
        info = {**info, "state": "OUT_OF_MEMORY", "reported": state}
        state = "OUT_OF_MEMORY"
    if state in ACTIVE:
        where = "running" if state in ("RUNNING", "COMPLETING", "CONFIGURING") else "queued"
        return Entry(cell.id, where, None, task, state)
    if state in VERDICTS:
        written = record_verdict(matrix, store, cell, sub, line, task, info)
        if console:
            console.print(f"[red]{written['status']:>11}[/] {escape(cell.id)}  "
                          f"{escape(written['error']['message'])}", highlight=False)
        return Entry(cell.id, "finished", written["status"], task, state)
    if task is None:
        why = "its array was never sent to Slurm (the submission was interrupted) or its job id was lost"
    elif state is None:
        why = f"Slurm has no record of task {task} (accounting off, or the job was purged)"
    else:
        why = f"{state} (task {task}) without a result"
    keep = f"; the stored {result['status']} result stands" if result else ""
    note = why + keep + "; it runs again on the next submission"
    return Entry(cell.id, "finished" if result else "missing", result["status"] if result else None, task, state,
                 note)


def _killed_for_memory(sub: Submission, task: str) -> bool:
    log = sub.path / "logs" / f"{task}.out"
    try:
        return MEMORY_KILL_LINE in log.read_text(errors="replace")[-20000:]
    except OSError:
        return False


def record_verdict(matrix: Matrix, store: ResultStore, cell: Cell, sub: Submission, line: int, task: str,
                   info: dict) -> dict:
    """Write the result a task could not write: Slurm ended it (time limit, memory). What the cell had
    recorded before the kill (events, logs) is taken from its half-written folder, which is then removed:
    its owner is dead, Slurm says so."""
    status, what = VERDICTS[info["state"]]
    work = store.begin(cell)
    write_json(work / SPEC, cell.spec())
    final = store.final_dir(cell)
    partials = sorted((p for p in final.parent.glob(f"{final.name}{PARTIAL}*") if p.is_dir() and p != work),
                      key=lambda p: p.stat().st_mtime)
    if partials:
        for name in EVIDENCE:
            if (partials[-1] / name).exists():
                shutil.copy2(partials[-1] / name, work / name)
    log = sub.path / "logs" / f"{task}.out"
    if log.exists():
        shutil.copy2(log, work / "slurm.log")
    events = record.read_events(work / "events.jsonl")
    last = events[-1] if events else None
    message = (f"{what} (task {task}, {info['state']} after {info.get('elapsed') or '?'} on "
               f"{info.get('node') or '?'}); last event: {(last or {}).get('event', 'nothing')}")
    if info.get("reported"):
        message += f"; sacct says {info['reported']}, the task's log says '{MEMORY_KILL_LINE}'"
    error = {"kind": status, "type": None, "message": message,
             "signature": outcome.signature(status, None, f"slurm {info['state']}"), "exit_code": None,
             "signal": None, "last_event": last, "slurm_state": info["state"]}
    provenance = {"slurm": {"task": task, "state": info["state"], "node": info.get("node"),
                            "elapsed": info.get("elapsed"), "submission": sub.path.name,
                            "sacct_state": info.get("reported") or info["state"]}}
    result = record.assemble(cell, sub.meta["engine"], provenance, None, outcome.Verdict(status, error=error),
                             work, sub.meta["matrix_label"], matrix.sha256, sub.meta["submitted"])
    write_json(work / "result.json", result)
    store.commit(work, cell)
    for partial in partials:
        shutil.rmtree(partial, ignore_errors=True)
    return result


# -- submitting ---------------------------------------------------------------

def _script(sub_dir: Path, arr: Array, run: str, opts: SlurmOptions, cwd: Path) -> str:
    directives = [f"--job-name=harness-{run}", f"--array=0-{len(arr.cells) - 1}"
                  + (f"%{opts.throttle}" if opts.throttle else ""),
                  *arr.resources.directives(), f"--output={sub_dir / 'logs' / '%A_%a.out'}",
                  "--export=ALL", f"--chdir={cwd}"]
    if opts.partition:
        directives.append(f"--partition={opts.partition}")
    if opts.account:
        directives.append(f"--account={opts.account}")
    lines = ["#!/bin/bash",
             f"# tfkeras-harness, matrix {run}: task i of this array runs the cell on line {arr.offset} + i",
             f"# of {sub_dir / 'cells.txt'} (lines counted from 0) through the ordinary runner.",
             *(f"#SBATCH {d}" for d in directives), "set -u"]
    if not arr.resources.gpus:
        lines.append("export CUDA_VISIBLE_DEVICES=  # this array is granted no GPU, so the cell sees none")
    lines.append(f"exec {shlex.quote(opts.python)} -m harness.executors.slurm task {shlex.quote(str(sub_dir))} "
                 f"{arr.offset}")
    return "\n".join(lines) + "\n"


def _write_down(sub_dir: Path, entry: dict) -> None:
    with open(sub_dir / "jobs.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def prepare_environments(cells: list[Cell], engine: Engine, store: ResultStore, console: Console
                         ) -> dict[str, EnvironmentUnavailable]:
    """Prepare each environment once, here, before any task starts: tasks then find it ready (`reused`)
    in the shared cache instead of racing to build it on many nodes. The local engine is the exception:
    it checks the node's own interpreter, so only a node can do it."""
    failed: dict[str, EnvironmentUnavailable] = {}
    if engine.name == "local":
        return failed
    for env in {c.environment.name: c.environment for c in cells}.values():
        log_path = store.run_dir / ".build" / f"{env.name}-{env.content_hash()}.log"
        with console.status(f"preparing {env.name}"):
            try:
                prepared = engine.prepare(env, log_path)
            except EnvironmentUnavailable as exc:
                failed[env.name] = exc
                console.print(f"[yellow]unavailable[/] {env.name}: {escape(exc.reason)}")
                continue
        console.print(f"environment {env.name}: {'reused' if prepared.reused else 'built'} ({engine.name})")
    return failed


def submit(matrix: Matrix, cells: list[Cell], engine: Engine, results_root: Path, opts: SlurmOptions,
           console: Console, rerun: frozenset[str] = frozenset(), engine_args: dict | None = None) -> int:
    """Hand the cells that need a run to Slurm, as arrays of identical resources; return how many."""
    from ..runner import Runner, stage_workloads
    results_root = results_root.resolve()
    store = ResultStore(results_root, matrix.name)
    entries = {e.cell: e for e in board(matrix, store, console)}
    live = [c for c in cells if entries[c.id].where in ("queued", "running")]
    todo = [c for c in cells if c not in live and store.needs_run(c, rerun)]
    if len(cells) - len(todo) - len(live):
        console.print(f"{len(cells) - len(todo) - len(live)} of {len(cells)} cells already have results in "
                      f"{store.run_dir} and are skipped (--rerun STATUS to run them again)")
    if live:
        console.print(f"{len(live)} cell(s) are still queued or running from an earlier submission and are skipped")
    if not todo:
        console.print("nothing to submit")
        return 0
    failed = prepare_environments(todo, engine, store, console)
    if failed:  # recorded here through the ordinary runner: a node could not do better
        Runner(matrix, engine, results_root, console, rerun=rerun).run(
            [c for c in todo if c.environment.name in failed])
        todo = [c for c in todo if c.environment.name not in failed]
        if not todo:
            return 0
    stage_workloads(store.run_dir)  # once, here: tasks staging it side by side would race

    sub_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    root = store.run_dir / SLURM_DIR
    sub_dir = root / sub_id
    tmp = root / f".{sub_id}.tmp"
    arrays = plan(todo, opts)
    (tmp / "logs").mkdir(parents=True)
    (tmp / "tasks").mkdir()
    shutil.copy2(matrix.path, tmp / matrix.path.name)
    (tmp / "cells.txt").write_text("".join(c.id + "\n" for arr in arrays for c in arr.cells))
    cwd = Path.cwd()
    for arr in arrays:
        (tmp / f"array-{arr.index}.sh").write_text(_script(sub_dir, arr, matrix.name, opts, cwd))
    meta = {"id": sub_id, "submitted": record.now(), "run": matrix.name, "results_root": str(results_root),
            "matrix_file": matrix.path.name, "matrix_label": str(matrix.path), "engine": engine.name,
            "engine_args": engine_args or {}, "rerun": sorted(rerun), "sbatch_args": opts.sbatch_args,
            "arrays": [{"index": a.index, "offset": a.offset, "count": len(a.cells),
                        "resources": asdict(a.resources), "script": f"array-{a.index}.sh"} for a in arrays]}
    write_json(tmp / "submission.json", meta)
    os.replace(tmp, sub_dir)  # the submission appears whole or not at all

    submitted = 0
    for arr in arrays:
        argv = ["sbatch", "--parsable", *opts.sbatch_args, str(sub_dir / f"array-{arr.index}.sh")]
        with _signals_held():
            proc = _slurm(*argv)
            if proc.returncode != 0:
                err = (proc.stderr.strip().splitlines() or ["no message"])[-1]
                _write_down(sub_dir, {"array": arr.index, "refused": err})
                raise UserError(f"sbatch refused array {arr.index} ({' '.join(arr.resources.directives())}): "
                                f"{err}" + (f"; {submitted} cell(s) were submitted before it" if submitted else ""))
            job = proc.stdout.strip().split(";")[0]
            _write_down(sub_dir, {"array": arr.index, "job": job})
        submitted += len(arr.cells)
        res = arr.resources
        console.print(f"submitted array {job}: {len(arr.cells)} cell(s), {' '.join(res.directives())}"
                      + (f", {opts.throttle} at a time" if opts.throttle else ""))
    console.print(f"submission {sub_dir}")
    return submitted


# -- status -------------------------------------------------------------------

def show(entries: list[Entry], console: Console, run_dir: Path) -> None:
    where = Counter(e.where for e in entries)
    statuses = Counter(e.status for e in entries if e.where == "finished")
    console.print(f"{run_dir}: {len(entries)} cells")
    finished = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
    console.print(f"  finished {where['finished']}" + (f" ({finished})" if finished else ""))
    for kind in ("running", "queued"):
        console.print(f"  {kind} {where[kind]}")
        for e in [e for e in entries if e.where == kind][:20]:
            console.print(f"    {escape(e.cell)}  task {e.task} {e.state}", highlight=False)
    console.print(f"  missing {where['missing']} (no result and nothing queued: the next submission runs them)")
    for e in [e for e in entries if e.drifted]:
        console.print(f"  [red]NOT as expected[/]: {escape(e.cell)} is {e.status}", highlight=False)
    notes = [e for e in entries if e.note]
    if notes:
        console.print("notes:")
        for e in notes[:50]:
            console.print(f"  {escape(e.cell)}: {escape(e.note)}", highlight=False)
        if len(notes) > 50:
            console.print(f"  ... and {len(notes) - 50} more")


def status(matrix: Matrix, results_root: Path, console: Console, wait: float | None = None,
           poll: float = 2.0) -> list[Entry]:
    """The board; with `wait`, poll until nothing is queued or running (or `wait` seconds pass)."""
    store = ResultStore(results_root.resolve(), matrix.name)
    deadline = time.monotonic() + (wait or 0)
    while True:
        entries = board(matrix, store, console)
        if wait is None or time.monotonic() > deadline or not any(
                e.where in ("queued", "running") for e in entries):
            break
        time.sleep(poll)
    show(entries, console, store.run_dir)
    return entries


# -- inside an array task -----------------------------------------------------

def run_task(sub_dir: Path, offset: int) -> int:
    """Run the one cell this array task stands for, through the ordinary runner."""
    from .. import matrix as matrix_mod
    from ..engines import select_engine
    from ..runner import Runner

    console = Console(soft_wrap=True, force_terminal=False)
    meta = read_json(sub_dir / "submission.json")
    line = offset + int(os.environ["SLURM_ARRAY_TASK_ID"])
    cell_id = (sub_dir / "cells.txt").read_text().splitlines()[line]
    # version ranges: as the submission recorded them beside the results (nodes may have no network)
    from ..releases import Resolver
    m = matrix_mod.load(sub_dir / meta["matrix_file"], resolver=Resolver(sub_dir.parents[2], offline=True))
    cell = next((c for c in m.cells if c.id == cell_id), None)
    if cell is None:
        print(f"cell {cell_id} is not in {sub_dir / meta['matrix_file']}", file=sys.stderr)
        return 2
    seen = {"cell": cell_id, "node": os.uname().nodename, "started": record.now(),
            "job": f"{os.environ.get('SLURM_ARRAY_JOB_ID')}_{os.environ.get('SLURM_ARRAY_TASK_ID')}",
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "SLURM_JOB_GPUS": os.environ.get("SLURM_JOB_GPUS"), "pid": os.getpid()}
    write_json(sub_dir / "tasks" / f"{line}.json", seen)
    console.print(f"cell {cell_id} on {seen['node']}, CUDA_VISIBLE_DEVICES={seen['CUDA_VISIBLE_DEVICES']!r}")
    args = meta.get("engine_args") or {}
    engine = select_engine(meta["engine"], pythons=args.get("pythons"), ca_bundle=args.get("ca_bundle"),
                           console=console)
    try:
        # one cell per task: it gets the whole allocation (its cores, the GPUs Slurm granted)
        runner = Runner(m, engine, Path(meta["results_root"]), console, rerun=frozenset(meta["rerun"]),
                        matrix_label=meta["matrix_label"], jobs=1)
        results = runner.run([cell])
    finally:
        engine.close()
    for r in results:
        console.print(f"{r['cell']}: {r['status']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.executors.slurm task SUBMISSION_DIR OFFSET``: what the generated scripts run.

    Kept out of the user's command line on purpose: it is a contract between this module and the
    scripts it writes, so both change together, and ``harness --help`` lists only what people type.
    """
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "task" or not argv[2].isdigit() or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage (inside a Slurm array task): python -m harness.executors.slurm task SUBMISSION_DIR OFFSET",
              file=sys.stderr)
        return 2
    return run_task(Path(argv[1]), int(argv[2]))


if __name__ == "__main__":
    sys.exit(main())
