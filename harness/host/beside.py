"""What of the harness's own ran beside a cell: launcher imports, environment builds, the next
cell preparing on its GPUs (standby.py).

A number taken while the harness itself imported a stack or built a
virtualenv on the same machine is not one taken on a quiet machine, even when
the two never shared a core (they share memory bandwidth, caches and the
disk). The scheduler keeps the harness's own work off a measured cell's cores
(launcher.Plan); this registry says what still ran *at the same time*, so each
result can record it (``warmth.beside``) and a reader can tell the two apart.

One registry per harness process: the activities of a run are the ones its
threads start (a Slurm task is its own process, with its own registry).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

LAUNCHER_IMPORT = "launcher import"
ENVIRONMENT_BUILD = "environment build"
NEXT_CELL = "next cell preparing"


@dataclass
class Activity:
    kind: str                       # LAUNCHER_IMPORT, ENVIRONMENT_BUILD, NEXT_CELL
    name: str                       # the environment it was for (NEXT_CELL: the cell)
    cpus: tuple[int, ...] = ()      # the cores it was pinned to; () = wherever the OS put it
    began: float = 0.0              # host clock (time.time())
    ended: float | None = None      # None while it runs

    def overlap(self, start: float, end: float) -> float:
        """Seconds of [start, end] this activity ran in (an unfinished one runs until now)."""
        stop = self.ended if self.ended is not None else time.time()
        return max(0.0, min(end, stop) - max(start, self.began))


NOTHING = 0.005  # seconds: clocks read a moment apart; less than this overlapping is none

_lock = threading.Lock()
_activities: list[Activity] = []


def begin(kind: str, name: str, cpus=()) -> Activity:
    activity = Activity(kind, name, tuple(sorted(cpus or ())), time.time())
    with _lock:
        _activities.append(activity)
    return activity


def end(activity: Activity) -> None:
    if activity.ended is None:
        activity.ended = time.time()


def drop(activity: Activity) -> None:
    """Forget an activity that turned out to be nothing (an environment that was already built)."""
    with _lock:
        if activity in _activities:
            _activities.remove(activity)


def during(start: float, end_: float, but: str | None = None) -> list[dict]:
    """The harness's own activities that ran while [start, end_] did, each with the seconds of
    the span it covered and its cores: [] on a machine the harness left quiet. `but`: a cell's
    id, whose own preparation (NEXT_CELL) is not beside it."""
    with _lock:
        found = [(a, a.overlap(start, end_)) for a in _activities if not (a.kind == NEXT_CELL and a.name == but)]
    return [{"kind": a.kind, "name": a.name, "cpus": list(a.cpus), "seconds": round(s, 3)}
            for a, s in found if s > NOTHING]
