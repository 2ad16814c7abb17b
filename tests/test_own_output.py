"""The harness never takes its own output for the user's code (issue 54, item 1), run as a user runs
it: in the folder that holds the script and the matrix (``path: .``), so the folders the harness
writes lie inside the code folder. `reduce` used to copy its candidates into each next candidate
until a name was too long (a traceback at once: tests/test_reduce.py runs it so), and a record
`diverge` wrote changed the code's hash (tests/test_diverge.py). Here: output the user named
otherwise is still known as output to a later command, and an output folder that is the code
folder, or holds it, is one line, exit 2, for every command that copies a user's folder.

Real processes, real folders; cells on the local engine (the interpreter running the suite), so no
environment is built."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.files.outputroots import MARKER

from .conftest import harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"   # the local engine runs this interpreter
MATRIX = f"""\
name: np
environments:
  - {{name: np1, python: "{PYTHON}", env: {{SIDE: old}}}}
  - {{name: np2, python: "{PYTHON}", env: {{SIDE: new}}}}
workloads:
  - {{name: prep, script: prep.py, path: .}}
timeouts: {{wall: 60, progress: 60}}
"""
SCRIPT = """\
import os
print("total", sum([1, 2]))
if os.environ.get("SIDE") == "new":
    raise ValueError("the new side breaks")
"""


@pytest.fixture
def folder(tmp_path) -> Path:
    """A user's folder: the matrix and the script side by side, the matrix's `path: .`."""
    here = tmp_path / "project"
    here.mkdir()
    (here / "m.yaml").write_text(MATRIX)
    (here / "prep.py").write_text(SCRIPT)
    return here


def _in(folder: Path, *args: str, timeout: float = 300):
    return harness(*args, cwd=folder, timeout=timeout, env={"HARNESS_CACHE": str(folder.parent / "cache")})


def _result(run_folder: Path) -> dict:
    [path] = run_folder.rglob("result.json")
    return json.loads(path.read_text())


def test_output_named_otherwise_is_not_code_to_a_later_command(folder):
    """A run's results and a report's site, both named by the user, inside the code folder: a later
    run, whose options do not name the site, still finds the code unchanged and runs nothing again."""
    first = _in(folder, "run", "m.yaml", "--engine", "local", "--only", "np1/*", "--results", "runs")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = _result(folder / "runs")
    report = _in(folder, "report", "runs", "--out", "pages")
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    assert (folder / "pages" / MARKER).is_file() and (folder / "runs" / MARKER).is_file()
    again = _in(folder, "run", "m.yaml", "--engine", "local", "--only", "np1/*", "--results", "runs")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = _result(folder / "runs")
    assert after["code"]["sha256"] == before["code"]["sha256"] and after["started"] == before["started"], \
        again.stdout[-3000:]                        # the same code: the finished cell is kept, not run again


def _one_line_exit_2(proc, *named: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for text in named:
        assert text in proc.stderr, (text, proc.stderr)


@pytest.mark.parametrize("command", [
    ["run", "m.yaml", "--results", "."],
    ["run", "m.yaml", "--results", ".."],
    ["repro", "np1/*", "--matrix", "m.yaml", "--out", "."],
    ["bisect", "m.yaml", "--package", "numpy", "--good", "1.26.0", "--bad", "2.0.0", "--out", ".."],
    ["diverge", "m.yaml", "np1/", "np2/", "--out", ".", "--results", "../elsewhere"],
    ["reduce", "m.yaml", "np1/", "np2/", "--out", ".."],
    ["reduce", "m.yaml", "np1/", "np2/", "--out", "."],   # also holds its own results folder
    ["watch", "m.yaml", "--site", "."],
    ["run", "m.yaml", "--results", "again"],              # a link to the code folder, inside it
], ids=lambda c: " ".join(c[:1] + c[-2:]))
def test_an_output_folder_that_is_or_holds_the_code_folder_is_one_line_exit_2(folder, command):
    (folder / "again").symlink_to(folder, target_is_directory=True)
    before = sorted(os.listdir(folder))
    proc = _in(folder, *command, "--engine", "local")
    option = next(a for a in command if a.startswith("--") and a not in ("--matrix", "--package", "--good", "--bad"))
    _one_line_exit_2(proc, option)
    assert sorted(os.listdir(folder)) == before and not (folder.parent / MARKER).exists()   # nothing written
