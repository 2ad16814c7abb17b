"""The next cell on a GPU set, prepared while the current one trains there.

A warm GPU cell forks from its launcher in milliseconds, but then still holds
its GPUs idle for a second or more before its first training step: the GPU's
first touch in the process, the data, the model. None of that needs the GPUs
to itself. So on a warm run, when a GPU cell finds no free GPUs, it may
*stand by* on a running cell's GPU set (one follower per set): its process
starts at once and prepares beside the running cell, then waits (the
workload's ``standby`` mark) until the running cell's process has ended, and
only then trains. The GPUs pass from one cell to the next without going back
to the pool (`Relay`), so nothing else can take them in between.

What it does not bend, and what each result says:

- **Only stacks that share a GPU's memory** (``allocation.shares_memory``): a
  process that reserves most of a GPU at its first allocation would starve the
  cell it prepares beside.
- **Timing.** A follower's wall limit and progress limit start when it is
  given its GPUs (``supervise.watch`` is handed `went`), and its result keeps
  its whole process life in ``timing.total_seconds`` beside
  ``timing.standby`` (seconds to its standby mark, seconds waited there) and
  ``timing.held_seconds``, the time it held its GPUs. Training starts only
  after the hand-over, so no training step ever shares a GPU.
- **Beside.** The preparation runs on the running cell's cores; the running
  cell's result lists it (``warmth.beside``, kind ``next cell preparing``).
- A follower that fails while preparing never held the GPUs: it withdraws, and
  the running cell gives them back to the pool as usual.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from .workloads.protocol import STANDBY_FILE


class Standby:
    """One follower's side of a hand-over: `go` is called by whoever holds its GPUs when they
    end; `went` is set then. Thread-safe; `go` and `withdraw` decide between them, once, whether
    the follower ever held the GPUs."""

    def __init__(self) -> None:
        self.went = threading.Event()
        self.went_at: float | None = None    # host clock (time.time()) of the hand-over
        self._file: Path | None = None
        self._withdrawn = False
        self.on_go: list = []                # called at the hand-over (the engine ends its `beside` entry)
        self._lock = threading.Lock()

    def attach(self, folder: Path) -> None:
        """The follower's cell folder exists, its process not yet: it will wait while the standby
        file is there (protocol.STANDBY_FILE; not made if the GPUs were handed over already).
        The hand-over removes the file, so a copied or replayed folder never waits."""
        with self._lock:
            self._file = folder / STANDBY_FILE
            if not self.went.is_set():
                self._file.touch()

    def go(self) -> bool:
        """Hand the GPUs over. False if the follower already withdrew (it never takes them)."""
        with self._lock:
            if self._withdrawn:
                return False
            self.went_at = time.time()
            if self._file is not None:
                self._file.unlink(missing_ok=True)
            self.went.set()
            for call in self.on_go:
                call()
            return True

    def withdraw(self) -> bool:
        """The follower ended. True if it never held the GPUs (the hand-over had not come)."""
        with self._lock:
            if self.went.is_set():
                return False
            self._withdrawn = True
            return True


class Relay:
    """The GPU sets held by running cells, which of them has a follower, and the hand-over when
    a cell ends. Every slot a cell takes from the pool is `held` here; it goes back to the pool
    only from `hand_over`, when no follower is waiting for it."""

    def __init__(self, give_back) -> None:
        self._give_back = give_back          # Pool.give_back
        self._held: list = []                # slots held by running cells, oldest first
        self._next: dict[object, Standby] = {}
        self._lock = threading.Lock()

    def held(self, slot) -> None:
        with self._lock:
            self._held.append(slot)

    def follow(self, gpus: int) -> tuple[object, Standby] | None:
        """A running GPU set of `gpus` GPUs with no follower yet (the longest held: its cell is
        likely to end first), with a new follower registered on it; None if there is none."""
        with self._lock:
            slot = next((s for s in self._held if len(s.gpus) == gpus and s not in self._next), None)
            if slot is None:
                return None
            standby = self._next[slot] = Standby()
            return slot, standby

    def drop(self, slot, standby: Standby) -> None:
        """A follower that never held `slot` is gone: the slot may take another."""
        with self._lock:
            if self._next.get(slot) is standby:
                del self._next[slot]

    def hand_over(self, slot) -> None:
        """The cell on `slot` ended: its follower gets the slot, else the pool does."""
        with self._lock:
            standby = self._next.pop(slot, None)
            self._held.remove(slot)
            if standby is not None and standby.go():
                self._held.append(slot)  # held afresh, by the follower
                return
        self._give_back(slot)

    def ended(self, slot, standby: Standby | None) -> None:
        """A cell on `slot` ended, however. A follower that never held it only withdraws."""
        if standby is not None and standby.withdraw():
            self.drop(slot, standby)
        else:
            self.hand_over(slot)
