"""The warm launchers' schedule: which launchers a warm run starts, and when cells wait for one.

The scheduler's side of warm launch (``launch/launcher.py`` is the launchers' own): it sees every cell the
run has still to run, before any has its slot, and counts them by the launcher that could serve
them (``group``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from harness.cells import Cell
from harness.launch.launcher import forks, fresh_because, imports, shares_gpus


def group(cell: Cell) -> tuple:
    """The cells that one launcher can serve, as the scheduler sees them before any cell has its
    slot: the environment, the device kind and count (its compile cache is the count's), what it
    imports. One process launcher serves a GPU group on every GPU set (launch.shares_gpus); a
    container launcher is also keyed by the GPUs the cell is given, known only when it gets them."""
    p = cell.parallelism
    return (cell.environment.name, cell.environment.content_hash(), p.device_kind, p.devices,
            tuple(imports(cell)))


class Plan:
    """Which launchers a warm run starts, and when cells wait for one (the scheduler's side).

    - **Only where it pays.** A launcher starts only for a group (``group``) with at least two
      cells still to run: a single cell forked from a launcher pays the same import a fresh cell
      pays, plus the launcher's. `left` counts the cells not yet handed to a slot.
    - **Its import takes a slot.** A launcher imports in the slot of the first cell that needs
      it, pinned to that slot's cores, and that cell waits for it, then forks (its wait counts
      in its time). So the import is scheduled exactly like a cell: it holds cores no measured
      cell runs on, and it holds them for no longer than the fresh cell it replaces would have
      spent importing the same stack. (On a GPU host the slot is the cell's GPUs with their
      share of cores; the GPUs idle for the import as they would for a fresh cell's.)
    - **The rest wait, off the cores.** While a CPU group's launcher imports, the scheduler
      holds its other cells back (`holding`) and gives free slots to other cells. Waiting is
      never the dearer choice: the launcher started before any of them could start fresh, so
      what is left of its import is shorter than a whole fresh import, and a held-back cell
      holds no slot while it waits. (Starting fresh beside it would also put a second import of
      the same stack on the machine.) A GPU group is not held back: a cell given other GPUs
      while its group's launcher imports waits in its slot for that same import (what is left of
      it, never more than its own fresh import), and forks from it onto its own GPUs.
    - **Ahead, on GPUs.** When a GPU cell forks, the launchers of its environment's other GPU
      groups with two or more cells to come start at once (`ahead`), unpinned, while it trains:
      an import touches no GPU, a GPU host's cores outnumber its cells, and the first cell of
      each such group then forks at once instead of holding its GPUs idle through an import. The
      cells an early import ran beside say so in their results (beside.py).
    - A launcher that refuses costs the one import; its cells then start fresh and say why.
    - **Home slots.** Where a launcher is its slot's (a launcher container holds its cores), a
      group's cells go back to that slot when it is free (`homes`): a cell given other cores
      would find no launcher there and start fresh, or import a second one. The scheduler gives
      a free slot first to a cell at home there or with no home; a cell whose home is busy takes
      another slot only when no other cell can use it, so no core idles for a preference.
    """

    def __init__(self, cells: list[Cell], why: Callable[[Cell], str | None] = fresh_because):
        self._why = why  # the engine's reasons a cell starts fresh (Engine.fresh_because)
        self._left = Counter(group(c) for c in cells if forks(c, why))
        self._importing: set[tuple] = set()
        self._settled: set[tuple] = set()
        self._lock = threading.Lock()
        self._homes: dict[str, tuple[tuple, tuple[int, ...]]] = {}  # launcher key -> (group, its cores)
        self.on_settle: Callable[[], None] | None = None
        self._example: dict[tuple, Cell] = {}  # one cell of each group, for a launcher started ahead
        for c in cells:
            if forks(c, why):
                self._example.setdefault(group(c), c)
        self._ahead: set[tuple] = set()

    def begin(self, cell: Cell, runs: bool = True) -> bool:
        """The scheduler hands `cell` a slot (`runs`) or records it without running it. True: it
        is the first cell of a CPU group with others to follow, whose launcher it starts; the
        scheduler calls `settle(cell)` when the cell ends, whatever became of it."""
        if not forks(cell, self._why):
            return False
        g = group(cell)
        with self._lock:
            self._left[g] = max(0, self._left[g] - 1)
            if (runs and cell.parallelism.device_kind != "gpu" and self._left[g] >= 1
                    and g not in self._importing and g not in self._settled):
                self._importing.add(g)
                return True
        return False

    def ahead(self, cell: Cell) -> list[Cell]:
        """One cell of each other GPU group of `cell`'s environment with two or more cells still
        to run, whose launcher may start now, while `cell` trains (each group once)."""
        if not shares_gpus(cell):
            return []
        mine = group(cell)
        with self._lock:
            out = [c for g, c in self._example.items() if g[:2] == mine[:2] and g != mine and shares_gpus(c)
                   and g not in self._ahead and self._left[g] >= 2]
            self._ahead.update(group(c) for c in out)
        return out

    def left(self, cell: Cell) -> int:
        """Cells of the cell's group still to be given a slot (the cell itself not counted)."""
        with self._lock:
            return self._left[group(cell)]

    def holding(self, cell: Cell) -> bool:
        """Whether the scheduler should hold the cell back: its group's launcher is importing."""
        if cell.parallelism.device_kind == "gpu" or not forks(cell, self._why):
            return False
        with self._lock:
            return group(cell) in self._importing

    def home(self, key: str, cell: Cell, cpus) -> None:
        """A launcher that holds its slot (`key`, as the Launcher names it) started on `cpus`."""
        if cell.parallelism.device_kind != "gpu" and cpus:
            with self._lock:
                self._homes[key] = (group(cell), tuple(sorted(cpus)))

    def leave(self, key: str) -> None:
        """That launcher is gone (refused, died, closed)."""
        with self._lock:
            self._homes.pop(key, None)

    def homes(self, cell: Cell) -> list[tuple[int, ...]]:
        """The cores of the launchers that hold a slot and serve the cell's group ([] for a GPU
        cell, or on an engine whose launchers serve any slot)."""
        if cell.parallelism.device_kind == "gpu" or not self._homes:
            return []
        g = group(cell)
        with self._lock:
            return [cpus for owner, cpus in self._homes.values() if owner == g]

    def settle(self, cell: Cell) -> None:
        """The cell's group is done importing (ready, refused, or never started): release it."""
        g = group(cell)
        with self._lock:
            if g not in self._importing:
                return
            self._importing.discard(g)
            self._settled.add(g)
        if self.on_settle:
            self.on_settle()
