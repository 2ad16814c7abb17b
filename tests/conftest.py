"""Shared test helpers. Tests use real interpreters, real TensorFlow and a real
Docker engine; where one is missing the test is skipped with the reason,
unless HARNESS_REQUIRE_DOCKER=1 (set by CI), which turns that skip into a failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def as_from_a_terminal() -> None:
    """preexec_fn for a harness process a test will interrupt: SIGINT as a terminal gives it. A
    shell starts background jobs with SIGINT ignored, and a child inherits that, so a suite
    started that way would otherwise test a harness that cannot be interrupted at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def harness(*args: str, cwd: Path = ROOT, timeout: float = 1800, env: dict | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m harness ...`` as a user would, in a real process."""
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"harness {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


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
