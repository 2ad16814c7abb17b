"""Folders the harness writes into: checked before anything is built, and
never left through a name.

Names are validated (``names``), but every place that joins a name onto a
root also checks the result, so that a name which slipped through -- a
future key, a hand-built cell -- still cannot write or delete outside the
results, the cache or the bundles. And an unusable output folder (a file, a
read-only filesystem, ``/proc``, a full disk) is one clear error at start-up,
not a traceback after an hour of image builds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.errors import UserError


def cache_dir() -> Path:
    """Where environments, bases and the warm caches are kept between runs."""
    explicit = os.environ.get("HARNESS_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tfkeras-harness"

MIN_FREE_BYTES = 64 << 20  # below this a cell's logs and results may not fit


def inside(root: Path, path: Path) -> Path:
    """`path`, once it is known to lie within `root` (both resolved, so '..' and
    symbolic links count); a UserError otherwise."""
    root_r, path_r = Path(root).resolve(), Path(path).resolve()
    if path_r != root_r and root_r not in path_r.parents:
        raise UserError(f"refusing to use {path}: it lies outside {root}")
    return Path(path)


def check_writable(folder: Path, what: str) -> Path:
    """Make sure `folder` exists (creating it) and takes a file; a UserError
    naming `what` (the option, e.g. '--results') otherwise."""
    folder = Path(folder)
    try:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{what} {folder}: is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-check-{os.getpid()}"
        with open(probe, "wb") as fh:
            fh.write(b"\0" * 4096)
            fh.flush()
            os.fsync(fh.fileno())
        probe.unlink()
    except OSError as exc:
        raise UserError(f"{what} {folder}: cannot write there ({exc.strerror or exc})") from None
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        raise UserError(f"{what} {folder}: only {free >> 20} MiB free on its filesystem "
                        f"(at least {MIN_FREE_BYTES >> 20} MiB needed)")
    return folder


def write_json(path: Path, data) -> None:
    """Write JSON atomically: a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: Path):
    """Parsed JSON, or None when the file is missing or not JSON (its shape is the caller's to check)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
