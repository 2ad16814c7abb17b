"""The harness's exit statuses reach a caller through nox as they do through ``python -m harness``.

nox turns every failing command into its own exit 1 (and with ``success_codes`` a 1 into 0), so a
CI job scripted on ``nox -s watch`` could never tell new changes (1) from a watch another one holds
(3) or from a matrix it cannot read (2). The sessions hand their process over to the harness
(``harness()`` in noxfile.py); these run the recipes' own commands, as docs/how-to/watch-releases.md
shows them, in a nox of the project's lock.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import exits

ROOT = Path(__file__).resolve().parent.parent
WATCHED = ROOT / "examples" / "watch-numpy" / "matrix.yaml"

pytest.importorskip("nox")


def nox(envdir: Path, session: str, *args: str) -> subprocess.CompletedProcess:
    """`nox -s SESSION -- ARGS` with the sessions' virtualenvs under `envdir` (one per session)."""
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir),
                           "-s", session, "--", *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_nox_passes_a_watchs_busy_and_bad_input_statuses_through(tmp_path):
    from harness.watch import history
    results = tmp_path / "results"
    where = history.folder(results, "watch-numpy")
    with history.locked(where, wait=False):   # another watch of this matrix holds it
        busy = nox(tmp_path / "nox", "watch", str(WATCHED), "--engine", "venv", "--results", str(results),
                   "--as-of", "2024-09-01")
    assert busy.returncode == exits.BUSY, busy.stdout[-2000:] + busy.stderr[-2000:]
    assert not list(where.glob("history*")), "a watch that found the lock held wrote nothing"
    bad = nox(tmp_path / "nox", "watch", str(tmp_path / "no-such-matrix.yaml"), "--results", str(results))
    assert bad.returncode == exits.USER_ERROR and "no-such-matrix.yaml" in bad.stdout + bad.stderr, \
        bad.stdout[-2000:] + bad.stderr[-2000:]


def test_install_only_installs_and_runs_nothing(tmp_path):
    """`nox -s watch --install-only` (CI's warm-up) must not start a watch, with or without arguments."""
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir",
                           str(tmp_path / "nox"), "-s", "diverge", "--install-only", "--", "m.yaml", "a", "b"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "python -m harness diverge" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
