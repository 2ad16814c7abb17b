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

On a warm run the schedule also decides the warm launchers (``warmplan.Plan``):
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
from harness.launch.standby import Relay, Standby
from harness.launch.warmplan import Plan
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
    launchers' schedule (warmplan.Plan) on a warm run of a process engine, else None."""
    wake: queue.Queue = queue.Queue()
    if plan is not None:
        plan.on_settle = lambda: wake.put(("settled", None))
    envs = list({c.environment.name: c.environment for c in cells}.values())
    preparer = _Preparer(envs, hooks.prepare, wake)
    relay = Relay(pool)
    order = {id(c): i for i, c in enumerate(cells)}
    pending = sorted(cells, key=lambda c: _first(c, hooks.expected(c), order[id(c)]))
    elsewhere: list[Cell] = []   # claimed by another live process; checked again at the end
    workers: list[threading.Thread] = []
    cancel = threading.Event()
    running = 0

    def work(prepared, cell: Cell, slot: Slot, claim: Claim, imports: bool, standby: Standby | None) -> None:
        released = []

        def release() -> None:  # to its follower, else back to the pool: once, at its end event or its exit
            if not released:
                released.append(True)
                relay.ended(slot, standby)

        try:
            # a GPU set passes on at the cell's end event, during its teardown; cores are given back
            # at its exit (a next cell's start would share them with the teardown)
            result = hooks.run_cell(prepared, cell, slot, claim, cancel, standby, release if slot.gpus else None)
            wake.put(("done", (result, slot)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            wake.put(("failed", (exc, slot)))
        finally:
            release()
            if imports:  # however the cell ended (before its launch, even): release its group
                plan.settle(cell)

    try:
        while pending or running or elsewhere:
            started_any = False
            waiting = 0  # the most GPUs a cell of this pass found no place for (Relay.follow's `keep`)
            deferred = False
            for lenient in (False, True):  # warmplan.Plan's home slots: a busy home defers a cell one pass
                if lenient and not deferred:
                    break
                for cell in list(pending):
                    fate = preparer.state.get(cell.environment.name)
                    if fate is None:
                        continue
                    kind, value = fate
                    why = value if kind == "failed" else pool.impossible(cell)
                    if why:
                        claim = store.claim(cell.id)
                        pending.remove(cell)
                        if claim is None:
                            elsewhere.append(cell)
                            continue
                        if plan is not None:
                            plan.begin(cell, runs=False)
                        try:
                            hooks.finished(hooks.not_run(cell, claim, why), None)
                        finally:
                            claim.release()
                        continue
                    if plan is not None and plan.holding(cell):
                        continue  # its launcher is importing: the slot goes to another cell meanwhile
                    homes = plan.homes(cell) if plan is not None else []
                    if homes and not lenient and not any(pool.free(h) for h in homes):
                        deferred = True  # its launcher's slot is busy: free slots go to others first
                        continue
                    slot, standby = pool.take(cell, prefer=homes), None
                    if slot is not None:
                        relay.held(slot)
                    elif gpus_needed(cell) and hooks.stands_by(cell):
                        slot, standby = relay.follow(gpus_needed(cell), keep=waiting) or (None, None)
                        if slot is None:  # it waits for a place: smaller cells leave it the sets to join
                            waiting = max(waiting, gpus_needed(cell))
                    if slot is None:
                        continue
                    claim = store.claim(cell.id)
                    if claim is None:
                        relay.ended(slot, standby)
                        pending.remove(cell)
                        elsewhere.append(cell)
                        continue
                    pending.remove(cell)
                    imports = plan.begin(cell) if plan is not None else False
                    thread = threading.Thread(target=work, args=(value, cell, slot, claim, imports, standby),
                                              daemon=True, name=f"cell {cell.id}")
                    thread.start()
                    workers.append(thread)
                    running += 1
                    started_any = True
            if not pending and not running and elsewhere:
                # every cell left is being run by another process: wait for it, then take what it left
                hooks.waiting(f"{len(elsewhere)} cell(s) are being run by another process; waiting for them")
                for cell in list(elsewhere):
                    claim = store.claim(cell.id)
                    if claim is None:
                        continue
                    claim.release()
                    elsewhere.remove(cell)
                    if store.existing(cell) is None:
                        pending.append(cell)  # the other process died without a result
                if elsewhere and not pending:
                    _drain(wake, timeout=1.0)
                continue
            if started_any or not (pending or running or elsewhere):
                continue  # (the loop's own test ends it when nothing is left)
            kind, payload = wake.get()
            if kind == "settled":
                continue  # a launcher has imported: the cells held back for it may start
            if kind == "done":
                running -= 1
                hooks.finished(*payload)
            elif kind == "failed":
                running -= 1
                raise payload[0]
    except BaseException:
        cancel.set()
        for thread in workers:
            thread.join(timeout=60)
        raise


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
