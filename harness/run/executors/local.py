"""The local executor: run a host's cells side by side within its resources.

Where and when cells run, never what they run in (that is the engine's
business). Environments are prepared one at a time by a background thread,
in the order the cells need them, so the next environment builds while the
cells of another run. Every cell whose environment is ready and whose
resources are free starts at once, each in a worker thread that supervises
one cell process; the biggest GPU cells are started first and smaller ones
fill the gaps (largest-first packing keeps the makespan short), and among
cells of one size the longest start first, by what an earlier run measured
(``durations.py``; cells never measured first of all, then the matrix's order).

On a warm run the schedule also decides the warm launchers (``launcher.Plan``):
one starts only for a group of two or more cells still to run, its import
takes the slot of the first of them, and the group's other CPU cells are held
back (their slots go to other cells) until it has imported. Where a launcher
holds its slot (a launcher container's cores), its group's cells are given that
slot when it is free, and a free slot goes first to cells at home there.
A GPU cell that finds no free GPUs may stand by on a running cell's GPU set
where the engine allows it (``standby.Relay``): it prepares beside that cell
and is handed the set when that cell ends.

Ctrl-C stops everything: running cells are killed and leave no result
(``supervise.Cancelled``), finished ones stay, and the next run resumes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from harness.cells import Cell, Environment
from harness.host.resources import Pool, Slot, gpus_needed
from harness.launch.launcher import Plan
from harness.launch.standby import Relay, Standby
from harness.results.store import Claim, ResultStore


@dataclass
class Hooks:
    """What the runner supplies: how to prepare an environment (returns a
    prepared environment, or raises to make it unavailable), run a cell in a
    slot (standing by there, with a `Standby`, while another cell ends; calling
    `release` when it is done with the slot, before its process has exited), record
    a cell that cannot run (unavailable / unsupported), and whether a cell may
    stand by on another's GPUs (standby.py)."""

    prepare: Callable[[Environment], object]
    # the last argument: `release`, for a GPU cell; None for a CPU cell (its cores go back at its exit)
    run_cell: Callable[[object, Cell, Slot, Claim, threading.Event, Standby | None, Callable[[], None] | None], dict]
    not_run: Callable[[Cell, Claim, BaseException | str], dict]
    finished: Callable[[dict, Slot | None], None]
    waiting: Callable[[str], None]
    stands_by: Callable[[Cell], bool] = lambda cell: False
    # the seconds a cell took when it last ran (durations.py), None where not known: the order only
    expected: Callable[[Cell], float | None] = lambda cell: None


class _Preparer(threading.Thread):
    """Prepares environments in order; cells read the outcome from `state`."""

    def __init__(self, envs: list[Environment], prepare, wake: queue.Queue):
        super().__init__(daemon=True, name="prepare")
        self.envs, self.prepare, self.wake = envs, prepare, wake
        self.state: dict[str, tuple[str, object]] = {}  # env name -> ("ready"|"failed", value)
        self.start()

    def run(self) -> None:
        for env in self.envs:
            try:
                self.state[env.name] = ("ready", self.prepare(env))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread as the environment's fate
                self.state[env.name] = ("failed", exc)
            self.wake.put(("prepared", env.name))


def execute(cells: list[Cell], store: ResultStore, pool: Pool, hooks: Hooks, plan: Plan | None = None) -> None:
    """Run `cells` (already known to need running) with the pool's resources; `plan`: the warm
    launchers' schedule (launcher.Plan) on a warm run of a process engine, else None."""
    _Schedule(cells, store, pool, hooks, plan).run()


class _Schedule:
    """One call of `execute`: the cells still to start, those another process has claimed, the
    cell threads running. These lists and counts are the main thread's alone: the cell threads
    and the preparer post to `wake` (a cell thread also hands its slot on through the relay),
    which the loop reads when it can start nothing."""

    def __init__(self, cells: list[Cell], store: ResultStore, pool: Pool, hooks: Hooks, plan: Plan | None):
        self.store, self.pool, self.hooks, self.plan = store, pool, hooks, plan
        self.wake: queue.Queue = queue.Queue()
        if plan is not None:
            plan.on_settle = lambda: self.wake.put(("settled", None))
        envs = list({c.environment.name: c.environment for c in cells}.values())
        self.preparer = _Preparer(envs, hooks.prepare, self.wake)
        self.relay = Relay(pool)
        order = {id(c): i for i, c in enumerate(cells)}
        self.pending = sorted(cells, key=lambda c: _first(c, hooks.expected(c), order[id(c)]))
        self.elsewhere: list[Cell] = []   # claimed by another live process; checked again at the end
        self.workers: list[threading.Thread] = []
        self.cancel = threading.Event()
        self.running = 0
        self.waiting = 0  # in one pass: the most GPUs a cell found no place for (Relay.follow's `keep`)
        self.deferred = False  # in one pass: a cell waited for its launcher's busy slot

    def run(self) -> None:
        """Start what fits, else wait for news, until no cell is left; any exception (Ctrl-C
        too) stops the running cells before it goes on up."""
        try:
            while self.pending or self.running or self.elsewhere:
                started_any = self._start_what_fits()
                if not self.pending and not self.running and self.elsewhere:
                    self._wait_for_elsewhere()
                    continue
                if started_any or not (self.pending or self.running or self.elsewhere):
                    continue  # (the loop's own test ends it when nothing is left)
                self._reap()
        except BaseException:
            self._stop()
            raise

    def _start_what_fits(self) -> bool:
        """One pass over the waiting cells, in queue order: start each whose environment is
        ready and whose resources are free; whether any started."""
        started_any = False
        self.waiting = 0
        self.deferred = False
        for lenient in (False, True):  # launcher.Plan's home slots: a busy home defers a cell one pass
            if lenient and not self.deferred:
                break
            for cell in list(self.pending):
                started_any = self._consider(cell, lenient) or started_any
        return started_any

    def _consider(self, cell: Cell, lenient: bool) -> bool:
        """Start `cell` if it can start now, or record it where it can never run; whether it started."""
        fate = self.preparer.state.get(cell.environment.name)
        if fate is None:
            return False
        kind, value = fate
        why = value if kind == "failed" else self.pool.impossible(cell)
        if why:
            self._not_run(cell, why)
            return False
        if self.plan is not None and self.plan.holding(cell):
            return False  # its launcher is importing: the slot goes to another cell meanwhile
        homes = self.plan.homes(cell) if self.plan is not None else []
        if homes and not lenient and not any(self.pool.free(h) for h in homes):
            self.deferred = True  # its launcher's slot is busy: free slots go to others first
            return False
        slot, standby = self._place(cell, homes)
        if slot is None:
            return False
        return self._start(cell, value, slot, standby)

    def _place(self, cell: Cell, homes: list) -> tuple[Slot | None, Standby | None]:
        """A free slot for the cell, else (a GPU cell that may) a place standing by on a running set."""
        slot, standby = self.pool.take(cell, prefer=homes), None
        if slot is not None:
            self.relay.held(slot)
        elif gpus_needed(cell) and self.hooks.stands_by(cell):
            slot, standby = self.relay.follow(gpus_needed(cell), keep=self.waiting) or (None, None)
            if slot is None:  # it waits for a place: smaller cells leave it the sets to join
                self.waiting = max(self.waiting, gpus_needed(cell))
        return slot, standby

    def _not_run(self, cell: Cell, why: BaseException | str) -> None:
        """A cell that cannot run here (its environment failed, or no slot could ever hold it)."""
        claim = self.store.claim(cell.id)
        self.pending.remove(cell)
        if claim is None:
            self.elsewhere.append(cell)
            return
        if self.plan is not None:
            self.plan.begin(cell, runs=False)
        try:
            self.hooks.finished(self.hooks.not_run(cell, claim, why), None)
        finally:
            claim.release()

    def _start(self, cell: Cell, prepared, slot: Slot, standby: Standby | None) -> bool:
        """Claim the cell and start its thread in `slot`; False (the slot given back) when
        another process has claimed it."""
        claim = self.store.claim(cell.id)
        if claim is None:
            self.relay.ended(slot, standby)
            self.pending.remove(cell)
            self.elsewhere.append(cell)
            return False
        self.pending.remove(cell)
        imports = self.plan.begin(cell) if self.plan is not None else False
        thread = threading.Thread(target=self._work, args=(prepared, cell, slot, claim, imports, standby),
                                  daemon=True, name=f"cell {cell.id}")
        thread.start()
        self.workers.append(thread)
        self.running += 1
        return True

    def _work(self, prepared, cell: Cell, slot: Slot, claim: Claim, imports: bool, standby: Standby | None) -> None:
        """A cell's thread: run it, post how it ended, and let its slot and its launcher's group go."""
        released = []

        def release() -> None:  # to its follower, else back to the pool: once, at its end event or its exit
            if not released:
                released.append(True)
                self.relay.ended(slot, standby)

        try:
            # a GPU set passes on at the cell's end event, during its teardown; cores are given back
            # at its exit (a next cell's start would share them with the teardown)
            result = self.hooks.run_cell(prepared, cell, slot, claim, self.cancel, standby,
                                         release if slot.gpus else None)
            self.wake.put(("done", (result, slot)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            self.wake.put(("failed", (exc, slot)))
        finally:
            release()
            if imports:  # however the cell ended (before its launch, even): release its group
                self.plan.settle(cell)

    def _wait_for_elsewhere(self) -> None:
        """Every cell left is being run by another process: wait for it, then take what it left."""
        self.hooks.waiting(f"{len(self.elsewhere)} cell(s) are being run by another process; waiting for them")
        for cell in list(self.elsewhere):
            claim = self.store.claim(cell.id)
            if claim is None:
                continue
            claim.release()
            self.elsewhere.remove(cell)
            if self.store.existing(cell) is None:
                self.pending.append(cell)  # the other process died without a result
        if self.elsewhere and not self.pending:
            _drain(self.wake, timeout=1.0)

    def _reap(self) -> None:
        """Wait for the next news: a cell's end (recorded, or its error raised here) or a launcher settled."""
        kind, payload = self.wake.get()
        if kind == "settled":
            return  # a launcher has imported: the cells held back for it may start
        if kind == "done":
            self.running -= 1
            self.hooks.finished(*payload)
        elif kind == "failed":
            self.running -= 1
            raise payload[0]

    def _stop(self) -> None:
        """The run is interrupted or failed: running cells are cancelled, and waited for."""
        self.cancel.set()
        for thread in self.workers:
            thread.join(timeout=60)


def _first(cell: Cell, expected: float | None, position: int) -> tuple:
    """Where a cell stands in the queue: the most GPUs first; among one size a cell never measured
    (it may be the longest), then the longest measured (longest-processing-time-first: the run
    does not end on a long cell started last); the matrix's order between equals."""
    return (-gpus_needed(cell), expected is not None, -(expected or 0.0), position)


def _drain(wake: queue.Queue, timeout: float) -> None:
    try:
        wake.get(timeout=timeout)
    except queue.Empty:
        pass
