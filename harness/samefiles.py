"""One copy on disk of a file that many virtualenvs hold.

The harness's virtualenvs differ in a pin or two and share the rest: a bisect over ten NumPy
releases builds ten environments holding the same JAX, a matrix holds one TensorFlow beside
three Keras releases. pip copies every file into every environment, and measured on this
project's own suite, half the bytes of its virtualenvs (11.6 of 24 GB) were files another one
already held -- the disk a suite or a user's cache fills first. So when a virtualenv is built,
each file of it the size of a library (``MIN_BYTES`` and more) becomes a hard link to one stored
copy (``<venvs>/.files/``) of the same content and mode, as uv and pnpm do with their stores.

This is safe for what the harness does with an environment: nothing writes into a built one (a
cell runs with ``PYTHONDONTWRITEBYTECODE``; pip replaces files, it never edits them), and a file
is only shared with another of the same bytes and permissions. Where the filesystem refuses a
link (another device, a link limit), the file simply stays a copy. A stored copy no environment
links to any more (its folder was removed) goes at the next build.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
from pathlib import Path

MIN_BYTES = 64 << 10   # smaller files are most of the count and little of the size
CHUNK = 1 << 20
STORE = ".files"


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """`dst` as a hard link to `src` (no second copy of its bytes), or a copy where the filesystem
    refuses a link; shutil.copytree's `copy_function` signature."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's content, read in chunks (the download cache checks its files with it too)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def share(folder: Path, store: Path) -> dict:
    """Replace each large regular file under `folder` with a hard link to the stored copy of
    the same content and mode, storing the ones seen first; returns what it did (files linked,
    bytes saved, files stored)."""
    linked = saved = stored = 0
    store.mkdir(parents=True, exist_ok=True)
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_size < MIN_BYTES or info.st_nlink > 1:
                continue
            key = f"{file_sha256(path)}-{stat.S_IMODE(info.st_mode):o}"
            kept = store / key[:2] / key
            try:
                kept.parent.mkdir(exist_ok=True)
                os.link(path, kept)            # the first of its content: stored as it is
                stored += 1
                continue
            except FileExistsError:
                pass
            except OSError as exc:
                if exc.errno in (errno.EXDEV, errno.EMLINK, errno.EPERM, errno.ENOTSUP):
                    continue
                raise
            try:
                if os.lstat(kept).st_size != info.st_size:   # not what its name says: leave both alone
                    continue
            except FileNotFoundError:
                continue
            tmp = f"{path}.share-{os.getpid()}"
            try:
                os.link(kept, tmp)
                os.replace(tmp, path)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                # ENOENT: another build's forget_unused took the stored copy meanwhile: keep this one
                if exc.errno in (errno.EXDEV, errno.EMLINK, errno.EPERM, errno.ENOTSUP, errno.ENOENT):
                    continue
                raise
            linked += 1
            saved += info.st_size
    return {"linked": linked, "bytes_saved": saved, "stored": stored}


def forget_unused(store: Path) -> int:
    """Remove the stored copies no environment links to any more; returns how many."""
    gone = 0
    if not store.is_dir():
        return 0
    for sub in store.iterdir():
        for path in sub.iterdir() if sub.is_dir() else ():
            with contextlib.suppress(OSError):
                if os.lstat(path).st_nlink == 1:
                    path.unlink()
                    gone += 1
    return gone
