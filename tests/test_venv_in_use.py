"""A virtualenv a run uses is never removed under its cells: the run holds it in use from its
engine's prepare to its close, and a removal (a disk-bound run, a bisect's own uv cache) keeps a
venv any other run holds, and says so -- with real processes and real locks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cells import Environment
from harness.engines.venv import MARKER, VenvEngine
from harness.environments import buildlock, removal

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


def test_a_venv_another_run_uses_is_kept_and_said_and_removed_once_that_run_is_done(tmp_path, capfd):
    venv = _a_venv(tmp_path / "venvs" / "py3.11-0123456789abcdef")
    uv = tmp_path / "uv"
    uv.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(venv)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert removal.removed([venv], uv) == []
        assert (venv / "bin" / "python").exists()            # the run's cells still have it
        assert venv.name in capfd.readouterr().err            # and it is said
        holder.stdin.close()
        holder.wait(timeout=30)
    finally:
        holder.kill()
        holder.wait()
    assert removal.removed([venv], uv) == [venv] and not venv.exists()


def test_a_process_removing_what_it_used_itself_removes_it(tmp_path):
    venv = _a_venv(tmp_path / "venvs" / "py3.11-fedcba9876543210")
    use = buildlock.Use(venv)
    assert removal.removed([venv], tmp_path / "uv") == [venv] and not venv.exists() and use.fd is None


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
