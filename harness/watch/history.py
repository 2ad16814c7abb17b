"""The watch's record of a matrix, beside its results: ``<results>/<matrix>/.watch/``.

- ``history.jsonl`` -- one line per cell result, written by the watch that first saw it: the
  release axis and, per range, the series the environment lies on (``release_cells.open_stack``),
  status, failure family, metrics, timing (median/min/max), host, warm or fresh
  launch, the watch's id, when it ran and the date it replayed (``as_of``);
- ``runs.jsonl``    -- one line per watch: when, as of when, what it expanded, ran and found;
- ``changes.jsonl`` -- one line per change the first time a watch finds it (a ``claims.Change`` as
  ``changelog.to_dict`` writes it, and where its bisect bundle lies);
- ``lock``          -- held (fcntl.flock) by the one watch of this matrix that runs.

All three records are append-only: a line once written is never rewritten (a person reads
them, the report reads them, and a later watch must never lose what an earlier one saw).
Appends are one ``write`` of whole lines on an O_APPEND descriptor under the lock, so a
reader never sees half a line from a live watch, and a line cut by a crash is skipped on read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness import status
from harness.cells import Cell
from harness.files import ownfiles
from harness.files.paths import inside
from harness.matrix.release_cells import open_stack
from harness.results.result import Result
from harness.stats import spread_of, steady

FOLDER = ".watch"
HISTORY, RUNS, CHANGES, LOCK = "history.jsonl", "runs.jsonl", "changes.jsonl", "lock"


class Busy(Exception):
    """Another watch of this matrix holds the lock."""


def folder(results_root: Path, matrix: str) -> Path:
    """The matrix's record folder; each folder on the way below the results folder that exists
    must be a real one, not a link (``ownfiles.check_folders``)."""
    root = Path(results_root)
    return inside(root, ownfiles.check_folders(root, root / matrix / FOLDER))


def read(path: Path) -> list[dict]:
    """The records of one file, oldest first; a line that is not a JSON object (cut by a crash,
    edited by hand) is left out rather than stopping the watch. A link, a pipe or an outsized
    file where the record should be is refused (``ownfiles``): exit 2, the path named."""
    out = []
    for line in (ownfiles.read_bytes(path) or b"").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def append(path: Path, records: Iterable[dict]) -> int:
    """Append `records` as JSON lines in one write; returns how many."""
    text = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records)
    if not text:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = ownfiles.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)   # never through a link
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return text.count("\n")


@contextlib.contextmanager
def locked(where: Path, wait: bool) -> Iterator[None]:
    """Hold the matrix's watch lock while the block runs: another watch waits (`wait`) or gets
    Busy with the holder's pid. The kernel drops the lock when its holder dies, so a killed
    watch never leaves the matrix locked."""
    where.mkdir(parents=True, exist_ok=True)
    fd = ownfiles.open_file(where / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            raise Busy(holder or "?") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def result_id(folder_: Path) -> str:
    """Which stored result this is: a hash of its result.json (a re-run is another result)."""
    try:
        data = ownfiles.read_bytes(folder_ / "result.json")
    except (OSError, ownfiles.NotOwn):   # the store has quarantined such a result already
        return ""
    return hashlib.sha256(data).hexdigest()[:16] if data is not None else ""


def outcome_status(result: Result) -> str:
    """The word a release series compares: the status, or `drifted` for an ok cell that missed a
    value its matrix expects (a silent change)."""
    if result.status == status.OK and result.expected and any(v.met is False for v in result.expected.values):
        return status.DRIFTED
    return result.status


def entry(result: Result, cell: Cell, *, folder_: Path, watch: str, date: str, as_of: str | None) -> dict:
    """One history line for one cell result."""
    env = cell.environment
    ok_epochs = steady(result.epochs) if result.status == status.OK else []
    speed = spread_of(e.get("samples_per_sec") for e in ok_epochs)
    missed = [v.detail or f"{v.metric}: {v.got} (expected {v.want})"
              for v in (result.expected.values if result.expected else []) if v.met is False]
    timing = {k: v for k, v in (result.timing or {}).items() if isinstance(v, (int, float))}
    if speed:
        timing["steady_samples_per_sec"] = {"median": speed.median, "min": speed.lo, "max": speed.hi, "n": speed.n}
    return {
        "watch": watch, "date": date, "as_of": as_of, "cell": cell.id, "repeat": cell.repeat,
        "environment": env.name, "releases": [[p, s, v] for p, s, v in env.ranges],
        "stacks": {p: open_stack(env, p) for p, _, _ in env.ranges},
        "uploaded_before": env.uploaded_before,
        "status": outcome_status(result), "family": result.failure_text[:300] or ("; ".join(missed)[:300] or None),
        "metrics": {k: v for k, v in (result.metrics or {}).items() if isinstance(v, (int, float))
                    and not isinstance(v, bool)},
        "timing": timing, "host": result.host,
        "launch": (result.warmth.launch if result.warmth else None) or "fresh",
        "result": f"{cell.id}/result.json", "result_id": result_id(folder_),
    }
