"""Running a matrix on this host: prepare each environment once, run each cell
in a fresh process on its own resources, record it, and keep going whatever
a cell does.

The runner is the command line's face of a local run (progress, one line per
cell, the run record); the executor (``executors.local``) decides when cells
run and side by side with which; `lifecycle.Lifecycle` owns each cell's life
(partial folder, engine run, evidence, verdict, result, commit); the engine
decides what they run in."""

from __future__ import annotations

import json
import os
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

from harness import chains, status, usercode
from harness.cells import Cell
from harness.engines.base import Engine, Prepared
from harness.errors import EnvironmentUnavailable, EnvironmentUnsupported  # noqa: F401 - re-exported
from harness.host import beside, resources
from harness.host.gpumon import GpuMonitor
from harness.host.resources import Pool, Slot
from harness.launch import durations
from harness.launch.launcher import Plan
from harness.launch.standby import Standby
from harness.matrix import Matrix
from harness.report.analysis import Group
from harness.report.tables import group_summary
from harness.results.result import Result
from harness.results.store import Claim, ResultStore
from harness.run.executors.local import Hooks, execute
from harness.run.lifecycle import Lifecycle, stage_workloads  # noqa: F401 - re-exported
from harness.run.selection import Selection, pending
from harness.terminal import shown


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
        self.life = Lifecycle(self.store, engine.name, self.matrix_label, matrix.sha256)
        self.jobs, self.gpus, self.cpus_per_cell = jobs, gpus, cpus_per_cell
        self.monitor: GpuMonitor | None = None
        self.inventory: resources.Inventory | None = None
        self._progress = None
        self._measured: dict[str, float] = {}  # this run's cells: id -> seconds held (durations.py)
        self._compiled: set[str] = set()       # this run's cells that left their programs in the cache
        self._cached: set[str] = set()         # cells whose programs an earlier run left there

    def complete(self, cells: list[Cell]) -> list[Result]:
        """Run what `cells` still need (`selection.pending`), then return the result of every one
        of them that has one, judged again against its expectation: the usual way to run a matrix."""
        removed, ended = self.store.clean_partials()
        if removed:
            self.console.print(f"removed {removed} half-written cell folder(s) left by an interrupted run"
                               + (f"; ended {ended} cell process group(s) it left running" if ended else ""))
        chosen = pending(self.store, cells, self.rerun)
        self._notes()
        self._tell(chosen)
        self.run(chosen.todo)
        return self.results(cells)

    def run(self, cells: list[Cell]) -> None:
        """Run exactly `cells` (what a selection chose), producers before the cells that need
        their files, each on its own resources; its results are in the store."""
        if not cells:
            return
        self.life.stage(usercode.codes_of(cells))  # the user's code travels with the workloads
        plan = self._plan(cells)
        for wave in chains.waves(cells):
            self._run_all(wave, plan)

    def results(self, cells: list[Cell]) -> list[Result]:
        """The stored result of each of `cells` that has one, its expectation judged again (a
        `same_as` peer may have run since)."""
        out = []
        for cell in cells:
            result = self.store.existing(cell)
            if result:
                out.append(self.life.rejudge(cell, result))
        self._notes()
        return out

    def _tell(self, chosen: Selection) -> None:
        if chosen.stale:
            self.console.print(f"{len(chosen.stale)} cell(s) changed since their stored result and run again")
        if chosen.skipped:
            self.console.print(f"{chosen.skipped} of {len(chosen.asked)} cells already have results in "
                               f"{self.store.run_dir} and are skipped (--rerun STATUS to run them again)")

    def _notes(self) -> None:
        for note in self.store.take_notes():
            self.console.print(f"[yellow]quarantined[/] {shown(note)}", highlight=False)

    def _plan(self, todo: list[Cell]) -> Plan | None:
        """The warm launchers' schedule over every cell this run has still to run (launcher.Plan):
        every engine has launchers (a container engine's are containers); only a warm run has one."""
        if not self.engine.warm:
            return None
        plan = Plan(todo, self.engine.fresh_because)
        self.engine.launcher().plan = plan
        return plan

    def _run_all(self, todo: list[Cell], plan: Plan | None = None) -> None:
        self.inventory = resources.discover(self.gpus)
        self.life.provenance["host_resources"] = self.inventory.describe()
        pool = Pool(self.inventory, self.jobs, self.cpus_per_cell, cells=len(todo))
        gpu_cells = sum(1 for c in todo if resources.gpus_needed(c))
        self.console.print(f"host: {len(self.inventory.cpus)} CPU core(s), {len(self.inventory.gpus)} GPU(s) "
                           f"({self.inventory.source}); up to {pool.jobs} cell(s) at once, CPU cells on "
                           f"{pool.cpus_per_cell} core(s) each" + (f", {gpu_cells} GPU cell(s)" if gpu_cells else ""))
        self.monitor = self.life.monitor = GpuMonitor.maybe(self.inventory.gpus)
        self.life.gpus = list(self.inventory.gpus)
        started = time.time()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        known, self._measured, self._compiled = durations.load(), {}, set()
        self._cached = known.programs
        hooks = Hooks(prepare=self._prepare, run_cell=self._run_in_slot, not_run=self._not_run,
                      finished=self._finished, waiting=lambda text: self.console.print(text),
                      stands_by=self.engine.stands_by, expected=lambda cell: known.seconds.get(cell.id))
        try:
            with Progress(*columns, console=self.console, transient=True) as progress:
                self._progress = (progress, progress.add_task("cells", total=len(todo)))
                execute(todo, self.store, pool, hooks, plan)
        finally:
            self._progress = None
            durations.remember(self._measured, self._compiled)  # for the next run (an interrupted run's too)
            self._write_run_record(started, time.time(), pool, len(todo))
            if self.monitor:
                self.monitor.stop()

    # -- hooks the executor calls ----------------------------------------------
    def _prepare(self, env) -> Prepared:
        """Prepare an environment (in the executor's preparing thread, beside running cells: a
        build is recorded as such in their results, beside.py)."""
        activity = beside.begin(beside.ENVIRONMENT_BUILD, env.name)
        try:
            prepared = self.life.prepare(self.engine, env)
        except EnvironmentUnavailable as exc:
            beside.end(activity)
            self.console.print(f"[yellow]{status.UNAVAILABLE}[/] {env.name}: {shown(exc.reason)}")
            raise
        except BaseException:
            beside.end(activity)
            raise
        if prepared.reused:
            beside.drop(activity)  # found built: nothing ran
        else:
            beside.end(activity)
        how = "reused" if prepared.reused else "built"
        self.console.print(f"environment {env.name}: {how} ({self.engine.name})")
        return prepared

    def _run_in_slot(self, prepared: Prepared, cell: Cell, slot: Slot, claim: Claim,
                     cancel: threading.Event, standby: Standby | None = None, release=None) -> Result:
        if standby is not None:  # its programs are in the compile cache: it may prepare them ahead
            standby.programs = cell.id in self._cached
        try:
            return self.life.run(self.engine, prepared, cell, slot=slot, cancel=cancel, standby=standby,
                                 release=release)
        finally:
            claim.release()

    def _not_run(self, cell: Cell, claim: Claim, cause: BaseException | str) -> Result:
        return self.life.not_run(cell, cause)

    def _finished(self, result: Result, slot: Slot | None) -> None:
        seconds = durations.seconds_of(result)
        if seconds is not None:
            self._measured[result.cell] = seconds
        if durations.left_programs(result):
            self._compiled.add(result.cell)
        self._announce(result, slot)
        if self._progress:
            progress, task = self._progress
            progress.advance(task)

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

    def _announce(self, result: Result, slot: Slot | None = None) -> None:
        word = result.status
        colour = {status.OK: "green", status.UNSUPPORTED: "blue", status.UNAVAILABLE: "yellow"}.get(word, "red")
        seconds = result.timing.get("total_seconds")
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        if result.timing.get("standby") and result.timing.get("held_seconds") is not None:
            took = f" ({result.timing['held_seconds']:.1f} s on its GPUs, prepared while another trained)"
        where = ""
        if slot is not None and (slot.gpus or slot.cpus):
            parts = ([f"gpu {slot.visible_devices}"] if slot.gpus else []) + (
                [f"cpu {_ranges(slot.cpus)}"] if slot.cpus else [])
            where = f" [dim]on {' '.join(parts)}[/]"
        flag = {None: "", True: " [green]as expected[/]", False: " [red]NOT as expected[/]"}[result.met]
        if result.expectation and result.expectation.get("judged") is False:
            flag = " [dim](expectation not judged here)[/]"
        elif result.expectation and result.met is None:  # a value `same_as` a cell that has not run yet
            flag = " [dim](expectation judged when its peer has run)[/]"
        self.console.print(f"[{colour}]{word:>11}[/] {shown(result.cell)}  "
                           f"{shown(group_summary(Group([result])).text)}{took}{where}{flag}",
                           highlight=False)


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
