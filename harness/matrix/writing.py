"""A matrix made in code, written as the file it is.

The portability grid, `upgrade` and the API's users make matrices in code. Each is checked by a
file's own rules first (nothing is written for a matrix that would be refused), then written as
YAML and loaded back from that file: a run records the matrix it ran (its path and sha256 in every
result), and a repro bundle and a Slurm task load it again -- a matrix that lived only in memory
could not be run twice the same way. This is the one place such a file is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import yaml

from harness.errors import MatrixError, UserError
from harness.index import releases
from harness.matrix.loading import Matrix, load, parse


def validated(raw: dict, path: Path, resolver: releases.Resolver | None = None) -> Matrix:
    """`raw` checked by a file's rules and expanded, nothing written; its problems a `MatrixError`
    naming `path` and the key."""
    if not isinstance(raw, dict):
        raise MatrixError(path, ["expected a mapping at the top level (environments:, workloads:, ...)"])
    return parse(raw, path, resolver=resolver)


def write(raw: dict, path: Path, resolver: Callable[[], releases.Resolver] = releases.Resolver) -> Matrix:
    """`raw` validated, written to `path` as YAML (atomically) and loaded from there; `resolver`
    makes the resolver of each pass (one that follows an earlier run's record, or the cache's)."""
    path = Path(path)
    validated(raw, path, resolver())
    try:
        text = yaml.safe_dump(raw, sort_keys=False, width=120)
    except yaml.YAMLError as exc:  # a value YAML cannot say (an object, a function)
        raise MatrixError(path, [f"a value cannot be written as YAML: {' '.join(str(exc).split())[:200]}"]) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the matrix there ({exc.strerror or exc})") from None
    return load(path, resolver=resolver())
