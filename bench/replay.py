"""Replay a GPU run's cells through the scheduler: the run's wall with and without joining, and
with the longest cells of each size first.

    python bench/replay.py RESULTS [--gpus N] [--prepare SECONDS] [--scale F] [--rounds R]

RESULTS is a results folder of a GPU run (one matrix's, as `harness run --results` leaves it).
Every cell of it is replayed through the real scheduler (`executors.local.execute`, the pool and
`standby.Relay`) on N declared GPUs, as a cell that sleeps: `--prepare` seconds to get ready
(on its GPUs, or standing by beside another cell), then its own seconds on its GPUs -- its
`timing.held_seconds` if it stood by, else that less `--prepare`. A cell the host could not run
(more GPUs than N) is not run here either. Cells are queued in the order the run started them.
Times are scaled by `--scale` to replay quickly and printed unscaled.

Each round replays the run three times, in turn: as the relay was before joining (a cell with no
place never joins a smaller running set, and smaller cells stand by wherever they find a place),
as it is with the run's own order, and as it is with each size's longest cells first -- what a
run does once an earlier run has measured its cells (durations.py). Printed per mode: the
replayed wall, median [min-max] over the rounds, and the share of the N GPUs held for the cells'
own seconds. This measures the scheduler's decisions on a run's measured durations, not the
GPUs: the GPU figures come from running the matrix.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _common import results

from harness.cells import Cell, Environment, Parallelism, Workload
from harness.host.resources import Gpu, Inventory, Pool
from harness.launch import standby
from harness.results.store import ResultStore
from harness.run.executors.local import Hooks, execute


def cells_of(folder: Path, prepare: float) -> list[tuple[Cell, float]]:
    """One sleeping cell per cell of the run, with its own seconds on its GPUs."""
    env = Environment("replay", "3.12", keras="3.15.1", backend="jax", device="gpu")
    out = []
    for r in sorted(results(folder), key=lambda r: ((r.get("timing") or {}).get("window") or [0])[0]):
        t = r.get("timing") or {}
        held = t.get("held_seconds") or t.get("total_seconds") or 0.0
        own = held if t.get("standby") else max(0.0, held - prepare)
        cell = Cell(env, Workload(r["cell"].split("/")[1], "idle", {"seconds": own}),
                    Parallelism("data_parallel", r["parallelism"]["devices"], "gpu"), 1, 1, repeat=len(out))
        out.append((cell, own))
    return out


def replay(cells: list[tuple[Cell, float]], gpus: int, prepare: float, scale: float,
           measured: bool = False) -> tuple[float, float]:
    """(wall, share of the GPUs held for the cells' own seconds), unscaled; `measured`: the
    scheduler knows each cell's seconds from an earlier run (its own here)."""
    own = {id(c): s for c, s in cells}
    held, lock = [], threading.Lock()

    def run_cell(prepared, cell, slot, claim, cancel, stands_by=None, release=None):
        time.sleep(prepare * scale)
        if stands_by is not None:
            stands_by.went.wait()
        time.sleep(own[id(cell)] * scale)
        with lock:
            held.append(own[id(cell)] * len(slot.gpus))
        return {}

    inventory = Inventory([Gpu(str(i)) for i in range(gpus)], list(range(4 * gpus)), "declared")
    pool = Pool(inventory, cells=len(cells))
    hooks = Hooks(prepare=lambda e: e, run_cell=run_cell, not_run=lambda *a: {}, finished=lambda *a: None,
                  waiting=lambda text: None, stands_by=lambda cell: True,
                  expected=(lambda cell: prepare + own[id(cell)]) if measured else (lambda cell: None))
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        execute([c for c, _ in cells], ResultStore(Path(folder), "replay"), pool, hooks)
    wall = (time.monotonic() - start) / scale
    return wall, sum(held) / (gpus * wall)


def before_joining():
    """The relay as it was before joining: patched for the duration of one replay."""
    join, follow = standby.Relay._join, standby.Relay.follow
    standby.Relay._join = lambda self, gpus: None
    standby.Relay.follow = lambda self, gpus, keep=0: follow(self, gpus)
    return lambda: (setattr(standby.Relay, "_join", join), setattr(standby.Relay, "follow", follow))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--prepare", type=float, default=2.0)
    p.add_argument("--scale", type=float, default=0.2)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    cells = cells_of(a.results, a.prepare)
    runs: dict[str, list[tuple[float, float]]] = {"before joining": [], "joining": [], "longest first": []}
    for _ in range(a.rounds):
        for mode in runs:
            restore = before_joining() if mode == "before joining" else (lambda: None)
            try:
                runs[mode].append(replay(cells, a.gpus, a.prepare, a.scale, measured=mode == "longest first"))
            finally:
                restore()
    print(f"{a.results}: {len(cells)} cells replayed on {a.gpus} declared GPUs, {a.rounds} round(s)")
    for mode, got in runs.items():
        walls, shares = [w for w, _ in got], [s for _, s in got]
        print(f"  {mode:>15}: wall {statistics.median(walls):.1f} s [{min(walls):.1f}-{max(walls):.1f}], "
              f"GPUs held for the cells' own seconds {statistics.median(shares):.0%}")


if __name__ == "__main__":
    main()
