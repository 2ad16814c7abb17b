"""Running a matrix: group cells by environment, prepare each once, run each
cell in a fresh process, record it, and keep going whatever a cell does."""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from . import hostinfo, outcome, record, selfcheck
from .cells import Cell
from .engines.base import Engine, Prepared
from .errors import CellUnsupported, EnvironmentUnavailable
from .matrix import Matrix
from .report.analysis import Group
from .report.tables import group_summary
from .store import RESULT, SPEC, ResultStore, write_json

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
    expect = cell.expect
    if not expect:
        return None
    status_ok = result["status"] == expect["status"]
    want_sig = expect.get("signature")
    got_sig = (result.get("error") or {}).get("signature") or result.get("reason") or ""
    sig_ok = not want_sig or want_sig.lower() in got_sig.lower()
    return {"status": expect["status"], "signature": want_sig, "met": status_ok and sig_ok,
            "why": expect.get("why")}


def select(cells: Iterable[Cell], patterns: list[str] | None) -> list[Cell]:
    if not patterns:
        return list(cells)
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) or c.id.startswith(p) for p in patterns)]


class Runner:
    def __init__(self, matrix: Matrix, engine: Engine, results_root: Path, console: Console,
                 rerun: frozenset[str] = frozenset(), matrix_label: str | None = None):
        self.matrix = matrix
        self.engine = engine
        self.store = ResultStore(results_root, matrix.name)
        self.console = console
        self.rerun = rerun
        self.matrix_label = matrix_label or str(matrix.path)
        self.workloads_digest: str | None = None

    def run(self, cells: list[Cell]) -> list[dict]:
        removed = self.store.clean_partials()
        if removed:
            self.console.print(f"removed {removed} half-written cell folder(s) left by an interrupted run")
        todo = [c for c in cells if self.store.needs_run(c, self.rerun)]
        stale = [c for c in todo if self.store.existing(c) and self.store.is_stale(c)]
        if stale:
            self.console.print(f"{len(stale)} cell(s) changed since their stored result and run again")
        skipped = len(cells) - len(todo)
        if skipped:
            self.console.print(f"{skipped} of {len(cells)} cells already have results in {self.store.run_dir} "
                               "and are skipped (--rerun STATUS to run them again)")
        if todo:
            workloads_root, digest = stage_workloads(self.store.run_dir)
            self.workloads_digest = digest
            self._run_all(todo, workloads_root)
        results = []
        for cell in cells:
            result = self.store.existing(cell)
            if result:  # judged against the matrix as it is now, which may have changed since the run
                result["expectation"] = check_expectation(cell, result)
                results.append(result)
        return results

    def _run_all(self, todo: list[Cell], workloads_root: Path) -> None:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            task = progress.add_task("cells", total=len(todo))
            for env_name, group in groupby(todo, key=lambda c: c.environment.name):
                env_cells = list(group)
                env = env_cells[0].environment
                if env.device == "gpu" and not hostinfo.nvidia_gpus():
                    reason = "a GPU environment, and this host has no NVIDIA GPU (nvidia-smi lists none)"
                    self.console.print(f"[blue]unsupported[/] {env_name}: {reason}")
                    for cell in env_cells:
                        self._record_unsupported(cell, reason)
                        progress.advance(task)
                    continue
                progress.update(task, description=f"preparing {env_name}")
                log_path = self.store.run_dir / ".build" / f"{env_name}-{env.content_hash()}.log"
                try:
                    prepared = self.engine.prepare(env, log_path)
                    if selfcheck.needed(env):  # issue 16: the GPU self-check, before any cell spends time on it
                        selfcheck.check(self.engine, prepared, workloads_root, log_path)
                except EnvironmentUnavailable as exc:
                    self.console.print(f"[yellow]unavailable[/] {env_name}: {escape(exc.reason)}")
                    for cell in env_cells:
                        self._record_unavailable(cell, exc)
                        progress.advance(task)
                    continue
                how = "reused" if prepared.reused else "built"
                self.console.print(f"environment {env_name}: {how} ({self.engine.name})")
                for cell in env_cells:
                    progress.update(task, description=cell.id)
                    result = self.run_cell(prepared, cell, workloads_root)
                    self._announce(result)
                    progress.advance(task)

    def run_cell(self, prepared: Prepared, cell: Cell, workloads_root: Path) -> dict:
        started = record.now()
        work = self.store.begin(cell)
        try:
            write_json(work / SPEC, cell.spec())
            raw = self.engine.run(prepared, cell, work, workloads_root)
        except CellUnsupported as exc:
            return self._finish(cell, work, started, prepared.provenance, None,
                                outcome.Verdict("unsupported", reason=str(exc)))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)  # never leave half a result
            raise
        events = record.read_events(work / "events.jsonl")
        workload = record.read_json(work / "workload.json")  # None if the process died before writing it
        verdict = outcome.classify(raw, workload, events[-1] if events else None,
                                   record.tail(work / "stderr.log"))
        return self._finish(cell, work, started, prepared.provenance, raw, verdict)

    def _finish(self, cell: Cell, work: Path, started: str, provenance: dict, raw, verdict) -> dict:
        provenance = {**provenance, "workloads_sha256": self.workloads_digest}
        result = record.assemble(cell, self.engine.name, provenance, raw, verdict, work,
                                 self.matrix_label, self.matrix.sha256, started)
        result["expectation"] = check_expectation(cell, result)
        write_json(work / RESULT, result)
        self.store.commit(work, cell)
        return result

    def _record_unsupported(self, cell: Cell, reason: str) -> None:
        work = self.store.begin(cell)
        write_json(work / SPEC, cell.spec())
        self._finish(cell, work, record.now(), {}, None, outcome.Verdict("unsupported", reason=reason))

    def _record_unavailable(self, cell: Cell, exc: EnvironmentUnavailable) -> None:
        started = record.now()
        work = self.store.begin(cell)
        write_json(work / SPEC, cell.spec())
        (work / "build.log").write_text(exc.log_tail)
        error = {"kind": "unavailable", "type": None, "message": exc.reason,
                 "signature": outcome.signature("unavailable", None, exc.reason), "exit_code": None,
                 "signal": None, "log_tail": exc.log_tail[-3000:]}
        self._finish(cell, work, started, {}, None, outcome.Verdict("unavailable", error=error, reason=exc.reason))

    def _announce(self, result: dict) -> None:
        status = result["status"]
        colour = {"ok": "green", "unsupported": "blue", "unavailable": "yellow"}.get(status, "red")
        seconds = (result.get("timing") or {}).get("total_seconds")
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        expectation = result.get("expectation")
        flag = ""
        if expectation is not None:
            flag = " [green]as expected[/]" if expectation["met"] else " [red]NOT as expected[/]"
        self.console.print(f"[{colour}]{status:>11}[/] {escape(result['cell'])}  "
                           f"{escape(group_summary(Group([result])).text)}{took}{flag}",
                           highlight=False)
