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
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from harness.cells import Cell
from harness.files.paths import inside, read_json, write_json  # noqa: F401 - write_json: the store's writer
from harness.host.processes import boot_id, process_start, stat_fields
from harness.results.result import Quarantined, Result, load, load_folder
from harness.status import retried_always
from harness.workloads.protocol import RESULT_FILE, SPEC_FILE

RESULT = RESULT_FILE
SPEC = SPEC_FILE
OWNER = "owner.json"
PARTIAL = ".partial-"
LOCKS = ".locks"
# Set in a cell process's environment: the run id of the harness that started it (`owner_record`).
OWNER_VARIABLE = "HARNESS_RUN_ID"


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
        self.run_id = uuid.uuid4().hex  # this process's run: recorded in each owner file, given to its cells
        # files found here that are not what they claim (quarantined), and owner files not believed
        self.notes: list[str] = []
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
        return retried_always(result) or result.status in rerun or "all" in rerun or self.is_stale(cell)

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
        write_json(work / OWNER, {"host": socket.gethostname(), "pid": os.getpid(), "run_id": self.run_id,
                                  "boot_id": boot_id(), "started": process_start(os.getpid()),
                                  "tmp": tempfile.gettempdir()})  # where its cell's temp folder goes
        return work

    def note_process(self, work: Path, pgid: int) -> None:
        """Record the cell's process group with what identifies it beyond its number (which
        the kernel reuses): its start time since boot and the boot, so a later run can end
        it if this one is killed -- and nothing else (`_end_leftover`)."""
        owner = read_json(work / OWNER)
        owner = owner if isinstance(owner, dict) else {}
        write_json(work / OWNER, {**owner, "cell_pgid": pgid, "cell_start": process_start(pgid)})

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
        for path in _partial_folders(self.run_dir):
            cell_id = str(path.relative_to(self.run_dir)).split(PARTIAL, 1)[0]
            claim = self.claim(cell_id)
            if claim is None:
                continue  # a live process owns it
            try:
                raw = read_json(path / OWNER)
                ended_here, note = _end_leftover(path, raw)
                ended += ended_here
                if note:
                    self.note(note)
                else:  # its cell is gone (or never started): so may its temp folder be
                    _remove_scratch(path, raw)
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
            finally:
                claim.release()
        return removed, ended


SCRATCH_PREFIX = "harness-cell-"


def scratch_prefix(work: Path) -> str:
    """How the temp folder of the cell in partial folder `work` is named (engines/base.py makes
    it in the harness's temp folder, which the owner file records): tied to that one folder, so
    the clean-up of a dead run's partial folder finds the temp folder its cell left behind
    (a `kill -9` of the harness leaves both) and never another run's."""
    return f"{SCRATCH_PREFIX}{hashlib.sha256(str(work.resolve()).encode()).hexdigest()[:16]}-"


def _remove_scratch(folder: Path, raw) -> None:
    """Remove the temp folder a dead run's cell in `folder` left: only folders of this folder's
    name, made by this user, not links, in the temp folder its owner file (`raw`) records."""
    tmp = raw.get("tmp") if isinstance(raw, dict) else None
    if not isinstance(tmp, str) or raw.get("host") != socket.gethostname() or not os.path.isabs(tmp):
        return
    for path in Path(tmp).glob(scratch_prefix(folder) + "*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)


# owner.json as begin() and note_process() write it: the keys checked, and their types
OWNER_FIELDS = {"host": str, "run_id": str, "boot_id": str, "cell_pgid": int, "cell_start": int}


def owner_record(data) -> tuple[dict | None, str | None]:
    """The owner file's record when it has the shape the harness writes, else (None, why)."""
    if not isinstance(data, dict):
        return None, f"not a mapping but {type(data).__name__}"
    for key, kind in OWNER_FIELDS.items():
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return None, f"'{key}' is {type(value).__name__ if key in data else 'missing'}, not {kind.__name__}"
    if data["cell_pgid"] <= 1:
        return None, f"'cell_pgid' is {data['cell_pgid']}"
    return data, None


def _end_leftover(folder: Path, raw) -> tuple[int, str | None]:
    """Kill the process group a dead harness recorded for the cell in `folder` (whose
    lock the caller holds) -- only when every fact recorded at launch still holds: this
    host, this boot, a group leader started at the recorded tick, started by the
    recorded run, running this folder's spec (on its command line, or working in the folder,
    as a cell forked by a warm launcher does). A forged or stale owner file names a
    process that fails one of them and is left alone. `raw`: the owner file as read. Returns
    (groups ended, a note when the owner file was not believed)."""
    if raw is None or (isinstance(raw, dict) and "cell_pgid" not in raw):
        return 0, None  # no file, or the cell never started: nothing to end
    owner, why = owner_record(raw)
    if owner is None:
        return 0, f"{folder / OWNER}: ignored ({why}); no process signalled"
    pgid = owner["cell_pgid"]
    if owner["host"] != socket.gethostname() or owner["boot_id"] != boot_id():
        return 0, None  # another machine's, or from before a reboot: no such process here
    fields = stat_fields(pgid)
    if not fields or len(fields) <= 19 or int(fields[2]) != pgid or int(fields[19]) != owner["cell_start"]:
        return 0, None  # gone, not a group leader, or a later process with a reused number
    try:
        argv = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pgid}/environ").read_bytes().split(b"\0")
    except OSError:
        return 0, None
    try:  # a cell works in its folder, started fresh (Popen's cwd) or forked warm (the launcher's chdir)
        cwd = Path(os.readlink(f"/proc/{pgid}/cwd"))
    except OSError:
        cwd = None
    here = folder.resolve()
    ours = str(here / SPEC).encode() in argv or cwd == here
    if not ours or f"{OWNER_VARIABLE}={owner['run_id']}".encode() not in environ:
        return 0, f"{folder / OWNER}: process group {pgid} is not this folder's cell; not signalled"
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return 0, None
    return 1, None


def iter_results(*roots: Path) -> Iterator[tuple[Path, dict]]:
    """Every result.json below the given folders as raw dicts, the way an outside checker reads
    them (tests and bench scripts do); the harness itself reads through `scan` / `read_all`."""
    for path in _result_files(roots):
        data = read_json(path)
        if isinstance(data, dict) and "status" in data:
            yield path.parent, data


def scan(*roots: Path) -> Iterator[tuple[Path, Result | Quarantined]]:
    """Every result.json below the given folders (or the files themselves), as (folder, answer);
    half-written cell folders are skipped. A checker finds results by this file name."""
    for path in _result_files(roots):
        yield path.parent, load(path)


def _result_files(roots: Iterable[Path]) -> Iterator[Path]:
    """The result.json files below `roots` (or the roots themselves), half-written folders left out."""
    for root in roots:
        root = Path(root)
        if PARTIAL in str(root):
            continue
        if root.is_file():
            yield root
        else:
            yield from sorted(folder / RESULT for folder, _, files in _walk(root) if RESULT in files)


def _partial_folders(run_dir: Path) -> list[Path]:
    """The half-written cell folders below `run_dir`."""
    return sorted(folder / name for folder, partial, _ in _walk(run_dir) for name in partial)


def _walk(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """(folder, the half-written cell folders in it, its files) for every folder below `root`, never
    entering a half-written one. A live run makes and removes folders while this walks (its cells'
    own files, staged workloads, other writers renaming finished cells), so a folder that vanishes
    between being listed and being entered is passed over (os.walk's way), never an error:
    `harness status` of a running matrix must not fail on the run's own scratch space."""
    for folder, subfolders, files in os.walk(root):
        partial = [name for name in subfolders if PARTIAL in name]
        subfolders[:] = [name for name in subfolders if PARTIAL not in name]
        yield Path(folder), partial, files


def holds_results(root: Path) -> bool:
    """Whether a readable result lies below `root` (a fresh clone has no results folder at all): a
    publisher that finds none republishes its committed data instead. Stops at the first one."""
    return Path(root).is_dir() and any(isinstance(found, Result) for _, found in scan(root))


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
