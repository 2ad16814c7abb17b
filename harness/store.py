"""The results folder: one folder per cell run, written atomically, safe to share.

A cell runs in ``<cell>.partial-<host>-<pid>`` and is renamed to ``<cell>``
only once result.json is complete, so an interrupted matrix leaves either a
whole result or none, and the next run resumes from the finished ones.

Many writers may share one results folder: two ``harness run`` processes, a
scheduler's workers, the tasks of a cluster job array on several nodes. The
rule that keeps them apart is one lock per cell (``.locks/<hash>.lock``,
``flock``): a process runs a cell, or removes a half-written folder of it,
only while it holds that cell's lock. The kernel (or the NFS lock manager)
drops the lock when its owner dies, so "the lock is free" means exactly "no
live process owns this cell's partial folder", whoever left it there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .cells import Cell
from .paths import inside, read_json, write_json  # noqa: F401 - write_json: the store's writer
from .result import Quarantined, Result, load, load_folder
from .status import RETRIED_ALWAYS
from .workloads.protocol import RESULT_FILE, SPEC_FILE

RESULT = RESULT_FILE
SPEC = SPEC_FILE
OWNER = "owner.json"
PARTIAL = ".partial-"
LOCKS = ".locks"


class Claim:
    """The right to run (or clean up) one cell: an flock held until released."""

    def __init__(self, store: ResultStore, cell_id: str, fd: int):
        self.store, self.cell_id, self.fd = store, cell_id, fd

    def release(self) -> None:
        if self.fd >= 0:
            with self.store._held_lock:
                self.store._held.discard(self.cell_id)
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = -1


class ResultStore:
    def __init__(self, root: Path, run: str):
        self.root = Path(root)
        self.run_dir = inside(self.root, self.root / run)
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        self.notes: list[str] = []   # files found here that are not what they claim (quarantined)
        self._told: set[str] = set()

    def final_dir(self, cell: Cell) -> Path:
        return inside(self.run_dir, self.run_dir / cell.id)

    def existing(self, cell: Cell) -> Result | None:
        """The cell's stored result; None when there is none or it is quarantined
        (then the cell counts as missing, runs again, and `notes` says why once)."""
        found = load_folder(self.final_dir(cell))
        if isinstance(found, Result) and found.cell != cell.id:  # copied here from another cell's folder
            found = Quarantined(self.final_dir(cell) / RESULT, f"the result of another cell ({found.cell[:200]!r})")
        if isinstance(found, Quarantined):
            self.note(found.note().replace("; left out", "; the cell counts as missing"))
            return None
        return found

    def note(self, text: str) -> None:
        with self._held_lock:
            if text not in self._told:
                self._told.add(text)
                self.notes.append(text)

    def take_notes(self) -> list[str]:
        """The quarantine notes gathered since the last call; each file is told once."""
        with self._held_lock:
            out, self.notes = self.notes, []
        return out

    def needs_run(self, cell: Cell, rerun: frozenset[str] = frozenset()) -> bool:
        result = self.existing(cell)
        if result is None:
            return True
        status = result.status
        return status in RETRIED_ALWAYS or status in rerun or "all" in rerun or self.is_stale(cell)

    def is_stale(self, cell: Cell) -> bool:
        """True when the stored result answers a different question than the cell
        asks now (a pin, a model size, a limit changed under the same id). The
        expected answer is left out: changing it does not change the run. A
        spec.json that is not a JSON object (written by someone else) is stale."""
        path = self.final_dir(cell) / SPEC
        stored = read_json(path)
        if not isinstance(stored, dict):
            if stored is not None or path.exists():
                self.note(f"{path}: not a cell spec (expected a JSON object); the cell runs again")
            return True
        now = json.loads(json.dumps(cell.spec()))
        stored.pop("expect", None)
        now.pop("expect", None)
        return stored != now

    # -- ownership ---------------------------------------------------------
    def claim(self, cell_id: str) -> Claim | None:
        """Take the cell's lock without waiting; None if a live process holds it."""
        with self._held_lock:
            if cell_id in self._held:
                return None
            path = self.run_dir / LOCKS / (hashlib.sha256(cell_id.encode()).hexdigest()[:24] + ".lock")
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            self._held.add(cell_id)
            return Claim(self, cell_id, fd)

    def begin(self, cell: Cell) -> Path:
        """A fresh partial folder for a cell this process has claimed."""
        final = self.final_dir(cell)
        work = final.with_name(f"{final.name}{PARTIAL}{socket.gethostname()}-{os.getpid()}")
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        write_json(work / OWNER, {"host": socket.gethostname(), "pid": os.getpid()})
        return work

    def note_process(self, work: Path, pgid: int) -> None:
        """Record the cell's process group, so a later run can end it if this one is killed."""
        owner = read_json(work / OWNER) or {}
        write_json(work / OWNER, {**owner, "cell_pgid": pgid})

    def commit(self, work: Path, cell: Cell) -> Path:
        (work / OWNER).unlink(missing_ok=True)
        final = self.final_dir(cell)
        if final.exists():
            old = final.with_name(final.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(final, old)
            os.replace(work, final)
            shutil.rmtree(old)
        else:
            os.replace(work, final)
        return final

    def clean_partials(self) -> tuple[int, int]:
        """Remove half-written cell folders whose owner is dead; end the cell
        processes such an owner left behind on this host.

        A partial folder whose cell lock is held belongs to a live run (here
        or on another node) and is left alone. Returns (folders removed,
        process groups ended).
        """
        removed = ended = 0
        if not self.run_dir.exists():
            return 0, 0
        for path in sorted(self.run_dir.rglob(f"*{PARTIAL}*")):
            if not path.is_dir():
                continue
            cell_id = str(path.relative_to(self.run_dir)).split(PARTIAL, 1)[0]
            claim = self.claim(cell_id)
            if claim is None:
                continue  # a live process owns it
            try:
                ended += _end_leftover(read_json(path / OWNER) or {})
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
            finally:
                claim.release()
        return removed, ended


def _end_leftover(owner: dict) -> int:
    """Kill the process group a dead harness recorded for its cell, if it is still alive here."""
    pgid = owner.get("cell_pgid")
    if not pgid or owner.get("host") != socket.gethostname():
        return 0
    try:  # the group's leader must still be a cell process: pids get reused
        if b"workloads" not in Path(f"/proc/{int(pgid)}/cmdline").read_bytes():
            return 0
    except OSError:
        return 0
    try:
        os.killpg(int(pgid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return 0
    return 1


def iter_results(*roots: Path) -> Iterator[tuple[Path, dict]]:
    """Every result.json below the given folders as raw dicts, the way an outside checker reads
    them (tests and bench scripts do); the harness itself reads through `scan` / `read_all`."""
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob(RESULT))
        for path in files:
            if PARTIAL in str(path):
                continue
            data = read_json(path)
            if isinstance(data, dict) and "status" in data:
                yield path.parent, data


def scan(*roots: Path) -> Iterator[tuple[Path, Result | Quarantined]]:
    """Every result.json below the given folders (or the files themselves), as (folder, answer);
    half-written cell folders are skipped. A checker finds results by this file name."""
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob(RESULT))
        for path in files:
            if PARTIAL in str(path):
                continue
            yield path.parent, load(path)


def read_all(roots: Iterable[Path], notes: Callable[[str], None] | None = None) -> list[tuple[Path, Result]]:
    """The results below `roots`; each quarantined file is told to `notes` in one line and left out."""
    out = []
    for folder, found in scan(*roots):
        if isinstance(found, Quarantined):
            if notes:
                notes(found.note())
            continue
        out.append((folder, found))
    return out
