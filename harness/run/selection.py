"""What a run has still to run, decided before the runner starts: the cells a matrix and its
``--only`` globs name, less those whose stored result stands, plus every consumer of a producer
that runs again (``chains.with_consumers``: a consumer of files that change is stale too).

The runner then runs exactly the cells it is handed; its callers choose what those are --
`Runner.complete` the usual way (this module's `pending`), repro and bisect with ``--rerun``."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from harness import chains
from harness.cells import Cell
from harness.results.store import ResultStore


@dataclass(frozen=True)
class Selection:
    asked: list[Cell]   # every cell the caller named
    todo: list[Cell]    # the ones that run: no result that stands, or a consumer of one that runs
    stale: list[Cell]   # of `todo`: changed since their stored result

    @property
    def skipped(self) -> int:
        return len(self.asked) - len(self.todo)


def select(cells: Iterable[Cell], patterns: list[str] | None) -> list[Cell]:
    """The cells whose id matches one of `patterns` (globs, or an id's beginning); all, without any."""
    if not patterns:
        return list(cells)
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) or c.id.startswith(p) for p in patterns)]


def pending(store: ResultStore, cells: list[Cell], rerun: frozenset[str] = frozenset()) -> Selection:
    """Which of `cells` run: those the store says need it (no result, a status in `rerun`, changed
    since), and every cell that consumes one of them."""
    todo = chains.with_consumers([c for c in cells if store.needs_run(c, rerun)], cells)
    stale = [c for c in todo if store.existing(c) and store.is_stale(c)]
    return Selection(list(cells), todo, stale)
