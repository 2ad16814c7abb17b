"""Running a matrix: prepare each environment once, run each cell in a fresh
process on its own resources, record it, and keep going whatever a cell does.

The runner owns a cell's life (claim, partial folder, engine run, verdict,
result, commit); the executor (``executors.local``) decides when cells run
and side by side with which; the engine decides what they run in."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from . import outcome, record, resources, selfcheck, status
from .cells import Cell
from .engines.base import Engine, Prepared, RunContext
from .errors import CellUnsupported, EnvironmentUnavailable
from .executors.local import Hooks, execute
from .gpumon import GpuMonitor
from .matrix import Matrix
from .report.analysis import Group
from .report.tables import group_summary
from .resources import Pool, Slot
from .store import RESULT, SPEC, Claim, ResultStore, write_json
from .terminal import shown
from .workloads.protocol import EVENTS_FILE, STDERR_FILE, WORKLOAD_FILE

WORKLOADS_SRC = Path(__file__).resolve().parent / "workloads"


def stage_workloads(run_dir: Path) -> tuple[Path, str]:
    """Copy the workloads package next to the results, keyed by its content.

    Cells import it from there (mounted read-only in containers), so the code
    a result came from stays on disk beside it, and editing a workload never
    forces an image rebuild.
    """
    digest = record.sha256_of_tree(WORKLOADS_SRC)
    root = run_dir / ".workloads" / digest[:12]
    if not (root / "workloads" / "__init__.py").exists():
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(WORKLOADS_SRC, tmp / "workloads", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    return root, digest


def check_expectation(cell: Cell, result: dict) -> dict | None:
    """Compare a control cell with the answer its matrix says it must give."""
    return status.judge(cell.expect, result)


def select(cells: Iterable[Cell], patterns: list[str] | None) -> list[Cell]:
    if not patterns:
        return list(cells)
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) or c.id.startswith(p) for p in patterns)]


class Runner:
    def __init__(self, matrix: Matrix, engine: Engine, results_root: Path, console: Console,
                 rerun: frozenset[str] = frozenset(), matrix_label: str | None = None, *,
                 jobs: int | None = None, gpus: str | None = None, cpus_per_cell: int | None = None):
        self.matrix = matrix
        self.engine = engine
        self.store = ResultStore(results_root, matrix.name)
        self.console = console
        self.rerun = rerun
        self.matrix_label = matrix_label or str(matrix.path)
        self.workloads_digest: str | None = None
        self.jobs, self.gpus, self.cpus_per_cell = jobs, gpus, cpus_per_cell
        self.monitor: GpuMonitor | None = None
        self.inventory: resources.Inventory | None = None
        self._workloads_root: Path | None = None
        self._progress = None

    def run(self, cells: list[Cell]) -> list[dict]:
        removed, ended = self.store.clean_partials()
        for note in self.store.notes:
            self.console.print(f"[yellow]note[/]: {shown(note)}", highlight=False)
        if removed:
            self.console.print(f"removed {removed} half-written cell folder(s) left by an interrupted run"
                               + (f"; ended {ended} cell process group(s) it left running" if ended else ""))
        todo = [c for c in cells if self.store.needs_run(c, self.rerun)]
        stale = [c for c in todo if self.store.existing(c) and self.store.is_stale(c)]
        if stale:
            self.console.print(f"{len(stale)} cell(s) changed since their stored result and run again")
        skipped = len(cells) - len(todo)
        if skipped:
            self.console.print(f"{skipped} of {len(cells)} cells already have results in {self.store.run_dir} "
                               "and are skipped (--rerun STATUS to run them again)")
        if todo:
            self._workloads_root, self.workloads_digest = stage_workloads(self.store.run_dir)
            self._run_all(todo)
        results = []
        for cell in cells:
            result = self.store.existing(cell)
            if result:
                results.append(self._rejudge(cell, result))
        return results

    def _rejudge(self, cell: Cell, result: dict) -> dict:
        """Judge a stored result against the matrix as it is now (an edited
        `expect:` changes the verdict, not the run) and store the new verdict,
        so `report` reads the same answer `run` printed."""
        judged = check_expectation(cell, result)
        if judged != result.get("expectation") or cell.expect != result.get("expect"):
            result["expectation"], result["expect"] = judged, cell.expect
            claim = self.store.claim(cell.id)
            if claim is not None:  # a live run owns the cell: it writes its own verdict
                try:
                    write_json(self.store.final_dir(cell) / RESULT, result)
                finally:
                    claim.release()
        return result

    def _run_all(self, todo: list[Cell]) -> None:
        self.inventory = resources.discover(self.gpus)
        pool = Pool(self.inventory, self.jobs, self.cpus_per_cell, cells=len(todo))
        gpu_cells = sum(1 for c in todo if resources.gpus_needed(c))
        self.console.print(f"host: {len(self.inventory.cpus)} CPU core(s), {len(self.inventory.gpus)} GPU(s) "
                           f"({self.inventory.source}); up to {pool.jobs} cell(s) at once, CPU cells on "
                           f"{pool.cpus_per_cell} core(s) each" + (f", {gpu_cells} GPU cell(s)" if gpu_cells else ""))
        self.monitor = GpuMonitor.maybe(self.inventory.gpus)
        started = time.time()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        hooks = Hooks(prepare=self._prepare, run_cell=self._run_in_slot, not_run=self._not_run,
                      finished=self._finished, waiting=lambda text: self.console.print(text))
        try:
            with Progress(*columns, console=self.console, transient=True) as progress:
                self._progress = (progress, progress.add_task("cells", total=len(todo)))
                execute(todo, self.store, pool, hooks)
        finally:
            self._progress = None
            self._write_run_record(started, time.time(), pool, len(todo))
            if self.monitor:
                self.monitor.stop()

    # -- hooks the executor calls ----------------------------------------------
    def _prepare(self, env) -> Prepared:
        """Prepare an environment (in the executor's preparing thread)."""
        if env.device == "gpu" and not resources.nvml_gpus():
            raise EnvironmentUnsupported("a GPU environment, and this host has no NVIDIA GPU "
                                         "(nvidia-smi lists none)")
        log_path = self.store.run_dir / ".build" / f"{env.name}-{env.content_hash()}.log"
        try:
            prepared = self.engine.prepare(env, log_path)
            if selfcheck.needed(env):  # CUDA / cuDNN present and working, before a cell spends time on it
                selfcheck.check(self.engine, prepared, self._workloads_root, log_path, reuse=True)
        except EnvironmentUnavailable as exc:
            self.console.print(f"[yellow]unavailable[/] {env.name}: {shown(exc.reason)}")
            raise
        how = "reused" if prepared.reused else "built"
        self.console.print(f"environment {env.name}: {how} ({self.engine.name})")
        return prepared

    def _run_in_slot(self, prepared: Prepared, cell: Cell, slot: Slot, claim: Claim,
                     cancel: threading.Event) -> dict:
        try:
            return self.run_cell(prepared, cell, self._workloads_root, slot=slot, cancel=cancel)
        finally:
            claim.release()

    def _not_run(self, cell: Cell, claim: Claim, cause: BaseException | str) -> dict:
        if isinstance(cause, EnvironmentUnavailable):
            return self._record_unavailable(cell, cause)
        if isinstance(cause, EnvironmentUnsupported):
            return self._record_unsupported(cell, str(cause))
        if isinstance(cause, BaseException):
            raise cause
        return self._record_unsupported(cell, cause)

    def _finished(self, result: dict, slot: Slot | None) -> None:
        self._announce(result, slot)
        if self._progress:
            progress, task = self._progress
            progress.advance(task)

    # -- one cell ---------------------------------------------------------------
    def run_cell(self, prepared: Prepared, cell: Cell, workloads_root: Path, *, slot: Slot | None = None,
                 cancel: threading.Event | None = None) -> dict:
        slot = slot or Slot()
        started, clock = record.now(), time.monotonic()
        work = self.store.begin(cell)
        spawn = time.time()
        try:
            write_json(work / SPEC, cell.spec())
            ctx = RunContext(slot=slot, cancel=cancel,
                             on_start=lambda pgid: self.store.note_process(work, pgid), run_id=self.store.run_id)
            raw = self.engine.run(prepared, cell, work, workloads_root, ctx)
        except CellUnsupported as exc:
            return self._finish(cell, work, started, prepared.provenance, None,
                                outcome.Verdict(status.UNSUPPORTED, reason=str(exc)), slot)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)  # never leave half a result
            raise
        events = record.read_events(work / EVENTS_FILE)
        workload = record.read_json(work / WORKLOAD_FILE)  # None if the process died before writing it
        utilisation = self._utilisation(slot, events)
        verdict = outcome.classify(raw, workload, events[-1] if events else None,
                                   record.tail(work / STDERR_FILE), asked=cell.parallelism.devices,
                                   utilisation=utilisation)
        extra = {"utilisation": utilisation, "spawned": spawn, "runner_seconds": time.monotonic() - clock}
        return self._finish(cell, work, started, prepared.provenance, raw, verdict, slot, extra)

    def _utilisation(self, slot: Slot, events: list[dict]) -> dict | None:
        """NVML samples of the cell's own GPUs over its steady epochs (2..N)."""
        if not self.monitor or not slot.gpus:
            return None
        epochs = [e for e in events if e.get("event") == "epoch"]
        if len(epochs) < 2:
            return None
        start = epochs[0]["wall"]          # the end of epoch 1 = the start of the steady part
        end = epochs[-1]["wall"]
        return self.monitor.window([g.index for g in slot.gpus], start, end) or None

    def _finish(self, cell: Cell, work: Path, started: str, provenance: dict, raw, verdict,
                slot: Slot | None = None, extra: dict | None = None) -> dict:
        provenance = {**provenance, "workloads_sha256": self.workloads_digest}
        if self.inventory is not None:
            provenance["host_resources"] = self.inventory.describe()
        result = record.assemble(cell, self.engine.name, provenance, raw, verdict, work,
                                 self.matrix_label, self.matrix.sha256, started, slot=slot, extra=extra)
        result["expectation"] = check_expectation(cell, result)
        write_json(work / RESULT, result)
        self.store.commit(work, cell)
        return result

    def _record_unsupported(self, cell: Cell, reason: str) -> dict:
        work = self.store.begin(cell)
        write_json(work / SPEC, cell.spec())
        return self._finish(cell, work, record.now(), {}, None, outcome.Verdict(status.UNSUPPORTED, reason=reason))

    def _record_unavailable(self, cell: Cell, exc: EnvironmentUnavailable) -> dict:
        started = record.now()
        work = self.store.begin(cell)
        write_json(work / SPEC, cell.spec())
        (work / "build.log").write_text(exc.log_tail)
        error = {"kind": "unavailable", "type": None, "message": exc.reason,
                 "signature": outcome.signature("unavailable", None, exc.reason), "exit_code": None,
                 "signal": None, "log_tail": exc.log_tail[-3000:]}
        return self._finish(cell, work, started, {}, None,
                            outcome.Verdict(status.UNAVAILABLE, error=error, reason=exc.reason))

    def _write_run_record(self, start: float, end: float, pool: Pool, cells: int) -> None:
        """One file per run: the host's resources and topology, the wall time,
        and how busy its GPUs were (the figure a packed run is judged by)."""
        folder = self.store.run_dir / ".runs"
        folder.mkdir(parents=True, exist_ok=True)
        data = {"started": start, "finished": end, "wall_seconds": round(end - start, 2), "cells": cells,
                "jobs": pool.jobs, "cpus_per_cell": pool.cpus_per_cell, "engine": self.engine.name,
                "host": socket.gethostname(), "resources": self.inventory.describe() if self.inventory else None,
                "gpu_occupancy": self.monitor.occupancy(start, end) if self.monitor else None}
        name = time.strftime("%Y%m%dT%H%M%S", time.gmtime(start)) + f"-{socket.gethostname()}-{os.getpid()}.json"
        (folder / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        if data["gpu_occupancy"]:
            occ = data["gpu_occupancy"]
            self.console.print(f"GPU occupancy over the run: some GPU busy in {occ['any_busy_fraction']:.0%} "
                               f"of samples, {occ['mean_busy_gpus']} of {occ['gpus']} busy on average")

    def _announce(self, result: dict, slot: Slot | None = None) -> None:
        word = result["status"]
        colour = {status.OK: "green", status.UNSUPPORTED: "blue", status.UNAVAILABLE: "yellow"}.get(word, "red")
        seconds = (result.get("timing") or {}).get("total_seconds")
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        where = ""
        if slot is not None and (slot.gpus or slot.cpus):
            parts = ([f"gpu {slot.visible_devices}"] if slot.gpus else []) + (
                [f"cpu {_ranges(slot.cpus)}"] if slot.cpus else [])
            where = f" [dim]on {' '.join(parts)}[/]"
        expectation = result.get("expectation")
        flag = ""
        if expectation is not None:
            flag = " [green]as expected[/]" if expectation["met"] else " [red]NOT as expected[/]"
        self.console.print(f"[{colour}]{word:>11}[/] {shown(result['cell'])}  "
                           f"{shown(group_summary(Group([result])).text)}{took}{where}{flag}",
                           highlight=False)


class EnvironmentUnsupported(Exception):
    """The host cannot run this environment at all (a GPU stack without a GPU)."""


def _ranges(numbers: Iterable[int]) -> str:
    """0,1,2,5 -> '0-2,5'"""
    out, run = [], []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
