"""One builder per environment on a host: concurrent runs wait for it instead of racing it.

Two runs that need the same environment at once -- two matrices, a run and a `build`, the
workers of a test suite, cluster jobs sharing the cache -- would otherwise build it twice
(a virtualenv into one folder, an image under one tag, a debootstrapped base), each paying
minutes of downloads and unpacking, and the second then throws away what the first made.
Instead the first takes an exclusive lock named for what it builds and the others wait on
it; once it is released they find the environment there and reuse it.
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
