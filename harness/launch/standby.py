"""The next cell on a GPU set, prepared while the current one trains there.

A warm GPU cell forks from its launcher in milliseconds, but then still holds
its GPUs idle for a second or more before its first training step: the GPU's
first touch in the process, the data, the model. None of that needs the GPUs
to itself. So on a warm run, when a GPU cell finds no free GPUs, it may
*stand by* on a running cell's GPU set (one follower per set, and one behind it): its process
starts at once and prepares beside the running cell (where its compiled programs are cached, its
train and test steps too: `programs`, workloads/ahead.py), then waits (the
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

import os
import threading
import time
from pathlib import Path

from harness.workloads.protocol import STANDBY_FILE, STANDBY_PROGRAMS

# ``off`` in the harness's environment: no cell prepares beside another on a warm run (each waits
# for free GPUs, as on a fresh run). For an A/B of what standing by costs the cell it prepares
# beside (``bench/warm.py --standby off``), and for a user who wants none of it.
SWITCH = "HARNESS_STANDBY"


def allowed() -> bool:
    """Whether a warm run may stand cells by (`SWITCH` is not ``off``), read when a run asks."""
    return os.environ.get(SWITCH, "on").strip().lower() != "off"


class Standby:
    """One follower's side of a hand-over: `go` is called by whoever holds its GPUs when they
    end; `went` is set then. Thread-safe; `go` and `withdraw` decide between them, once, whether
    the follower ever held the GPUs."""

    def __init__(self) -> None:
        self.went = threading.Event()
        self.went_at: float | None = None    # host clock (time.time()) of the hand-over
        self._file: Path | None = None
        self._withdrawn = False
        self._on_go: list = []               # called at the hand-over (the engine ends its `beside` entry)
        self._lock = threading.Lock()
        self.programs = False                # it may prepare its programs ahead (workloads/ahead.py)

    def attach(self, folder: Path) -> None:
        """The follower's cell folder exists, its process not yet: it will wait while the standby
        file is there (protocol.STANDBY_FILE; not made if the GPUs were handed over already).
        The hand-over removes the file, so a copied or replayed folder never waits. With
        `programs`, the file says the cell may trace and compile its steps while it waits."""
        with self._lock:
            self._file = folder / STANDBY_FILE
            if not self.went.is_set():
                self._file.write_text(STANDBY_PROGRAMS + "\n" if self.programs else "")

    def go(self) -> bool:
        """Hand the GPUs over. False if the follower already withdrew (it never takes them)."""
        with self._lock:
            if self._withdrawn:
                return False
            self.went_at = time.time()
            if self._file is not None:
                self._file.unlink(missing_ok=True)
            self.went.set()
            for call in self._on_go:
                call()
            return True

    def when_went(self, call) -> None:
        """Call `call` at the hand-over, or now if it has come."""
        with self._lock:
            if not self.went.is_set():
                self._on_go.append(call)
                return
        call()

    def withdraw(self) -> bool:
        """The follower ended. True if it never held the GPUs (the hand-over had not come)."""
        with self._lock:
            if self.went.is_set():
                return False
            self._withdrawn = True
            return True


class Relay:
    """The GPU sets held by running cells, their followers, and the hand-over when a cell ends.

    Every slot a cell takes from the pool is `held` here, and goes back to the pool only from
    `hand_over`. A follower needs a running set of at least its GPU count: a set of the same
    count first (it passes whole), else a larger one, cut into pieces of the follower's count
    (`pieces`: the GPUs in order, each with its share of the set's cores; what is left over is
    one more piece). All followers of one set have one count, one per piece. At the hand-over
    the set is cut (`Pool.divided`): each piece whose follower is ready passes to it, the others
    go back to the pool -- so the one-GPU cells that come after the two-GPU ones prepare too.

    Where every piece has its follower, one more cell of a piece's count may prepare *behind*
    a follower (`_behind`): it follows that follower once the follower holds the piece, and
    takes its place if it ends before its turn. A cell that ends within a second of its
    hand-over (one that fails on its first batch) then hands on to a prepared cell, not to a
    cold start on idle GPUs. Never deeper: a third cell would only wait longer, holding memory.

    A follower that finds neither may *join* a running smaller set with no follower (the longest
    held) and free GPUs that make up its count (`_join`): it prepares on both, the free ones
    idle meanwhile, and at that set's hand-over the two run as one. So two two-GPU cells can
    run side by side where one-GPU cells had split the GPUs, instead of one after another on
    one pair while the others idle at the run's end."""

    def __init__(self, pool) -> None:
        self._pool = pool                    # resources.Pool: give_back, divided
        self._held: list = []                # slots held by running cells, oldest first
        self._next: dict[object, list[tuple[object, Standby]]] = {}  # slot -> [(piece, follower)]
        self._behind: dict[Standby, tuple[object, Standby]] = {}    # follower -> (its piece, the next)
        self._joined: dict[Standby, object] = {}                     # follower -> the free GPUs it joined
        self._lock = threading.Lock()

    def held(self, slot) -> None:
        with self._lock:
            self._held.append(slot)

    def follow(self, gpus: int, keep: int = 0) -> tuple[object, Standby] | None:
        """A free piece of `gpus` GPUs of a running set (one of that count first, then the
        longest held: its cell is likely to end first), with a new follower registered on it;
        else a running smaller set joined with free GPUs (`_join`); else a place behind a follower
        of a piece of that count; None if there is none. `keep`: the GPU count of a cell that
        found no place: while it waits, a cell of fewer GPUs only goes behind a follower, and
        leaves the running sets free of followers for it to follow or join."""
        with self._lock:
            for slot in sorted(self._held, key=lambda s: len(s.gpus) != gpus) if keep <= gpus else ():
                taken = self._next.get(slot, [])
                if len(slot.gpus) < gpus or (taken and len(taken[0][0].gpus) != gpus):
                    continue
                free = [p for p in pieces(slot, gpus)[0] if p not in {q for q, _ in taken}]
                if free:
                    standby = Standby()
                    self._next.setdefault(slot, []).append((free[0], standby))
                    return free[0], standby
            joined = self._join(gpus) if keep <= gpus else None
            if joined is not None:
                return joined
            for piece, first in (f for followers in self._next.values() for f in followers):
                if len(piece.gpus) == gpus and first not in self._behind:
                    standby = Standby()
                    self._behind[first] = (piece, standby)
                    return piece, standby
        return None

    def _join(self, gpus: int) -> tuple[object, Standby] | None:
        """A follower of `gpus` GPUs made of the longest-held running set of fewer GPUs that has
        no follower, and free GPUs from the pool to make up the count (held from now, as one
        more running slot); None if there is no such set or not enough free GPUs."""
        for slot in self._held:
            if not slot.gpus or len(slot.gpus) >= gpus or slot in self._next:
                continue
            part = self._pool.take_gpus(gpus - len(slot.gpus))
            if part is None:
                return None
            piece = slot.joined(part)
            standby = Standby()
            self._next[slot] = [(piece, standby)]
            self._joined[standby] = part
            return piece, standby
        return None

    def drop(self, piece, standby: Standby) -> None:
        """A follower that never held its piece is gone: the one behind it takes its place, else
        the piece may take another."""
        with self._lock:
            behind = self._behind.pop(standby, None)
            part = self._joined.pop(standby, None)
            for slot, followers in list(self._next.items()):
                if (piece, standby) in followers:
                    followers.remove((piece, standby))
                    if behind is not None:
                        followers.append(behind)
                        if part is not None:
                            self._joined[behind[1]] = part
                    elif part is not None:  # the free GPUs it joined go back
                        self._pool.give_back(part)
                    if not followers:
                        del self._next[slot]
                    return
            for first, (_, second) in list(self._behind.items()):
                if second is standby:  # one behind a follower: only its place is freed
                    del self._behind[first]

    def hand_over(self, slot) -> None:
        """The cell on `slot` ended: each piece with a follower ready passes to it (a joined
        set with its free GPUs, as one slot), the rest of the set goes back to the pool."""
        back = []
        with self._lock:
            followers = self._next.pop(slot, [])
            self._held.remove(slot)
            went, joined = set(), False
            for piece, standby in followers:
                behind = self._behind.pop(standby, None)
                part = self._joined.pop(standby, None)
                if standby.go():
                    went.add(piece)
                    if behind is not None:  # now it follows the follower that holds the piece
                        self._next[piece] = [behind]
                elif behind is not None and behind[1].go():  # withdrawn, not yet dropped: the next goes
                    went.add(piece)
                elif part is not None:
                    back.append(part)
                if part is not None and piece in went:
                    joined = True
                    self._pool.divided(0)  # the set and the free GPUs it joined: one running slot now
            if went == {slot} or joined:
                self._held.extend(went)  # held afresh, by the follower
            elif not went:
                back.append(slot)
            else:
                cut, rest = pieces(slot, len(next(iter(went)).gpus))
                parts = cut + ([rest] if rest is not None else [])
                self._pool.divided(len(parts))
                self._held.extend(p for p in parts if p in went)
                back.extend(p for p in parts if p not in went)
        for part in back:
            self._pool.give_back(part)

    def ended(self, slot, standby: Standby | None) -> None:
        """A cell on `slot` ended, however. A follower that never held it only withdraws."""
        if standby is not None and standby.withdraw():
            self.drop(slot, standby)
        else:
            self.hand_over(slot)


def pieces(slot, gpus: int) -> tuple[list, object | None]:
    """`slot` cut into pieces of `gpus` GPUs, in order, each with its share of the cores, and
    what is left over (None when nothing is). The whole slot when it has `gpus` GPUs; no pieces
    when its cores are fewer than its pieces."""
    n = len(slot.gpus) // gpus
    if n == 1 and len(slot.gpus) == gpus:
        return [slot], None
    per = len(slot.cpus) * gpus // len(slot.gpus)
    if slot.cpus and not per:  # fewer cores than pieces: not cut (a piece is never left without a core)
        return [], None
    left = slot.gpus[n * gpus:]
    cores = [slot.cpus[i * per:(i + 1) * per] for i in range(n)]
    if not left:  # the cores that do not divide evenly stay with the last piece, never lost
        cores[-1] = slot.cpus[(n - 1) * per:]
    cut = [type(slot)(slot.gpus[i * gpus:(i + 1) * gpus], cores[i]) for i in range(n)]
    return cut, (type(slot)(left, slot.cpus[n * per:]) if left else None)
