"""What a cell's last run tells the next: how long it held its place, so that the next run starts
the longest first, and whether its compiled programs are in the compile cache, so that the next
run may prepare them while the cell stands by (workloads/ahead.py).

The local executor starts the cells needing the most GPUs first (largest-first packing); among
cells of one size the matrix's order used to decide, so a run could end with a long cell
started late on one GPU while the others idled (seed000-gpu on two GPUs: one of its two longest
one-GPU cells was started sixth of eight, and one GPU idled 4.5 s at the end).
Longest-processing-time-first needs the times, and only an earlier run knows them: each run keeps
its cells' held seconds here, in the harness's cache beside the compile caches, and the next run
of those cells -- a warm run after a warm-up, a nightly, a matrix resumed -- starts each size's
cells longest first. A cell never seen goes before the cells that were (it may be the longest);
a first run keeps the matrix's order. The same idea orders the harness's own test files
(tests/suite_timing.py).

A run of a cell that went warm with a JAX compile cache (`warmth.compile_cache`) and ended ok
left every program it compiled there (the harness writes each one, however quick: caches.py);
`load().programs` says which cells had one. The mark stays once set (a fresh run offers no cache
and leaves what is in it alone); where the cache was emptied since, the cell's result says so
(its `timing.programs_ahead` counts the cache's misses).

Only the order changes, and where a cell compiles: what a cell runs, its limits and its figures
do not. A hint, not a record: the file is written whole once per run (replaced, so a reader never
sees half of it), a file that cannot be read counts as empty, and where two runs end at once the
figures of one may be lost -- the next run orders by what is there.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import NamedTuple

from harness import status
from harness.files.ownfiles import NotOwn, read_bytes, write_atomic
from harness.files.paths import cache_dir

FILE = "durations.json"
MAX_CELLS = 20000  # the most recently run are kept: a file read at every run stays small


def _path() -> Path:
    return cache_dir() / FILE


def _cells() -> dict:
    """The file's entries as written; {} where there is none, or it is not a file of this
    harness's (a link, a pipe, not JSON, not an object of entries: ownfiles refuses the first two)."""
    try:
        cells = json.loads(read_bytes(_path()) or b"{}").get("cells", {})
    except (OSError, ValueError, NotOwn, AttributeError):
        return {}
    return cells if isinstance(cells, dict) else {}


class Known(NamedTuple):
    """What the file says, read once per run."""

    seconds: dict[str, float]  # cell id -> the seconds it last held its place
    programs: set[str]         # the cells whose programs a run left in the compile cache


def load() -> Known:
    """The file's figures and marks: only finite, non-negative seconds (never a word, NaN or
    infinity, however written), and only a mark written as `true`."""
    entries = {str(k): v for k, v in _cells().items() if isinstance(v, dict)}
    seconds = {k: v.get("seconds") for k, v in entries.items()}
    return Known({k: float(s) for k, s in seconds.items()
                  if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s >= 0},
                 {k for k, v in entries.items() if v.get("programs") is True})


def left_programs(result) -> bool:
    """Whether the result's run left its programs in the compile cache: it ran ok and warm, with
    a JAX compile cache offered."""
    warmth = result.warmth
    cache = warmth.compile_cache if warmth else None
    return result.status == status.OK and isinstance(cache, dict) and cache.get("kind") == "jax"


def seconds_of(result) -> float | None:
    """What a result says its cell held its place for: the held span where it stood by (the time
    before its hand-over was another cell's), else its process's life; None for a cell decided
    without running."""
    timing = result.timing or {}
    seconds = timing.get("held_seconds")
    if seconds is None:
        seconds = timing.get("total_seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else None


def remember(measured: dict[str, float], programs: set[str] | frozenset = frozenset()) -> None:
    """Merge this run's cells (id -> seconds; `programs`: those that left their programs in the
    compile cache) into the file, the newest kept, written whole (ownfiles.write_atomic); silent
    where the cache cannot be written (the file is only a hint)."""
    if not measured:
        return
    cells = {k: v for k, v in _cells().items() if isinstance(v, dict)}
    now = round(time.time(), 1)
    for cell, s in measured.items():  # a mark once set stays: the cache keeps what it was given
        kept = cell in programs or cells.get(cell, {}).get("programs") is True
        cells[cell] = {"seconds": round(s, 2), "at": now, **({"programs": True} if kept else {})}
    if len(cells) > MAX_CELLS:
        at = {c: v.get("at") if isinstance(v.get("at"), (int, float)) else 0 for c, v in cells.items()}
        newest = sorted(cells, key=at.__getitem__)
        cells = {c: cells[c] for c in newest[-MAX_CELLS:]}
    try:
        write_atomic(cache_dir(), _path(), json.dumps({"cells": cells}, sort_keys=True).encode())
    except (OSError, NotOwn):
        pass
