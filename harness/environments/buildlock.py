"""One builder per environment on a host: concurrent runs wait for it instead of racing it.

Two runs that need the same environment at once -- two matrices, a run and a `build`, the
workers of a test suite, cluster jobs sharing the cache -- would otherwise build it twice
(a virtualenv into one folder, an image under one tag, a debootstrapped base), each paying
minutes of downloads and unpacking, and the second then throws away what the first made.
Instead the first takes an exclusive lock named for what it builds and the others wait on
it; once it is released they find the environment there and reuse it.

A built virtualenv is also *in use*: a run that prepared it holds a shared lock on it
(`Use`) until its engine closes, and whatever removes it (a disk-bound atlas or portability
run, a bisect with its own uv cache) first takes that lock exclusively, or keeps the venv
(`unused`). Without it, a bisect that ended removed a venv from under a grid run that had found it there, and the
grid's cells in it failed on half-deleted packages: a harness fault recorded as the cells'.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from harness.files.paths import cache_dir


def lock_file(key: str, folder: Path | None = None) -> Path:
    """Where the lock for `key` lives: beside what it builds (a venv's folder), or under the
    cache's locks/ folder, named by a digest so that any key (an image tag) is a file name."""
    if folder is not None:
        return folder.with_name(folder.name + ".lock")
    return cache_dir() / "locks" / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".lock")


@contextlib.contextmanager
def held(key: str, folder: Path | None = None) -> Iterator[None]:
    """Hold the build lock for `key` (an image tag, a base's name; or the venv `folder`) while
    the block runs; waits while another process holds it."""
    path = lock_file(key, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the lock


def use_file(folder: Path) -> Path:
    """The in-use lock of a built folder, beside it (its build lock is `lock_file`)."""
    return folder.with_name(folder.name + ".inuse")


_HELD: dict[Path, list[Use]] = {}   # this process's holds, so that it never waits on itself


class Use:
    """A shared hold on a built folder while a run's cells may start in it: any number of runs
    hold it at once, and a removal leaves the folder alone while any does (`unused`). Released by
    `release` (an engine's close) or with the process."""

    def __init__(self, folder: Path):
        self.folder = folder
        path = use_file(folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        _HELD.setdefault(folder, []).append(self)

    def release(self) -> None:
        if self.fd is None:
            return
        os.close(self.fd)
        self.fd = None
        _HELD[self.folder].remove(self)


@contextlib.contextmanager
def unused(folder: Path) -> Iterator[bool]:
    """Hold `folder`'s in-use lock exclusively while the block runs, which removes the folder; yields
    False, holding nothing, when another run holds it: that run's cells may be in it, and the
    folder stays (waiting instead could mean waiting for a run of hours, or for a process that
    outlives the one removing). This process's own holds are released first: the code that
    removes a folder is done with it."""
    for use in list(_HELD.get(folder, ())):
        use.release()
    path = use_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
