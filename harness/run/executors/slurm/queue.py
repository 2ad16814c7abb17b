"""Asking Slurm about jobs: the queue (squeue) and accounting (sacct), merged, for every job in one
call each; and the watcher that waits for them, backing off between polls as submitit's
``InfoWatcher`` does (0, 2, 4, 8 s, then every `poll` seconds) instead of asking every 2 s.

Reading the queue writes nothing: what Slurm's answers mean for a cell is the board's
(`board.py`) to decide, and a result is only ever written by the lifecycle.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

from harness.errors import UserError

# States in which a task may still produce a result.
ACTIVE = frozenset({"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING", "CONFIGURING",
                    "STAGE_OUT", "SIGNALING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "STOPPED"})
RUNNING = ("RUNNING", "COMPLETING", "CONFIGURING")
DEFAULT_POLL = 10.0  # seconds between polls once the first quick ones are past


def run_slurm(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
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
    accounting's final word where it has one, else the queue's (see `merge`)."""
    if not job_ids:
        return {}
    queue = run_slurm("squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%N|%M|%r")
    acct = run_slurm("sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,NodeList,Elapsed,ExitCode")
    return merge(queue.stdout, acct.stdout)  # squeue exits 1 once every job has left the queue: that is fine


def merge(queue: str, acct: str) -> dict[str, dict]:
    """squeue's lines (``%i|%T|%N|%M|%r``) and sacct's (``JobID,State,NodeList,Elapsed,ExitCode``) as
    one state per task.

    sacct can lag squeue by a few seconds after a task ends, and squeue forgets finished jobs after
    MinJobAge: each covers the other's gap. A task neither knows is absent from the answer.

    sacct's summary record of an array's unsplit tasks ('12_[0-2]') keeps naming a task after it
    split off and started: cancelling the pending rest marks the summary CANCELLED while task 0
    runs on. So a summary speaks only for the tasks nothing else speaks for (or that the queue
    still calls pending); a task's own record -- the queue's or accounting's -- always wins.
    """
    states: dict[str, dict] = {}
    for line in queue.splitlines():
        key, state, node, elapsed, reason = (line.split("|") + [""] * 5)[:5]
        for k in _expand(key.strip()):
            states[k] = {"state": state, "node": node, "elapsed": elapsed, "reason": reason, "from": "squeue"}
    own, summaries = [], []
    for line in acct.splitlines():
        key, state, node, elapsed, code = (line.split("|") + [""] * 5)[:5]
        record = {"state": state.split(" ")[0],  # 'CANCELLED by 0'
                  "node": node, "elapsed": elapsed, "exit_code": code, "from": "sacct"}
        (summaries if "[" in key else own).append((key.strip(), record))
    summarised: set[str] = set()
    for key, record in summaries:
        for k in _expand(key):
            if k not in states or states[k]["state"] == "PENDING":
                states[k] = dict(record)
                summarised.add(k)
    for key, record in own:
        if record["state"] not in ACTIVE or key not in states or key in summarised:
            states[key] = record
    for key in [k for k in states if "_" not in k]:  # the array's record for the tasks it never split off
        base = states.pop(key)                        # (e.g. pending tasks cancelled together): each of them
        states[f"{key}_*"] = base
    return states


def task_state(states: dict[str, dict], task: str | None) -> dict | None:
    if not task:
        return None
    return states.get(task) or states.get(task.split("_")[0] + "_*")




def delays(poll: float = DEFAULT_POLL) -> Iterator[float]:
    """Seconds to sleep between polls: asked at 0, 2, 4 and 8 s, then every `poll` seconds.
    A short job is seen finished within seconds; a long one costs the scheduler one call per `poll`."""
    yield from (2.0, 2.0, 4.0)
    while True:
        yield max(poll, 0.1)


def watch(look: Callable[[], bool], wait: float, poll: float = DEFAULT_POLL,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Call `look` (one poll; True when there is nothing left to wait for) until it says so or
    `wait` seconds have passed; the pauses between polls back off (`delays`)."""
    deadline = time.monotonic() + wait
    for pause in delays(poll):
        if look():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sleep(min(pause, left))
