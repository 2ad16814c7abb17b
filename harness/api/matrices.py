"""Matrices for the API: read from a file, or built in code and written out as the file they are.

A matrix built in code passes the same validation as a file (`harness.matrix.parse`: every key
path, limit and name checked, one `MatrixError` naming them) and is then written as YAML and
loaded back from that file. Why a file: a run records the matrix it ran (its path and sha256 in
every result), a repro bundle and a Slurm task load it again, and a reader of the results can
open it -- a matrix that lived only in a notebook's memory could not be run twice the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from harness import matrix as matrix_mod
from harness.errors import MatrixError, UserError
from harness.index import releases
from harness.matrix import Matrix

__all__ = ["Matrix", "load_matrix", "matrix_from_dict", "resolver_for"]


def resolver_for(results: str | Path, *, refresh_releases: bool = False, offline: bool = False) -> releases.Resolver:
    """How a matrix's version ranges expand: as `results` recorded them (the same cells again),
    else from the release cache or the index; `refresh_releases` asks the index again,
    `offline` never does."""
    return releases.Resolver(Path(results), refresh=refresh_releases, offline=offline)


def load_matrix(path: str | Path, *, results: str | Path = "results", refresh_releases: bool = False,
                offline: bool = False) -> Matrix:
    """Read, validate and expand the matrix file at `path`, its ranges as `results` recorded them."""
    return matrix_mod.load(path, resolver=resolver_for(results, refresh_releases=refresh_releases, offline=offline))


def matrix_from_dict(raw: dict, path: str | Path, *, results: str | Path = "results",
                     refresh_releases: bool = False, offline: bool = False) -> Matrix:
    """A matrix built in code: `raw` is what the file's top level would hold (``environments``,
    ``workloads``, ...). It is validated first -- nothing is written for a matrix that would be
    refused -- then written to `path` as YAML and loaded from there; the user's code paths in it
    start from `path`'s folder, as a file's do."""
    path = Path(path)
    if not isinstance(raw, dict):
        raise MatrixError(path, ["expected a mapping at the top level (environments:, workloads:, ...)"])
    resolver = resolver_for(results, refresh_releases=refresh_releases, offline=offline)
    matrix_mod.parse(raw, path, resolver=resolver)  # the file's own rules, before a byte is written
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
    return matrix_mod.load(path, resolver=resolver_for(results, refresh_releases=refresh_releases, offline=offline))
