"""The README's set-up, as a newcomer runs it: its "Set up" block word for word, in a fresh
virtualenv, on a machine with Python and nothing of ours -- no uv on PATH, no Docker engine --
in a fresh copy of the project; then the README's first command, `nox -s matrix`, runs the smoke
matrix there. CI installs nox from the lock, uv included, so without this test nothing would ever
run the two lines a newcomer types first."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_smoke_real import EXPECTED, check_results

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def readme_block(heading: str) -> list[str]:
    """The commands of the first ```sh block under `heading` in the README, as written."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, f"README's '{heading}' has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def fresh_copy(dest: Path) -> Path:
    """What a clone of this checkout holds (its tracked files, and new ones git does not ignore),
    without its virtualenvs, results or caches."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def bare_path() -> str:
    """This machine's PATH without any folder that holds uv or nox (the suite's own virtualenvs do)."""
    keep = [d for d in os.environ["PATH"].split(os.pathsep)
            if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("uv", "nox"))]
    return os.pathsep.join(keep)


def test_the_readme_set_up_works_verbatim_without_uv_and_the_smoke_matrix_runs(tmp_path):
    setup, use = readme_block("Set up"), readme_block("Use")
    assert setup[0].startswith("pip install nox") and use[0] == "nox -s matrix", (setup, use)
    project = fresh_copy(tmp_path / "project")
    base = getattr(sys, "_base_executable", sys.executable)  # the interpreter, not the suite's virtualenv
    user = tmp_path / "user-venv"
    subprocess.run([base, "-m", "venv", str(user)], check=True, timeout=300)
    path = f"{user / 'bin'}{os.pathsep}{bare_path()}"
    assert shutil.which("uv", path=path) is None, "the newcomer's machine has no uv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "NOX_DEFAULT_VENV_BACKEND")}
    env.update(PATH=path, DOCKER_HOST=f"unix://{tmp_path / 'no-docker.sock'}")  # a machine without Docker

    def shell(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True,
                              timeout=1800)

    for line in setup:
        proc = shell(line)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "virtualenv" in (project / ".nox" / "matrix" / "pyvenv.cfg").read_text(), "made without uv"

    proc = shell(use[0])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "using virtualenvs" in proc.stdout + proc.stderr, "no Docker engine: the harness says so and goes on"
    check_results(project / "results", "venv", list(EXPECTED))
    again = shell(use[0])
    assert again.returncode == 0 and "3 of 3 cells already have results" in again.stdout, again.stdout[-2000:]
