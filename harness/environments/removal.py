"""Removing environments: the virtualenvs built from one uv cache, and that cache, without
pulling one from under a run that uses it. The one owner of removal -- the atlas's bounded run,
the portability grid's, a bisect's or an explanation's own disk bound all remove through here.

Why by uv cache: uv links a virtualenv's files to its cache, so removing one without the other
frees nothing. A run that works within a disk bound installs through a uv cache of its own
(`own_cache`), and when it is done removes exactly what was built from it (`built_from`) -- never
the same environment built from another cache, a user's run or a test suite's, which may be in
use. A venv another run holds (buildlock.unused) is kept, and said.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.environments import buildlock
from harness.environments.installer import CACHE_VARIABLE, MARKER
from harness.files.paths import cache_dir

__all__ = ["built_from", "footprint", "own_cache", "removed"]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def built_from(uv: Path) -> list[Path]:
    """The virtualenvs of the harness's cache installed from the uv cache `uv` (their marker says)."""
    found = []
    for marker in sorted((cache_dir() / "venvs").glob(f"*/{MARKER}")):
        try:
            if json.loads(marker.read_text()).get("uv_cache") == str(uv):
                found.append(marker.parent)
        except (OSError, ValueError):
            continue
    return found


def removed(venvs: list[Path], uv: Path, say: Callable[[str], None] = _stderr) -> list[Path]:
    """Virtualenvs and the uv cache they were installed from; returns the venvs removed. A venv
    another run uses (buildlock.unused: a run that found it there may have cells in it) is kept,
    and said; its files stay whole without the uv cache (they are hard links). Each other venv goes
    under its build lock (another run that wants it waits and then builds it again, never sees
    half of it)."""
    gone = []
    for venv in venvs:
        with buildlock.unused(venv) as free:
            if not free:
                say(f"kept {venv.name}: another run's cells use it")
                continue
            with buildlock.held(venv.name, venv):
                shutil.rmtree(venv, ignore_errors=True)
            gone.append(venv)
    shutil.rmtree(uv, ignore_errors=True)
    return gone


def footprint(*folders: Path) -> int:
    """Bytes on disk below the folders, each inode once (a virtualenv's files are its cache's)."""
    seen, total = set(), 0
    for folder in folders:
        for root, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


@contextlib.contextmanager
def using(uv: Path) -> Iterator[Path]:
    """Environments built in this block install through the uv cache `uv`: the variable every uv
    cache choice travels by (installer.CACHE_VARIABLE), set for the block and put back, so the
    processes the block starts -- warm launchers, a cluster's tasks -- inherit it."""
    before = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = str(uv)
    try:
        yield uv
    finally:
        if before is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = before


@contextlib.contextmanager
def own_cache(uv: Path, say: Callable[[str], None] = _stderr) -> Iterator[Path]:
    """A block within a disk bound: what it installs comes through the uv cache `uv` (`using`),
    and the virtualenvs built from it go with it when the block ends, however it ends. What the
    block measured stays in its results; a removed environment is built again when needed."""
    try:
        with using(uv):
            yield uv
    finally:
        removed(built_from(uv), uv, say)
