"""What a Slurm verdict means for a cell, and the result it becomes.

When a task leaves no result, Slurm's verdict may still say something about
the cell: it ended the task at its time limit (`timeout`) or killed it for
memory (`oom`). Those two become results -- written, like every result, by
the lifecycle (`Lifecycle.killed`), so the control cell's expectation is
judged and the file is the same shape as a local run's. Anything else
(cancelled, node failure, preemption) says nothing about the cell.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import status
from harness.cells import Cell
from harness.results.evidence import Evidence
from harness.results.result import Result
from harness.results.store import PARTIAL, ResultStore
from harness.run.executors.slurm.submissions import Submission
from harness.run.lifecycle import Lifecycle
from harness.status import outcome

# What Slurm's verdict says about the cell itself, when the task left no result. Only these two map onto
# the status vocabulary; CANCELLED, NODE_FAIL, PREEMPTED, FAILED, BOOT_FAIL, DEADLINE say nothing about
# the cell, which therefore stays without a result and runs again on the next submission.
VERDICTS = {
    "TIMEOUT": (status.TIMEOUT, "Slurm ended the task at its time limit"),
    "OUT_OF_MEMORY": (status.OOM, "Slurm killed the task for memory"),
}
# Without cgroups (jobacct_gather's OverMemoryKill) Slurm kills a task over --mem and calls it FAILED;
# its own line in the task's log is then the evidence of a memory kill.
MEMORY_KILL_LINE = "Exceeded job memory limit"


def killed_for_memory(sub: Submission, task: str) -> bool:
    log = sub.path / "logs" / f"{task}.out"
    try:
        return MEMORY_KILL_LINE in log.read_text(errors="replace")[-20000:]
    except OSError:
        return False


def record_verdict(matrix_sha256: str, store: ResultStore, cell: Cell, sub: Submission, task: str,
                   info: dict) -> Result | None:
    """Write the result a task could not write: Slurm ended it (time limit, memory). What the cell had
    recorded before the kill (events, logs) is taken from its half-written folder, which is then removed:
    its owner is dead, Slurm says so. The result is written by the lifecycle, as every result is, while
    this process holds the cell's claim; None when another process holds it."""
    word, what = VERDICTS[info["state"]]
    final = store.final_dir(cell)
    partials = sorted((p for p in final.parent.glob(f"{final.name}{PARTIAL}*") if p.is_dir()),
                      key=lambda p: p.stat().st_mtime)
    log = sub.path / "logs" / f"{task}.out"

    def copy_log(work: Path) -> None:
        if log.exists():
            shutil.copy2(log, work / "slurm.log")

    def verdict_of(evidence: Evidence) -> outcome.Verdict:
        last = evidence.last_event
        message = (f"{what} (task {task}, {info['state']} after {info.get('elapsed') or '?'} on "
                   f"{info.get('node') or '?'}); last event: {(last or {}).get('event', 'nothing')}")
        if info.get("reported"):
            message += f"; sacct says {info['reported']}, the task's log says '{MEMORY_KILL_LINE}'"
        error = {"kind": word, "type": None, "message": message,
                 "signature": outcome.signature(word, None, f"slurm {info['state']}"), "exit_code": None,
                 "signal": None, "last_event": last, "slurm_state": info["state"]}
        return outcome.Verdict(word, error=error)

    provenance = {"slurm": {"task": task, "state": info["state"], "node": info.get("node"),
                            "elapsed": info.get("elapsed"), "submission": sub.path.name,
                            "sacct_state": info.get("reported") or info["state"]}}
    claim = store.claim(cell.id)
    if claim is None:
        return None  # another live process (a second `status`) is writing it down
    try:
        life = Lifecycle(store, sub.engine, sub.matrix_label, matrix_sha256)
        result = life.killed(cell, verdict_of, evidence_from=partials[-1] if partials else None, copy=copy_log,
                             provenance=provenance, started=sub.meta["submitted"])
        for partial in partials:
            shutil.rmtree(partial, ignore_errors=True)
    finally:
        claim.release()
    return result

