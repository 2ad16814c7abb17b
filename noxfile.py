"""Entry points: ``nox -s matrix``, ``nox -s repro``, ``nox -s report``, ``nox -s tests``, ``nox -s lint``.

Session virtualenvs are reused between runs, so a second ``nox -s matrix``
only checks its install and gets straight to the (already finished) cells.
"""

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
def repro(session: nox.Session) -> None:
    """Reproduce one cell and write a bundle (not built yet: see the README's roadmap)."""
    session.error("nox -s repro is not implemented yet: one-command reproduction is still an open issue")


@nox.session
def report(session: nox.Session) -> None:
    """Print the compatibility table of results: nox -s report -- [RESULTS...]"""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "report", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite: real interpreters, real TensorFlow, a real Docker engine where one runs."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the host side; vermin proves the workloads still parse on Python 3.5."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "harness", "tests", "noxfile.py")
    session.run("vermin", "-t=3.5-", "--no-tips", "--violations", "--eval-annotations",
                "harness/workloads")
