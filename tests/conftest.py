"""Shared test helpers. Tests use real interpreters, real TensorFlow and a real
Docker engine; where one is missing the test is skipped with the reason,
unless HARNESS_REQUIRE_DOCKER=1 (set by CI), which turns that skip into a failure.

The suite runs on a worker per core and one more (pytest-xdist, ``-n auto --dist loadfile`` in pyproject.toml:
a file's tests on one worker, so a module's shared run is made once), so a test never looks at
what the whole host runs -- every container, every process -- but at its own: the helpers
below find a test's containers by the folders they mount."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["tests.suite_timing"]  # where the time went, at the end of every run


def as_from_a_terminal() -> None:
    """preexec_fn for a harness process a test will interrupt: SIGINT as a terminal gives it. A
    shell starts background jobs with SIGINT ignored, and a child inherits that, so a suite
    started that way would otherwise test a harness that cannot be interrupted at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def harness(*args: str, cwd: Path = ROOT, timeout: float = 1800, env: dict | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m harness ...`` as a user would, in a real process: from a terminal, so
    Ctrl-C reaches it whether or not the suite itself was started where SIGINT is ignored."""
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=as_from_a_terminal)
    if check and proc.returncode != 0:
        raise AssertionError(f"harness {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


MAX_WORKERS = 4


def _process_state() -> dict:
    """What a test's process hands on to every process it starts, and so to the next tests on
    this worker: signals blocked and ignored, variables, working folder, cgroup, limits."""
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed under it
        cwd = None
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = None
    return {"blocked signals": sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
            "signal handlers": {s.name: repr(signal.getsignal(s))
                                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)},
            "variables": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
            "working folder": cwd, "cgroup": cgroup,
            "limits": {n: resource.getrlimit(getattr(resource, n))
                       for n in ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE")}}


@pytest.fixture(autouse=True)
def _process_left_as_found():
    """A test leaves its worker's process as it found it. The suite runs many files' tests in one
    worker process, in an order that changes with the timings, and what a test changes there
    (a signal blocked or ignored, a variable, the folder, a limit) is inherited by every process
    the next tests start: a harness that cannot be interrupted, a cell that dies at once. Such a
    leak fails the test that made it, naming what changed, instead of a later, innocent one."""
    before = _process_state()
    yield
    after = _process_state()
    changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    if "variables" in changed:
        was, now = changed["variables"]
        changed["variables"] = {k: (was.get(k), now.get(k)) for k in set(was) | set(now) if was.get(k) != now.get(k)}
    assert not changed, f"the test left its process changed: {changed}"


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_no_temp(request, tmp_path_factory):
    """What a test file made under the suite's temporary folder goes when the file's tests are
    done and all passed (a failure's is kept to be read). Its tests' own folders go as each passes
    (``tmp_path_retention_policy``); this is for its shared ones (``tmp_path_factory``), which
    pytest keeps to the end of the session. Those hold virtualenvs and harness caches of their
    own, and a session that kept them all would need gigabytes of disk it never reads again."""
    base = tmp_path_factory.getbasetemp()
    before, failed = set(base.iterdir()), request.session.testsfailed
    yield
    if request.session.testsfailed == failed:
        for path in set(base.iterdir()) - before:
            shutil.rmtree(path, ignore_errors=True)


def pytest_configure(config) -> None:
    """Every harness cache the tests make (most make their own, to start empty) shares one uv cache:
    the suite's (``installer.CACHE_VARIABLE``), so a wheel is downloaded once for the whole suite
    and every virtualenv holds it as hard links to one copy. Set before any test starts, so no test
    changes it (``_process_left_as_found``)."""
    from harness.environments import installer
    from harness.files import paths
    os.environ.setdefault(installer.CACHE_VARIABLE, str(paths.cache_dir() / "uv"))


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto`: a worker per core and one more, at most MAX_WORKERS. A test's harness itself runs
    cells on every core, but part of the suite's time is spent waiting (on Slurm's queue, a
    timeout, Docker, the index): the extra worker uses the cores meanwhile. Beyond that, workers
    only queue for the same cores (and the disk)."""
    cores = len(os.sched_getaffinity(0))
    return max(1, min(cores + 1 if cores > 1 else 1, MAX_WORKERS))


@pytest.fixture(scope="session")
def docker_client():
    from harness.engines.docker import docker_client as connect
    from harness.errors import EngineUnavailable
    try:
        return connect()
    except EngineUnavailable as exc:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here: {exc}")
        pytest.skip(str(exc))


def containers_under(client, folder: Path | None = None, *, pid: int | None = None,
                     label: str = "tfkeras-harness", all: bool = True) -> list:
    """The harness's containers (cells, launchers; `label` narrows them) that belong to one test,
    whatever other tests run containers beside it: those that mount something under `folder` (the
    test's results folder, where a run stages what its containers mount), or those a harness with
    process id `pid` started (an engine the test made in its own process)."""
    root = os.path.realpath(folder) if folder is not None else None
    found = []
    import docker.errors  # the client's own errors: docker is imported where a test has a client

    for listed in client.containers.list(all=all, filters={"label": label}, sparse=True):
        try:   # inspected one by one: another test's container removed since the list is no leftover of this one
            container = client.containers.get(listed.id)
        except docker.errors.NotFound:
            continue
        if pid is not None and (container.labels or {}).get("tfkeras-harness.pid") == str(pid):
            found.append(container)
            continue
        if root is None:
            continue
        sources = [os.path.realpath(m.get("Source") or "/") for m in container.attrs.get("Mounts") or []]
        if any(s == root or s.startswith(root + os.sep) for s in sources):
            found.append(container)
    return found
