"""A virtualenv a run uses is never removed under its cells: the run holds it in use from its
engine's prepare to its close, and a removal (a disk-bound run, a bisect's own uv cache) waits
for every run that holds it -- with real processes and real locks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.atlas import drive
from harness.cells import Environment
from harness.engines.venv import MARKER, VenvEngine
from harness.environments import buildlock

pytestmark = pytest.mark.quick

HOLDER = """
import sys
from pathlib import Path
from harness.environments import buildlock
use = buildlock.Use(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()   # until the test closes our stdin
"""


def _a_venv(folder: Path) -> Path:
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    return folder


def _taken(folder: Path) -> bool:
    """Whether another process holds the folder's in-use lock (tried from a process of its own:
    within one process a lock on a second descriptor would say nothing about the first)."""
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(1)")
    return subprocess.run([sys.executable, "-c", probe, str(buildlock.use_file(folder))]).returncode == 1


def test_a_removal_waits_for_the_run_that_uses_the_venv_and_says_so(tmp_path, capfd):
    venv = _a_venv(tmp_path / "venvs" / "py3.11-0123456789abcdef")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(venv)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "held"
        remover = threading.Thread(target=drive.removed, args=([venv], tmp_path / "uv"))
        remover.start()
        time.sleep(1.5)
        assert remover.is_alive() and (venv / "bin" / "python").exists()   # the run's cells still have it
        holder.stdin.close()
        remover.join(timeout=30)
        assert not remover.is_alive() and not venv.exists()
    finally:
        holder.kill()
        holder.wait()
    assert venv.name in capfd.readouterr().err   # it said what it waited for


def test_a_process_removing_what_it_used_itself_does_not_wait_on_itself(tmp_path):
    venv = _a_venv(tmp_path / "venvs" / "py3.11-fedcba9876543210")
    use = buildlock.Use(venv)
    done = threading.Thread(target=drive.removed, args=([venv], tmp_path / "uv"))
    done.start()
    done.join(timeout=30)
    assert not done.is_alive() and not venv.exists() and use.fd is None


def test_an_engine_holds_each_venv_it_prepared_until_it_closes(tmp_path):
    env = Environment("e", "3.11", "2.15.0")
    engine = VenvEngine(root=tmp_path / "venvs")
    where = _a_venv(engine.location(env))
    (where / MARKER).write_text(json.dumps({"venv": str(where)}))   # built: prepare reuses it
    assert not _taken(where)
    prepared = engine.prepare(env, tmp_path / "build.log")
    assert prepared.reused and _taken(where)
    engine.prepare(env, tmp_path / "build.log")                      # once per venv, however often prepared
    assert len(engine._uses) == 1
    engine.close()
    assert not _taken(where)
