"""Watching a running cell: wall limit, progress limit, and the hang verdict.

Both engines run a cell as "something that can be polled and killed"; the
rules for giving up on it live here once. Progress means the workload's event
log grew: a cell that trains slowly keeps writing epochs, a deadlocked one
does not, so a hang is told from slowness without guessing a wall time.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RawOutcome:
    """What an engine observed about a finished (or killed) cell process."""

    exit_code: int | None
    signal: str | None = None
    oom_killed: bool = False
    timed_out: str | None = None   # "progress" or "wall"
    seconds: float = 0.0
    detail: dict = field(default_factory=dict)
    went_at: float | None = None   # host clock when a cell that stood by was given its GPUs (standby.py)
    released_at: float | None = None  # host clock when its end event passed its slot on, before its exit


class Cancelled(KeyboardInterrupt):
    """The run was interrupted while this cell ran; the cell leaves no result."""


def waiting_on(proc) -> Callable[[float], None]:
    """A `pause` for `watch` that returns as soon as `proc` (a Popen, or a forked cell as
    launch.WarmChild) ends, so its exit is seen at once rather than at the next poll."""
    def pause(seconds: float) -> None:
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
    return pause


def watch(poll: Callable[[], int | None], kill: Callable[[], None], events: Path,
          wall: float, progress: float, interval: float = 0.25,
          cancel: threading.Event | None = None,
          pause: Callable[[float], None] = time.sleep,
          went: threading.Event | None = None,
          done: Callable[[], None] | None = None) -> tuple[int | None, str | None, float]:
    """Wait for a process; kill it on a hang or over the wall limit.

    Returns (exit status from `poll`, timed-out reason or None, seconds).
    `cancel` set (Ctrl-C reached the harness) kills the process and raises
    Cancelled: an interrupted cell is not a result. `pause` waits between
    polls; an engine that can wait for its process's exit passes that, so
    the exit is seen at once rather than at the next poll. `went`: the process
    stands by until it is set (standby.py); both limits count from then, and the
    seconds returned are still the process's whole life. `done` is called once, when the
    event log's last line is the workload's end event (or at the exit, by the caller).
    """
    start = last_change = born = time.monotonic()
    last_size = -1
    while True:
        code = poll()
        now = time.monotonic()
        if code is not None:
            return code, None, now - born
        if cancel is not None and cancel.is_set():
            kill()
            raise Cancelled()
        size = events.stat().st_size if events.exists() else 0
        if size != last_size and done is not None and _ended(events, size):
            done()
            done = None
        if size != last_size or (went is not None and not went.is_set()):
            last_size, last_change = size, now
        if went is not None and not went.is_set():
            start = now
        reason = None
        if now - start > wall:
            reason = "wall"
        elif now - last_change > progress:
            reason = "progress"
        if reason:
            kill()
            deadline = time.monotonic() + 30
            while poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            return poll(), reason, time.monotonic() - born
        pause(interval)


def _ended(events: Path, size: int) -> bool:
    """Whether the event log's last line is the workload's end event (workloads/run.py)."""
    try:
        with open(events, "rb") as fh:
            fh.seek(max(0, size - 512))
            last = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except OSError:
        return False
    return last.startswith(b'{"event": "end"')
