"""Results read back as typed values: every result.json below a folder, as `Result`s.

`Result` is the one reader of result.json (harness/results/result.py): its attributes are the
file's keys, and it answers what readers ask (``metric("val_accuracy")``, ``timing_of(...)``,
``met``, ``failure``). A file that is not a result (half-written, hand-edited, hostile) is left out
and told to `notes`, as ``harness report`` tells it, never raised from the middle of a walk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import UserError
from harness.matrix import Matrix
from harness.results.result import Result
from harness.results.store import read_all

__all__ = ["read_results"]


def read_results(results: str | Path = "results", matrix: Matrix | str | None = None, *,
                 notes: Callable[[str], None] | None = None) -> list[Result]:
    """The results below `results` (a results folder, a run's folder or one result.json), in path
    order; with `matrix` (a loaded matrix or its run's name), only that run's."""
    root = Path(results)
    if not root.exists():
        raise UserError(f"{root}: no such results folder")
    if matrix is not None:
        root = root / (matrix.name if isinstance(matrix, Matrix) else str(matrix))
        if not root.is_dir():
            raise UserError(f"{root}: no results of that matrix here")
    return [result for _, result in read_all([root], notes)]
