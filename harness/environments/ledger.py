"""The cache's ledger: one line per environment built, and one per cell run.

Building environments is most of what a matrix costs the first time, and none of it is a
cell's result, so it is written down where the environments are kept: ``ledger.jsonl`` in
the harness cache (``paths.cache_dir()``), appended by every process that shares the cache.
Each line is a JSON object with ``kind`` (``build``), ``at`` (Unix time) and what that kind
says: ``engine``, ``environment`` (its name), ``seconds``. (What each build downloaded is
uv's to know: its cache, ``installer``, serves a file a second build needs again.) A ``cell``
line (``harness.run.lifecycle``) says what a cell's process cost the host -- ``seconds`` held,
of it ``starting`` (the interpreter and the stack's import) and ``first_epoch`` -- with its
``engine``, ``environment`` and ``status``: the fixed costs a run pays per process, summed.

It answers "where did the time go" for a run, for ``bench/`` and for the test suite's
timing table, without reading build logs. Where the caller names itself (``TAG_VARIABLE``: a CI
job, a test file), every line says so as ``tag``, so that the runs of many callers sharing one
cache can be told apart afterwards. A line is written with one ``write`` on a file
opened for appending, so lines of concurrent writers never interleave; the file is
opened without following a symbolic link, and a line that is not JSON is passed over.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from harness.files import ownfiles
from harness.files.paths import cache_dir

FILE = "ledger.jsonl"
TAG_VARIABLE = "HARNESS_LEDGER_TAG"  # copied into every line this process writes, when set
MAX_READ = 64 << 20  # bytes read at most: the ledger is a record, not something to trust blindly


def append(kind: str, folder: Path | None = None, **fields) -> None:
    """Add one line; never fails the build or download it records (a read-only cache, a full disk)."""
    folder = Path(folder) if folder else cache_dir()
    tag = os.environ.get(TAG_VARIABLE)
    if tag:
        fields = {**fields, "tag": tag[:200]}
    line = json.dumps({"kind": kind, "at": round(time.time(), 3), **fields}, sort_keys=True, default=str) + "\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = ownfiles.open_file(folder / FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except (OSError, ownfiles.NotOwn):  # not ours to write through (a link, a pipe): the line is skipped
        return
    try:
        os.write(fd, line.encode())
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def building(engine: str, environment: str) -> Iterator[dict]:
    """Time the block as one build of `environment` and write its line when the block ends
    without an error; the dict yielded gets the seconds, for the caller's own record."""
    timing: dict = {}
    started = time.monotonic()
    yield timing
    timing["seconds"] = round(time.monotonic() - started, 1)
    append("build", engine=engine, environment=environment, seconds=timing["seconds"])


def read(folder: Path | None = None, since: float | None = None) -> list[dict]:
    """The ledger's entries (those from `since` on, Unix time), oldest first; [] without one."""
    folder = Path(folder) if folder else cache_dir()
    try:
        fd = ownfiles.open_file(folder / FILE, os.O_RDONLY)
    except (OSError, ownfiles.NotOwn):
        return []
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_READ)
    finally:
        os.close(fd)
    out = []
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and (since is None or float(entry.get("at") or 0) >= since):
            out.append(entry)
    return out
