"""Matrices for the API: read from a file, or built in code and written out as the file they are.

A matrix built in code passes the same validation as a file (`harness.matrix.parse`: every key
path, limit and name checked, one `MatrixError` naming them) and is then written as YAML and
loaded back from that file. Why a file: a run records the matrix it ran (its path and sha256 in
every result), a repro bundle and a Slurm task load it again, and a reader of the results can
open it -- a matrix that lived only in a notebook's memory could not be run twice the same way.
"""

from __future__ import annotations

from pathlib import Path

from harness import matrix as matrix_mod
from harness.index import releases
from harness.matrix import Matrix, writing

__all__ = ["Matrix", "load_matrix", "matrix_from_dict", "resolver_for", "validate_matrix"]


def resolver_for(results: str | Path | None, *, refresh_releases: bool = False,
                 offline: bool = False) -> releases.Resolver:
    """How a matrix's version ranges expand: as `results` recorded them (the same cells again),
    else from the release cache or the index; `results=None`: from the cache or the index alone
    (a matrix made afresh for each run, as the portability grid's and upgrade's own, has no
    record to follow); `refresh_releases` asks the index again, `offline` never does."""
    return releases.Resolver(Path(results) if results is not None else None, refresh=refresh_releases,
                             offline=offline)


def load_matrix(path: str | Path, *, results: str | Path = "results", refresh_releases: bool = False,
                offline: bool = False) -> Matrix:
    """Read, validate and expand the matrix file at `path`, its ranges as `results` recorded them."""
    return matrix_mod.load(path, resolver=resolver_for(results, refresh_releases=refresh_releases, offline=offline))


def validate_matrix(raw: dict, path: str | Path, *, results: str | Path | None = "results",
                    refresh_releases: bool = False, offline: bool = False) -> Matrix:
    """`raw` checked by a file's rules and expanded, nothing written: what `matrix_from_dict`
    would make of it, for code that needs a matrix's expanded names (the stacks a version range
    becomes) before it can finish the matrix -- the portability grid names a reader per writer
    stack. Its problems are a `MatrixError` naming `path` and the key."""
    return writing.validated(raw, Path(path), resolver_for(results, refresh_releases=refresh_releases,
                                                           offline=offline))


def matrix_from_dict(raw: dict, path: str | Path, *, results: str | Path | None = "results",
                     refresh_releases: bool = False, offline: bool = False) -> Matrix:
    """A matrix built in code: `raw` is what the file's top level would hold (``environments``,
    ``workloads``, ...). It is validated first -- nothing is written for a matrix that would be
    refused -- then written to `path` as YAML and loaded from there; the user's code paths in it
    start from `path`'s folder, as a file's do."""
    return writing.write(raw, Path(path), lambda: resolver_for(results, refresh_releases=refresh_releases,
                                                                offline=offline))
