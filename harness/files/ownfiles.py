"""The harness's own files under a results folder or a site, never followed blindly.

A results folder is often shared (a cluster's filesystem, a team's folder), and what the
harness keeps there -- the watch's history, runs and changes, its lock, the result files, the
feeds and badges it publishes -- is read and appended to by every later run. Opened as plain
paths, a symbolic link put in one's place would point those appends at any file the user can
write, and a named pipe would hang the run (and hold the watch's lock, so every scheduled
watch after it fails). So each such file is opened here: without following a link, without
blocking, and refused unless it is a regular file; each folder on the way is refused if it is a
link or not a folder; reads are bounded. A refusal is one line that names the path and exits 2
(``NotOwn`` is a ``UserError``): the harness neither follows nor removes what it did not make.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
from pathlib import Path

from harness.errors import UserError

MAX_READ = 256 << 20  # bytes: a record is read whole, and a record this large is not one of ours
NOT_REGULAR = "is not a regular file (a pipe, a socket or a device)"


class NotOwn(UserError):
    """A path where the harness keeps a file or folder of its own holds something else."""

    def __init__(self, path: Path | str, what: str):
        self.path, self.what = str(path), what
        super().__init__(f"{path}: {what}; the harness neither follows nor reads it -- move it away and run again")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISDIR(mode):
        return "is a folder"
    return NOT_REGULAR


def open_file(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of the regular file `path` (os.open's `flags`, O_CREAT included), opened
    without following a link and without blocking on a pipe; NotOwn for anything else."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotOwn(path, "is a symbolic link") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):   # a pipe nobody reads; a folder
            raise NotOwn(path, NOT_REGULAR if exc.errno == errno.ENXIO else "is a folder") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotOwn(path, _kind(info.st_mode))
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def read_bytes(path: Path | str, limit: int = MAX_READ) -> bytes | None:
    """The content of the regular file `path`, None when there is none; NotOwn for a link, a
    pipe or a device, or a file over `limit` bytes."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotOwn(path, f"is larger than {limit >> 20} MiB, more than any record of the harness's")
    return data


def check_folders(root: Path | str, path: Path | str) -> Path:
    """`path`, once every folder from below `root` down to it that exists is known to be a real
    folder, not a link (`root` itself is the user's to choose, a link or not)."""
    root, path = Path(root), Path(path)
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            break
        if not stat.S_ISDIR(info.st_mode):
            raise NotOwn(here, _kind(info.st_mode) if stat.S_ISLNK(info.st_mode) else "is not a folder")
    return path


def make_folders(root: Path | str, path: Path | str) -> Path:
    """`path` made where missing, each folder below `root` a real one (``check_folders``)."""
    check_folders(root, path)
    Path(path).mkdir(parents=True, exist_ok=True)
    return check_folders(root, path)


def write_atomic(root: Path | str, path: Path | str, data: bytes) -> bool:
    """Write `path` (below `root`) whole, by a rename, when its content differs; True when
    written. What stands at `path` must be a regular file (or nothing): a link, a pipe or a
    folder there is refused, never written through or replaced."""
    path = Path(path)
    make_folders(root, path.parent)
    if read_bytes(path) == data:
        return False
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """`dst` as a hard link to `src` (no second copy of its bytes), or a copy where the filesystem
    refuses a link; shutil.copytree's `copy_function` signature."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
