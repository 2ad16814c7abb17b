"""Submitting: the cells that need a run, planned into job arrays of identical resources, each
written down as a readable ``array-<k>.sh`` and handed to ``sbatch``.

A script is run by a shell and read by Slurm (its ``#SBATCH`` lines), so no value reaches it as
text: options are checked where they enter (`options.py`), paths are checked here, and every
value is quoted with ``shlex.quote`` (Slurm's ``#SBATCH`` reader takes the shell's quoting) or
escaped into a comment.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shlex
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from harness import status
from harness.cells import Cell, size_bytes
from harness.chains import waves
from harness.engines.base import Engine
from harness.environments.recipes import comment  # one line, escaped: as a bundle's run.sh writes comments
from harness.errors import EnvironmentUnavailable, UserError
from harness.matrix import Matrix
from harness.options.slurm import SlurmOptions, text_problem
from harness.results import record
from harness.results.store import ResultStore, write_json
from harness.run.executors.slurm.board import LIVE, QUEUED, board
from harness.run.executors.slurm.queue import run_slurm
from harness.run.executors.slurm.submissions import DERIVED, SLURM_DIR
from harness.run.lifecycle import Lifecycle, stage_workloads
from harness.terminal import shown, visible
from harness.usercode import codes_of

MAX_ARRAY = 1000  # Slurm's default MaxArraySize is 1001: larger groups are split into several arrays
TASK_MODULE = "harness.run.executors.slurm"  # what a task runs: python -m TASK_MODULE task SUBMISSION OFFSET


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


def _directive(name: str, value) -> str:
    return f"#SBATCH {name}={shlex.quote(str(value))}"


def script(sub_dir: Path, arr: Array, run: str, opts: SlurmOptions, cwd: Path) -> str:
    """The sbatch script of one array. Every value is quoted (or escaped into a comment), whatever
    the checks before let through."""
    throttle = f"%{int(opts.throttle)}" if opts.throttle else ""
    directives = [_directive("--job-name", f"harness-{run}"),
                  _directive("--array", f"0-{len(arr.cells) - 1}{throttle}"),
                  *(f"#SBATCH {d}" for d in arr.resources.directives()),
                  _directive("--output", sub_dir / "logs" / "%A_%a.out"), "#SBATCH --export=ALL",
                  _directive("--chdir", cwd)]
    if opts.partition:
        directives.append(_directive("--partition", opts.partition))
    if opts.account:
        directives.append(_directive("--account", opts.account))
    lines = ["#!/bin/bash",
             f"# tfkeras-harness, matrix {comment(run)}: task i of this array runs the cell on line "
             f"{int(arr.offset)} + i",
             f"# of {comment(sub_dir / 'cells.txt')} (lines counted from 0) through the lifecycle.",
             *directives, "set -u"]
    if not arr.resources.gpus:
        lines.append("export CUDA_VISIBLE_DEVICES=  # this array is granted no GPU, so the cell sees none")
    lines.append(f"exec {shlex.quote(opts.python)} -m {TASK_MODULE} task {shlex.quote(str(sub_dir))} "
                 f"{int(arr.offset)}")
    return "\n".join(lines) + "\n"


def check_path(path: Path, what: str) -> Path:
    """A path that goes into a script or onto sbatch's command line: no control characters."""
    why = text_problem(str(path))
    if why:
        raise UserError(f"{what} {visible(str(path))}: cannot be handed to Slurm ({why})")
    return path


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
    if not engine.prepares_for_other_hosts:  # noqa: SIM102 - the engine that only a node can check
        return failed
    for env in {c.environment.name: c.environment for c in cells}.values():
        log_path = store.run_dir / ".build" / f"{env.name}-{env.content_hash()}.log"
        with console.status(f"preparing {env.name}"):
            try:
                prepared = engine.prepare(env, log_path)
            except EnvironmentUnavailable as exc:
                failed[env.name] = exc
                console.print(f"[yellow]{status.UNAVAILABLE}[/] {env.name}: {shown(exc.reason)}")
                continue
        console.print(f"environment {env.name}: {'reused' if prepared.reused else 'built'} ({engine.name})")
    return failed


def submit(matrix: Matrix, cells: list[Cell], engine: Engine, results_root: Path, opts: SlurmOptions,
           console: Console, rerun: frozenset[str] = frozenset(), engine_args: dict | None = None,
           fresh: bool = False, derived: dict[str, dict] | None = None) -> int:
    """Hand the cells that need a run to Slurm, as arrays of identical resources; return how many.
    `fresh` (`run --fresh`) travels in submission.json: each task then runs its cell clean-room.
    `derived`: cells that are not the matrix's own (a `bisect` release of a matrix cell), each
    with what its task needs to rebuild it (release_cells.derivation), written to derived.json."""
    results_root = check_path(results_root.resolve(), "--results")
    cwd = check_path(Path.cwd(), "the working folder")
    check_path(Path(opts.python), "slurm.python")
    store = ResultStore(results_root, matrix.name)
    entries = {e.cell: e for e in board(matrix, store, console)}
    live = [c for c in cells if entries[c.id].where in (QUEUED, LIVE)]
    todo = [c for c in cells if c not in live and store.needs_run(c, rerun)]
    if len(cells) - len(todo) - len(live):
        console.print(f"{len(cells) - len(todo) - len(live)} of {len(cells)} cells already have results in "
                      f"{store.run_dir} and are skipped (--rerun STATUS to run them again)")
    if live:
        console.print(f"{len(live)} cell(s) are still queued or running from an earlier submission and are skipped")
    if not todo:
        console.print("nothing to submit")
        return 0
    held = [c for wave in waves(todo)[1:] for c in wave]  # consumers wait for their producers' results
    if held:
        todo = [c for c in todo if c not in held]
        console.print(f"{len(held)} cell(s) need files of cells submitted now (needs:) and are held back: "
                      "run the same command again once those have finished")
    failed = prepare_environments(todo, engine, store, console)
    if failed:  # recorded here: a node could not do better
        unavailable = [c for c in todo if c.environment.name in failed]
        _record_unavailable(matrix, engine, store, unavailable, failed, console)
        todo = [c for c in todo if c.environment.name not in failed]
        if not todo:
            return 0
    stage_workloads(store.run_dir, codes_of(todo))  # once, here: tasks staging it side by side would race

    sub_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    root = store.run_dir / SLURM_DIR
    sub_dir = root / sub_id
    tmp = root / f".{sub_id}.tmp"
    arrays = plan(todo, opts)
    (tmp / "logs").mkdir(parents=True)
    (tmp / "tasks").mkdir()
    shutil.copy2(matrix.path, tmp / matrix.path.name)
    (tmp / "cells.txt").write_text("".join(c.id + "\n" for arr in arrays for c in arr.cells))
    if derived:
        write_json(tmp / DERIVED, {c.id: derived[c.id] for arr in arrays for c in arr.cells if c.id in derived})
    for arr in arrays:
        (tmp / f"array-{arr.index}.sh").write_text(script(sub_dir, arr, matrix.name, opts, cwd))
    meta = {"id": sub_id, "submitted": record.now(), "run": matrix.name, "results_root": str(results_root),
            "matrix_file": matrix.path.name, "matrix_label": str(matrix.path), "engine": engine.name,
            "matrix_dir": str(matrix.path.resolve().parent),  # where the user's code paths start
            "engine_args": engine_args or {}, "rerun": sorted(rerun), "sbatch_args": opts.sbatch_args,
            "fresh": bool(fresh),
            "arrays": [{"index": a.index, "offset": a.offset, "count": len(a.cells),
                        "resources": asdict(a.resources), "script": f"array-{a.index}.sh"} for a in arrays]}
    write_json(tmp / "submission.json", meta)
    os.replace(tmp, sub_dir)  # the submission appears whole or not at all

    submitted = _hand_to_sbatch(sub_dir, arrays, opts, console)
    console.print(f"submission {sub_dir}")
    return submitted


def _record_unavailable(matrix: Matrix, engine: Engine, store: ResultStore, cells: list[Cell],
                        failed: dict[str, EnvironmentUnavailable], console: Console) -> None:
    """Write the result of each cell whose environment could not be prepared here: `unavailable`,
    as a local run records it (a live process that holds a cell's claim records it instead)."""
    life = Lifecycle(store, engine.name, str(matrix.path), matrix.sha256)
    life.stage()  # its hash goes into the results' provenance, as a local run's does
    for cell in cells:
        claim = store.claim(cell.id)
        if claim is None:
            continue  # a live process records it
        try:
            written = life.unavailable(cell, failed[cell.environment.name])
        finally:
            claim.release()
        console.print(f"[yellow]{written.status:>11}[/] {shown(cell.id)}", highlight=False)


def _hand_to_sbatch(sub_dir: Path, arrays: list[Array], opts: SlurmOptions, console: Console) -> int:
    """Submit the written arrays one by one, each job id written down before a signal can land;
    how many cells were submitted. A refusal is written down too and ends the submission."""
    submitted = 0
    for arr in arrays:
        argv = ["sbatch", "--parsable", *opts.sbatch_args, str(sub_dir / f"array-{arr.index}.sh")]
        with _signals_held():
            proc = run_slurm(*argv)
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
    return submitted


