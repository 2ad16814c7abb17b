"""Where each cell of a matrix stands on a cluster: finished (a result), queued or running (a live
task), or missing -- what ``harness status`` shows, and what ``run --executor slurm`` asks before it
submits (a cell still queued is not submitted twice).

The board reads the results through the store (a result.json that is not a result counts as
missing, with a note), the submissions from disk (`submissions.py`) and the queue (`queue.py`).
It writes two things, both through the lifecycle: Slurm's verdict on a task that ended without a
result at its time or memory limit (`verdicts.record_verdict`), once; and, when no task of the
matrix is queued or running any more, each result's verdict judged again with the other cells'
results at hand (`Lifecycle.rejudge`): a value expectation `same_as: ENV` compares cells that
finished in different tasks, in any order, so a task cannot judge it when it ends -- as a local
run judges every cell again at its end.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from harness.cells import Cell
from harness.matrix import Matrix
from harness.results.result import Result
from harness.results.store import ResultStore
from harness.run.executors.slurm.queue import ACTIVE, DEFAULT_POLL, RUNNING, queue_states, task_state, watch
from harness.run.executors.slurm.submissions import Submission, submissions
from harness.run.executors.slurm.verdicts import VERDICTS, killed_for_memory, record_verdict
from harness.run.lifecycle import Lifecycle, judge
from harness.terminal import shown

FINISHED, QUEUED, LIVE, MISSING = "finished", "queued", "running", "missing"


@dataclass
class Entry:
    cell: str
    where: str  # FINISHED | QUEUED | LIVE (running) | MISSING
    status: str | None = None  # the result's status, when finished
    task: str | None = None    # 'JOB_i'
    state: str | None = None   # Slurm's state
    note: str | None = None
    drifted: bool = False  # a control cell whose result is not what the matrix expects


def _result_is_new(result: Result | None, since: dt.datetime) -> bool:
    try:
        return result is not None and dt.datetime.fromisoformat(result.started) >= since.replace(microsecond=0)
    except (TypeError, ValueError):
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
    entry = _where(matrix, store, cell, latest, states, console)
    result = store.existing(cell) if entry.where == FINISHED else None
    entry.drifted = bool(result and (judge(cell, result) or {}).get("met") is False)
    return entry


def _where(matrix: Matrix, store: ResultStore, cell: Cell, latest: tuple[Submission, int, str | None] | None,
           states: dict[str, dict], console: Console | None) -> Entry:
    result = store.existing(cell)
    if latest is None:
        return Entry(cell.id, FINISHED, result.status) if result else Entry(cell.id, MISSING)
    sub, line, task = latest
    if _result_is_new(result, sub.submitted):
        return Entry(cell.id, FINISHED, result.status, task)
    info = task_state(states, task)
    state = info["state"] if info else None
    if state in ("FAILED", "CANCELLED") and task and killed_for_memory(sub, task):
        info = {**info, "state": "OUT_OF_MEMORY", "reported": state}
        state = "OUT_OF_MEMORY"
    if state in ACTIVE:
        where = LIVE if state in RUNNING else QUEUED
        return Entry(cell.id, where, None, task, state)
    if state in VERDICTS:
        written = record_verdict(matrix.sha256, store, cell, sub, task, info)
        if written is None:
            return Entry(cell.id, MISSING, None, task, state, "another process is writing down Slurm's verdict")
        if console:
            console.print(f"[red]{written.status:>11}[/] {shown(cell.id)}  "
                          f"{shown(written.error['message'])}", highlight=False)
        return Entry(cell.id, FINISHED, written.status, task, state)
    why = missing_why(task, info)
    keep = f"; the stored {result.status} result stands" if result else ""
    note = why + keep + "; it runs again on the next submission"
    return Entry(cell.id, FINISHED if result else MISSING, result.status if result else None, task, state,
                 note)


def missing_why(task: str | None, info: dict | None) -> str:
    """Why a submitted cell has no result, in Slurm's words where Slurm has any: a task cancelled
    while it waited in the queue never started (no node, no time), which is not a lost record."""
    state = info["state"] if info else None
    if task is None:
        return "its array was never sent to Slurm (the submission was interrupted) or its job id was lost"
    if state is None:
        return f"Slurm has no record of task {task} (accounting off, or the job was purged)"
    if state == "CANCELLED" and (info.get("node") or "None assigned") == "None assigned" \
            and (info.get("elapsed") or "0:00").strip("0:") == "":
        return f"cancelled while pending (task {task}): it never started"
    return f"{state} (task {task}) without a result"


def show(entries: list[Entry], console: Console, run_dir: Path) -> None:
    where = Counter(e.where for e in entries)
    statuses = Counter(e.status for e in entries if e.where == FINISHED)
    console.print(f"{run_dir}: {len(entries)} cells")
    finished = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
    console.print(f"  finished {where[FINISHED]}" + (f" ({finished})" if finished else ""))
    for kind in (LIVE, QUEUED):
        console.print(f"  {kind} {where[kind]}")
        for e in [e for e in entries if e.where == kind][:20]:
            console.print(f"    {shown(e.cell)}  task {e.task} {e.state}", highlight=False)
    console.print(f"  missing {where[MISSING]} (no result and nothing queued: the next submission runs them)")
    for e in [e for e in entries if e.drifted]:
        console.print(f"  [red]NOT as expected[/]: {shown(e.cell)} is {e.status}", highlight=False)
    notes = [e for e in entries if e.note]
    if notes:
        console.print("notes:")
        for e in notes[:50]:
            console.print(f"  {shown(e.cell)}: {shown(e.note)}", highlight=False)
        if len(notes) > 50:
            console.print(f"  ... and {len(notes) - 50} more")


def status(matrix: Matrix, results_root: Path, console: Console, wait: float | None = None,
           poll: float = DEFAULT_POLL) -> list[Entry]:
    """The board; with `wait`, watch until nothing is queued or running (or `wait` seconds pass)."""
    store = ResultStore(results_root.resolve(), matrix.name)
    entries: list[Entry] = []

    def look() -> bool:
        entries[:] = board(matrix, store, console)
        for note in store.take_notes():
            console.print(f"[yellow]quarantined[/] {shown(note)}", highlight=False)
        return wait is None or not any(e.where in (QUEUED, LIVE) for e in entries)

    watch(look, wait or 0, poll)
    if not any(e.where in (QUEUED, LIVE) for e in entries):
        rejudge(matrix, store, entries)
    show(entries, console, store.run_dir)
    return entries


def rejudge(matrix: Matrix, store: ResultStore, entries: list[Entry]) -> None:
    """Judge every finished result again now that all of them are in (see the module's note)."""
    life = Lifecycle(store, "", str(matrix.path), matrix.sha256)
    by_id = {e.cell: e for e in entries}
    for cell in matrix.cells:
        entry = by_id.get(cell.id)
        result = store.existing(cell) if entry and entry.where == FINISHED else None
        if result is not None:
            entry.drifted = (life.rejudge(cell, result).expectation or {}).get("met") is False
