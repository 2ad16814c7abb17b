"""Entry points: ``nox -s matrix``, ``nox -s build``, ``nox -s repro``, ``nox -s report``, ``nox -s tests``,
``nox -s lint``.

Session virtualenvs are reused between runs, so a second ``nox -s matrix``
only checks its install and gets straight to the (already finished) cells.
"""

import os

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def matrix(session: nox.Session) -> None:
    """Run a matrix: nox -s matrix -- [MATRIX] [--engine auto|docker|venv] [--results DIR] ..."""
    session.install("-e", ".")
    args = session.posargs or ["matrices/smoke.yaml"]
    session.run("python", "-m", "harness", "run", *args)


@nox.session
def build(session: nox.Session) -> None:
    """Prepare a matrix's environments, GPU ones too, without running cells:
    nox -s build -- [MATRIX] [--engine E] [--only GLOB] [--export DIR]"""
    session.install("-e", ".")
    args = session.posargs or ["matrices/smoke.yaml"]
    session.run("python", "-m", "harness", "build", *args)


@nox.session
def repro(session: nox.Session) -> None:
    """Reproduce a cell: nox -s repro -- CELL_ID_OR_GLOB [--repeat N] [--engine E] [--out DIR] [--shell]
    [--results DIR]"""
    session.install("-e", ".")
    if not session.posargs:
        session.error("name the cell: nox -s repro -- CELL_ID_OR_GLOB (python -m harness list MATRIX shows ids)")
    if "--shell" in session.posargs or any(a.startswith("--command") for a in session.posargs):
        # the shell (or its command, or a script piped into it) owns the exit status: nox would turn
        # any failure into 1, so the harness replaces this process instead of running under it
        python = os.path.join(session.bin, "python")
        os.execv(python, [python, "-m", "harness", "repro", *session.posargs])
    session.run("python", "-m", "harness", "repro", *session.posargs)


@nox.session
def bisect(session: nox.Session) -> None:
    """The first release of a package where a cell changes: -- MATRIX --package P --good A --bad B."""
    session.install("-e", ".")
    if not session.posargs:
        session.error("usage: nox -s bisect -- MATRIX --package NAME --good OLD --bad NEW (or --range SPEC)")
    session.run("python", "-m", "harness", "bisect", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """Publish results: nox -s report -- [RESULTS...] [--out DIR]; or -- compare RUN_A RUN_B"""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "report", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite: real interpreters, real TensorFlow, a real Docker engine where one runs."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the host side; pyflakes' rules and vermin on the workloads, which must still parse on Python 3.5."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "harness", "tests", "bench", "noxfile.py")
    # The workloads run on Python 3.5-3.13: only rules that hold for any version (pyflakes: unused or
    # undefined names, syntax errors); vermin checks the syntax itself against 3.5.
    session.run("ruff", "check", "--isolated", "--select", "F,E9", "--target-version", "py37", "harness/workloads")
    session.run("vermin", "-t=3.5-", "--no-tips", "--violations", "--eval-annotations",
                "harness/workloads")
