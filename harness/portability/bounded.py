"""`portability run --disk-bound`: the grid one stack's environment at a time.

A grid's readers need every writer's files, and each stack is a writer and a reader, so a run that
keeps every stack's environment keeps them all at once -- the 68 stacks of the atlas's file need
well over 100 GB, the PyTorch stacks about 7 GB each. Bounded, the run goes in two passes: every
stack writes (then its environment is removed), and every stack reads the files of all of them
(then it is removed). Each stack is built twice, from a uv cache of its own that goes with it (the
atlas run's way, `harness.atlas.drive`: uv links a virtualenv's files to its cache, so removing one
without the other frees nothing); peak disk is about one stack, plus the files written so far, which
are results.

A pass removes only the environment it built: one that was there already (built by another run,
from another uv cache) may be in use, and stays. Each stack's pass is the atlas's (`drive.run_one`:
the grid's cells of that stack through the API, each cell in a process of its own): a harness
error there costs that stack's pass, and finished cells are in the results store, so a second run
skips every stack that owes nothing (without building it) and resumes the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness import exits
from harness.atlas import drive
from harness.cells import Cell
from harness.environments import removal
from harness.matrix import Matrix
from harness.portability import grid
from harness.results.result import Result
from harness.results.store import ResultStore
from harness.status import OK, UNAVAILABLE


def passes(m: Matrix, cells: list[Cell], store: ResultStore,
           writing: set[str] | None = None) -> list[tuple[str, str, list[Cell]]]:
    """(pass, stack, its owed cells) in the order they run: every stack's writer, then every stack's
    readers; a stack that owes nothing in a pass is not in it. A reader already found unavailable
    because its writer wrote nothing is not owed unless that writer is still to write (`writing`:
    the writer cells not run yet; by default, every owed one): a run would decide it the same
    without launching, after building the reader's stack for it."""
    if writing is None:
        writing = {c.id for c in cells if c.workload.name == grid.WRITER and store.needs_run(c)}
    by_id = {c.id: c for c in m.cells}
    out = []
    for name, wanted in (("writes", lambda c: c.workload.name == grid.WRITER),
                         ("reads", lambda c: grid.is_reader(c.workload.name))):
        for env in m.environments:
            owed = [c for c in cells if c.environment.name == env.name and wanted(c) and store.needs_run(c)
                    and not _writer_wrote_nothing(c, store, writing, by_id)]
            if owed:
                out.append((name, env.name, owed))
    return out


def _writer_wrote_nothing(cell: Cell, store: ResultStore, writing: set[str], by_id: dict[str, Cell]) -> bool:
    """Whether `cell` ended unavailable for a writer that ended without files and does not write in
    this run (chains: a consumer of a producer that is not ok is unavailable, with its reason)."""
    mine = store.existing(cell)
    if mine is None or mine.status != UNAVAILABLE or not cell.needs:
        return False
    for need in cell.needs:
        producer = store.existing(by_id[need["cell"]]) if need["cell"] in by_id else None
        if need["cell"] in writing or producer is None or producer.status == OK:
            return False
    return True


def run(matrix_path: Path, m: Matrix, cells: list[Cell], results: Path, how: dict,
        say: Callable[[str], None]) -> list[Result]:
    """Run the cells a stack at a time, each stack's environment removed once its pass is done;
    returns the results `cells` have then. An interrupted pass stops the run (it
    resumes from there); a pass that failed otherwise is said, and the run goes on."""
    store = ResultStore(results, m.name)
    stacks = {env.name: drive.Stack(matrix_path, m, env) for env in m.environments}
    writes = [p for p in passes(m, cells, store) if p[0] == "writes"]
    for i, (name, stack, owed) in enumerate(writes, 1):
        _one(stacks[stack], name, owed, results, how, say, f"{i}/{len(writes)}")
    # the writers are done: what their readers owe now (none for a writer that wrote nothing again)
    reads = [p for p in passes(m, cells, store, writing=set()) if p[0] == "reads"]
    for i, (name, stack, owed) in enumerate(reads, 1):
        _one(stacks[stack], name, owed, results, how, say, f"{i}/{len(reads)}")
    return [r for c in cells if (r := store.existing(c)) is not None]


def _one(stack: drive.Stack, name: str, owed: list[Cell], results: Path, how: dict,
         say: Callable[[str], None], place: str) -> None:
    """One stack's pass (`drive.run_one`, `how` its options), then the environment it built
    removed; an interrupted pass stops the run."""
    say(f"[{place}] {stack.environment.name} {name}: {len(owed)} cell(s)")
    started = time.time()
    rc = drive.run_one(stack, results, how, only=[c.id for c in owed])
    uv = drive.uv_cache(stack)
    built = removal.built_from(uv)
    disk = removal.footprint(*built, uv)
    gone = removal.removed(built, uv, say)   # only what this pass built (removal.removed says why)
    said = (f"its environment removed ({disk / 1e9:.1f} GB with its own uv cache)" if gone else
            "its environment is kept: another run uses it" if built else
            f"its environment was there already, and is kept (built from another uv cache than {uv.name}'s)")
    say(f"      {stack.environment.name} {name}: exit {rc} in {time.time() - started:.0f} s; {said}")
    if rc == exits.INTERRUPTED:
        raise KeyboardInterrupt
