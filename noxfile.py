"""Entry points: ``nox -s matrix``, ``nox -s build``, ``nox -s repro``, ``nox -s upgrade``, ``nox -s report``,
``nox -s tests``, ``nox -s lint``, ``nox -s docs``; for the project's own toolchain ``nox -s lock`` and
``nox -s tests-latest``.

Every session installs from ``lock.txt`` (``harness/toolchain/lockfile.py``): exact releases,
hash-checked, the same on every machine until ``nox -s lock`` moves them -- only
``tests-latest`` takes the newest releases, to see what the next lock would break.
Session virtualenvs are reused between runs, so a second ``nox -s matrix`` only checks its
install against the lock and gets straight to the (already finished) cells.
"""

import json
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from harness.toolchain import lockfile  # noqa: E402 - the standard library only: nox's interpreter has nothing else

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
# uv makes the sessions' virtualenvs and installs the lock into them, as the harness does its own
# environments (harness/environments/installer.py), where nox finds one (the uv nox's own lock installs beside it,
# or one on PATH); a plain `pip install nox` brings none, and then virtualenv and pip make them (nox's
# own dependency): the same lock, hash-checked, and the lock installs uv into the session for the harness
nox.options.default_venv_backend = "uv|virtualenv"
# uv reads no pip configuration: a CA bundle named for pip is given to uv the standard way
if os.environ.get("PIP_CERT") and not os.environ.get("SSL_CERT_FILE"):
    os.environ["SSL_CERT_FILE"] = os.environ["PIP_CERT"]


def install(session: nox.Session, *groups: str, project: bool = True) -> None:
    """The lock's `groups` for this session's Python, hash-checked, and nothing else; then, with
    `project`, the harness itself (editable, built by the lock's setuptools without fetching
    another). A reused virtualenv is brought back to the lock: a package the lock does not
    list is removed, and a version other than the lock's is an error naming it."""
    # run_install: these are install steps, done by `nox --install-only` too
    python = session.run_install("python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])",
                                 silent=True).strip()
    groups = (*groups, "build") if project else groups
    try:
        lock = lockfile.read()
        pins = lock.select(groups, python)
    except lockfile.LockError as exc:
        session.error(str(exc))
    requirements = Path(session.create_tmp()) / f"lock-{'-'.join(groups)}.txt"
    requirements.write_text(lock.requirements(groups, python))
    session.install("--require-hashes", "--no-deps", "--only-binary=:all:", "-r", str(requirements))
    if project:
        session.install("--no-deps", "--no-build-isolation", "-e", ".")
    installed = json.loads(session.run_install("python", "-I", "-c", lockfile.INSTALLED, silent=True))
    missing, other, extra = lockfile.differences(pins, installed)
    if extra:
        session.log(f"not in {lockfile.LOCK.name} for {', '.join(groups)}: removing {', '.join(extra)}")
        if session.venv_backend == "uv":
            session.run_install("uv", "pip", "uninstall", "--quiet", *extra)
        else:
            session.run_install("python", "-m", "pip", "uninstall", "--yes", "--quiet", *extra)
    if missing or other:
        session.error(f"this virtualenv does not hold {lockfile.LOCK.name}: " + "; ".join(missing + other))


def harness(session: nox.Session, *args: str) -> None:
    """Hand this process over to ``python -m harness ARGS`` in the session's virtualenv, so that its exit
    status reaches the caller unchanged: nox reports every failure as 1 (and with ``success_codes``
    a 1 as 0), while schedulers, CI jobs and scripts branch on the harness's own statuses -- 1 for
    changes or cells left, 2 for input to fix, 3 for a watch another one holds, 130 for an
    interruption (harness/exits.py). With ``--install-only`` nothing runs, as for ``session.run``."""
    if session.run("python", "-c", "", log=False) is None:  # None: --install-only, which runs nothing
        return
    python = os.path.join(session.bin, "python")
    env = {**os.environ, "VIRTUAL_ENV": str(session.env_dir),
           "PATH": os.pathsep.join([session.bin, os.environ.get("PATH", os.defpath)])}
    session.log("python -m harness " + " ".join(args))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(python, [python, "-m", "harness", *args], env)


@nox.session
def matrix(session: nox.Session) -> None:
    """Run a matrix: nox -s matrix -- [MATRIX] [--engine auto|docker|venv] [--results DIR] ..."""
    install(session, "runtime")
    harness(session, "run", *(session.posargs or ["matrices/smoke.yaml"]))


@nox.session
def build(session: nox.Session) -> None:
    """Prepare a matrix's environments, GPU ones too, without running cells:
    nox -s build -- [MATRIX] [--engine E] [--only GLOB] [--export DIR]"""
    install(session, "runtime")
    harness(session, "build", *(session.posargs or ["matrices/smoke.yaml"]))


@nox.session
def repro(session: nox.Session) -> None:
    """Reproduce a cell: nox -s repro -- CELL_ID_OR_GLOB [--repeat N] [--engine E] [--out DIR] [--shell]
    [--results DIR]"""
    install(session, "runtime")
    if not session.posargs:
        session.error("name the cell: nox -s repro -- CELL_ID_OR_GLOB (python -m harness list MATRIX shows ids)")
    # with --shell or --command, the shell's (or its command's) exit status: the harness passes it on
    harness(session, "repro", *session.posargs)


@nox.session
def watch(session: nox.Session) -> None:
    """Run what is new since the last watch of a matrix, record it, publish changes: -- MATRIX [--as-of DATE]."""
    install(session, "runtime")
    if not session.posargs:
        session.error("usage: nox -s watch -- MATRIX [--results DIR] [--as-of DATE] [--no-bisect]")
    # the exit status is the watch's own (1: new changes; 3: another watch holds it), for a CI schedule
    harness(session, "watch", *session.posargs)


@nox.session
def bisect(session: nox.Session) -> None:
    """The first release of a package where a cell changes: -- MATRIX --package P --good A --bad B."""
    install(session, "runtime")
    if not session.posargs:
        session.error("usage: nox -s bisect -- MATRIX --package NAME --good OLD --bad NEW (or --range SPEC)")
    harness(session, "bisect", *session.posargs)


@nox.session
def diverge(session: nox.Session) -> None:
    """Where two cells' models part, layer by layer: -- MATRIX CELL_A CELL_B [--engine venv]."""
    install(session, "runtime")
    if len(session.posargs) < 3:
        session.error("usage: nox -s diverge -- MATRIX CELL_A CELL_B [--rows N] [--epochs N] [--out DIR] [--json]")
    harness(session, "diverge", *session.posargs)


@nox.session
def reduce(session: nox.Session) -> None:
    """The smallest script that still breaks on one side only: -- MATRIX GOOD_CELL BAD_CELL (or CELL --package ...)."""
    install(session, "runtime")
    if len(session.posargs) < 2:
        session.error("usage: nox -s reduce -- MATRIX GOOD_CELL BAD_CELL, or MATRIX CELL --package P --good A --bad B")
    harness(session, "reduce", *session.posargs)


@nox.session
def upgrade(session: nox.Session) -> None:
    """How far a project's packages can move up: -- PROJECT --script FILE [--package NAME[==VERSION]]."""
    install(session, "runtime")
    harness(session, "upgrade", *session.posargs)


@nox.session
def verdict(session: nox.Session) -> None:
    """What a dependency bump does to a project: -- PROJECT --base REV [--head REV] --script FILE."""
    install(session, "runtime")
    harness(session, "verdict", *session.posargs)


@nox.session
def atlas(session: nox.Session) -> None:
    """The compatibility atlas: run what is missing, then publish: -- [MATRICES] [atlas run's options]."""
    install(session, "runtime")
    harness(session, "atlas", "run", "--publish", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """Publish results: nox -s report -- [RESULTS...] [--out DIR]; or -- compare RUN_A RUN_B"""
    install(session, "runtime")
    harness(session, "report", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite: real interpreters, real TensorFlow, a real Docker engine where one runs."""
    install(session, "runtime", "test", "docs")  # docs: tests/test_docs.py builds the site as `nox -s docs` does
    # The suite starts the harness some hundreds of times: where the machine says not to write
    # bytecode (PYTHONDONTWRITEBYTECODE), each start compiled the harness and its libraries again
    # (0.7 s of CPU against 0.3). Its own session may keep it; the cells never write theirs
    # outside their environments (harness/launch/cellenv.py).
    session.run("pytest", *session.posargs, env={"PYTHONDONTWRITEBYTECODE": ""})


DOCS_OUT = "build/docs"


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site from docs/ into build/docs, any warning an error (a broken link, a
    page left out of the nav): nox -s docs -- [--out DIR] [--serve]"""
    install(session, "docs", project=False)
    args = list(session.posargs)
    if "--serve" in args:
        session.run("mkdocs", "serve", "--strict", "--config-file", "mkdocs.yml")
        return
    out = args[args.index("--out") + 1] if "--out" in args else DOCS_OUT
    session.run("mkdocs", "build", "--strict", "--clean", "--config-file", "mkdocs.yml", "--site-dir", out)


# what runs inside the environments
IN_ENVIRONMENTS = ("harness/workloads", "harness/portability/scripts", "harness/portability/probe")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the host side; pyflakes' rules and vermin on the workloads, which must still parse on Python 3.5."""
    install(session, "lint", project=False)
    session.run("ruff", "check", "harness", "tests", "bench", "noxfile.py")
    # The workloads run on Python 3.5-3.13: only rules that hold for any version (pyflakes: unused or
    # undefined names, syntax errors); vermin checks the syntax itself against 3.5.
    session.run("ruff", "check", "--isolated", "--select", "F,E9", "--target-version", "py37", *IN_ENVIRONMENTS)
    session.run("vermin", "-t=3.5-", "--no-tips", "--violations", "--eval-annotations", *IN_ENVIRONMENTS)


@nox.session
def lock(session: nox.Session) -> None:
    """Remake lock.txt: nox -s lock -- [--as-of DATE] [--python X.Y ...] (every supported Python by default)."""
    try:
        lockfile.read()
    except lockfile.LockError as exc:  # the first lock, or a broken one: the ranges of pyproject.toml
        session.warn(f"{exc}; installing from pyproject.toml's ranges to make it")
        session.install("-e", ".")
    else:
        install(session, "runtime")
    session.run("python", "-m", "harness.toolchain.resolve", *session.posargs)


@nox.session(name="tests-latest")
def tests_latest(session: nox.Session) -> None:
    """The suite against the newest release of every dependency (not the lock); on a failure, which
    upstream release broke which test: nox -s tests-latest -- [PYTEST ARGS]"""
    session.install("--upgrade", "--upgrade-strategy", "eager", "-e", ".[test,docs]")
    session.run("python", "-m", "harness.toolchain.latest", *session.posargs)
