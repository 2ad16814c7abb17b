"""Inside an array task: run the one cell the task stands for, on the whole allocation, through the
lifecycle -- the same code that writes a local run's results, so a cluster's results are the same files.

``python -m harness.run.executors.slurm task SUBMISSION_DIR OFFSET`` is what the generated scripts run;
the cell is line OFFSET + $SLURM_ARRAY_TASK_ID of the submission's cells.txt.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from rich.console import Console

from harness import exits
from harness import matrix as matrix_mod
from harness.cells import Cell
from harness.engines import select_engine
from harness.engines.base import Engine
from harness.errors import EnvironmentUnavailable, EnvironmentUnsupported, UserError
from harness.host.gpumon import GpuMonitor
from harness.host.resources import Pool, discover
from harness.index.releases import Resolver
from harness.matrix.release_cells import derived_cell
from harness.results import record
from harness.results.result import Result
from harness.results.store import ResultStore, read_json, write_json
from harness.run.executors.slurm.submissions import DERIVED, derivation_problem, shape_problem
from harness.run.lifecycle import Lifecycle


def run_task(sub_dir: Path, offset: int) -> int:
    """Run the one cell this array task stands for, through the lifecycle, on the whole allocation."""
    console = Console(soft_wrap=True, force_terminal=False)
    meta = read_json(sub_dir / "submission.json")
    try:
        cells = (sub_dir / "cells.txt").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        cells = []
    line = offset + int(os.environ["SLURM_ARRAY_TASK_ID"])
    why = shape_problem(meta, cells) or (None if line < len(cells) else f"cells.txt has no line {line}")
    if why is None and not isinstance(meta.get("matrix_file"), str):
        why = "'matrix_file' is missing or not a string"
    if why:
        print(f"{sub_dir / 'submission.json'}: not a submission ({why})", file=sys.stderr)
        return exits.USER_ERROR
    cell_id = cells[line]
    try:
        base = meta.get("matrix_dir") if isinstance(meta.get("matrix_dir"), str) else None
        # version ranges: as the submission recorded them beside the results (nodes may be offline)
        m = matrix_mod.load(sub_dir / Path(meta["matrix_file"]).name,
                            resolver=Resolver(sub_dir.parents[2], offline=True), base=base)  # the user's code paths
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exits.USER_ERROR
    cell = next((c for c in m.cells if c.id == cell_id), None) or _derived(sub_dir, m, cell_id)
    if isinstance(cell, str) or cell is None:
        print(cell or f"cell {cell_id} is not in {sub_dir / meta['matrix_file']}", file=sys.stderr)
        return exits.USER_ERROR
    seen = {"cell": cell_id, "node": os.uname().nodename, "started": record.now(), "job": task_identity()["job"],
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "SLURM_JOB_GPUS": os.environ.get("SLURM_JOB_GPUS"), "pid": os.getpid()}
    write_json(sub_dir / "tasks" / f"{line}.json", seen)
    console.print(f"cell {cell_id} on {seen['node']}, CUDA_VISIBLE_DEVICES={seen['CUDA_VISIBLE_DEVICES']!r}")
    args = meta.get("engine_args") or {}
    store = ResultStore(Path(meta["results_root"]), m.name)
    try:
        with select_engine(meta["engine"], pythons=args.get("pythons"), ca_bundle=args.get("ca_bundle"),
                           console=console) as engine:
            engine.warm = meta.get("fresh") is not True  # `run --fresh`: no caches, no verdict before launch
            result = run_one(cell, engine, store, meta["matrix_label"], m.sha256, frozenset(meta["rerun"]),
                             console)
    except Exception as exc:  # noqa: BLE001 - the node's own failure becomes the cell's recorded result
        result = record_fault(cell, exc, store, meta, m.sha256, console)
    if result is not None:
        console.print(f"{result.cell}: {result.status}")
    return exits.OK


def record_fault(cell: Cell, exc: Exception, store: ResultStore, meta: dict, matrix_sha256: str,
                 console: Console) -> Result | None:
    """The task's own code failed around its cell (the engine's set-up on this node, the store):
    the cell's result says so (`Lifecycle.harness_fault`) instead of the cell going missing -- no one
    reads a task's exit status. The traceback goes to the task's log as well."""
    console.print(f"the harness failed around {cell.id} on this node: {type(exc).__name__}: {exc}")
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    claim = store.claim(cell.id)
    if claim is None:
        return None  # another task holds it (a requeue): that one records it
    try:
        done = store.existing(cell)
        if done is not None and not store.needs_run(cell, frozenset(meta.get("rerun") or ())):
            return done
        life = Lifecycle(store, str(meta.get("engine")), meta["matrix_label"], matrix_sha256,
                         provenance={"slurm": task_identity()})
        return life.harness_fault(cell, exc)
    finally:
        claim.release()


def _derived(sub_dir: Path, m, cell_id: str) -> Cell | str | None:
    """A cell that is not the matrix's own (a `bisect` release of one of its cells), rebuilt from
    the submission's derived.json the way the search built it; why not, or None if not listed."""
    table = read_json(sub_dir / DERIVED)
    entry = table.get(cell_id) if isinstance(table, dict) else None
    if entry is None:
        return None
    why = derivation_problem(entry)
    base = next((c for c in m.cells if c.id == entry["base"]), None) if why is None else None
    if why is None and base is None:
        why = f"its base cell {entry['base']!r} is not in the matrix"
    if why:
        return f"{sub_dir / DERIVED}: the entry for {cell_id} is not one the harness wrote ({why})"
    cell = derived_cell(base, entry["package"], entry["version"], entry["cutoff"], entry["repeat"])
    if cell.id != cell_id:
        return f"{sub_dir / DERIVED}: the entry for {cell_id} rebuilds {cell.id}"
    return cell


def task_identity() -> dict:
    """Which array task ran the cell, as Slurm names it: the result then points at its job."""
    env = os.environ
    job = env.get("SLURM_ARRAY_JOB_ID") or env.get("SLURM_JOB_ID")
    task = env.get("SLURM_ARRAY_TASK_ID")
    return {"job": f"{job}_{task}" if job and task else job, "node": env.get("SLURMD_NODENAME") or os.uname().nodename,
            "partition": env.get("SLURM_JOB_PARTITION")}


def run_one(cell: Cell, engine: Engine, store: ResultStore, matrix_label: str, matrix_sha256: str,
            rerun: frozenset[str], console: Console) -> Result | None:
    """One cell with every core and GPU this process may use (a task's allocation): what a local
    run does for a matrix of one, without the local executor's scheduling."""
    removed, _ = store.clean_partials()
    if removed:
        console.print(f"removed {removed} half-written cell folder(s) left by an interrupted task")
    if not store.needs_run(cell, rerun):
        for note in store.take_notes():
            console.print(f"quarantined {note}")
        console.print(f"{cell.id} already has a result; nothing to do")
        return store.existing(cell)
    for note in store.take_notes():
        console.print(f"quarantined {note}")
    inventory = discover(None)
    monitor = GpuMonitor.maybe(inventory.gpus)
    life = Lifecycle(store, engine.name, matrix_label, matrix_sha256,
                     provenance={"host_resources": inventory.describe(), "slurm": task_identity()}, monitor=monitor)
    claim = store.claim(cell.id)
    if claim is None:
        console.print(f"{cell.id} is being run by another process")
        return None
    try:
        life.stage()
        pool = Pool(inventory, jobs=1, cells=1)
        try:
            prepared = life.prepare(engine, cell.environment)
        except (EnvironmentUnavailable, EnvironmentUnsupported) as exc:
            return life.not_run(cell, exc)
        why = pool.impossible(cell)
        if why:
            return life.not_run(cell, why)
        console.print(f"environment {cell.environment.name}: {'reused' if prepared.reused else 'built'} "
                      f"({engine.name})")
        slot = pool.take(cell)
        try:
            return life.run(engine, prepared, cell, slot=slot)
        finally:
            pool.give_back(slot)
    finally:
        claim.release()
        if monitor:
            monitor.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.run.executors.slurm task SUBMISSION_DIR OFFSET``: what the generated scripts run.

    Kept out of the user's command line on purpose: it is a contract between this module and the
    scripts it writes, so both change together, and ``harness --help`` lists only what people type.
    """
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "task" or not argv[2].isdigit() or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage (inside a Slurm array task): python -m harness.run.executors.slurm task SUBMISSION_DIR OFFSET",
              file=sys.stderr)
        return exits.USER_ERROR
    return run_task(Path(argv[1]), int(argv[2]))

