"""The harness in-process: the typed Python API the command line, the products (atlas,
portability, upgrade, watch) and users' notebooks, fixtures and CI scripts all call.

The command line is one client of it, as nox's sessions are of nox's API or pip's CLI of its
``operations/``: what a verb does with its parsed flags, a caller does with keyword arguments,
and gets back a typed value instead of a printed table::

    from harness import api

    m = api.load_matrix("matrices/smoke.yaml")
    run = api.run(m, results="results", engine="venv", only=["tf2.15/*"])
    for r in run.results:
        print(r.cell, r.status, r.metric("val_accuracy"))

A matrix may be built in code (`matrix_from_dict`): it is validated by the same rules as a file
and written out as the same YAML, so the run's record and a repro bundle name a real file.

Bad input raises `UserError` (a `MatrixError` for a matrix, naming the file and the key), the
same message the command line prints before it exits 2: never a traceback from deep inside.
A cell still runs in a process of its own (the process boundary of docs/explanation/design.md);
only the harness's own work is in-process. `exits` names the exit codes the verbs return.
"""

from harness.api.matrices import Matrix, load_matrix, matrix_from_dict, validate_matrix
from harness.api.operations import (
    Bisection,
    Judge,
    RunReport,
    bisect,
    board,
    build,
    diverge,
    engine,
    reduce,
    repro,
    run,
    submit,
)
from harness.api.upgrades import UpgradeReport, upgrade
from harness.api.views import read_results
from harness.errors import MatrixError, UserError
from harness.investigate.bisect_search import BAD, GOOD, SKIP, Verdict
from harness.results.result import Result

__all__ = [
    "BAD", "GOOD", "SKIP", "Bisection", "Judge", "Matrix", "MatrixError", "Result", "RunReport", "UpgradeReport",
    "UserError", "Verdict", "bisect", "board", "build", "diverge", "engine", "load_matrix", "matrix_from_dict",
    "read_results", "reduce", "repro", "run", "submit", "upgrade", "validate_matrix",
]
