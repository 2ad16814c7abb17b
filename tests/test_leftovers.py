"""Every process of a cell ends with the cell, on every engine.

A user's script that leaves something running -- a child in a session of its own (`setsid`), a
daemon made by a double fork, a child that ignores SIGTERM -- and then exits 0: after `run`
returns, no process carrying the test's unique token is left on the host, and the result says
what was ended and how. Real processes; the token is searched in every process's command line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.launch import cellgroup
from harness.results.store import iter_results

from .conftest import as_from_a_terminal, harness

# The leftover is a Python process whose command line carries the token (sleep would refuse it).
SCRIPT = '''\
import os
import signal
import subprocess
import sys
import time

how, token = sys.argv[1], sys.argv[2]
deaf = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if how == "deaf" else ""
# the token first: the report keeps a leftover's command line to 200 characters, and the
# interpreter's path before it is as long as the folders the cache lies in
sleeper = [sys.executable, "-c", "'%s'; import signal, time; %stime.sleep(977)" % (token, deaf)]
if how == "setsid":
    subprocess.Popen(["setsid"] + sleeper)
elif how == "daemon":  # the classic double fork: the grandchild's parent is gone at once
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
        os._exit(0)
    os.wait()
elif how == "deaf":
    subprocess.Popen(sleeper)
elif how in ("mem", "hog"):  # touches 120 MiB, or 600 MiB (more than the test's scope allows)
    blob = bytearray((120 if how == "mem" else 600) * 2**20)
    blob[::4096] = b"x" * len(blob[::4096])
elif how == "hang":  # escapes, then hangs: the cell is ended for no progress
    subprocess.Popen(["setsid"] + sleeper)
    time.sleep(0.5)
    time.sleep(600)
time.sleep(1.0)  # the leftover has started (and, if deaf, ignores SIGTERM) before the script ends
print("done")
'''

THIS_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the local engine's cells run on this interpreter


def _project(tmp: Path, hows: list[str], token: str, python: str = "3.11") -> Path:
    (tmp / "s").mkdir(parents=True, exist_ok=True)
    (tmp / "s" / "leave.py").write_text(SCRIPT)
    workloads = "".join(f"  - {{name: {how}, script: s/leave.py, args: [{how}, {token}]}}\n" for how in hows)
    (tmp / "m.yaml").write_text(f'environments: [{{python: "{python}"}}]\nworkloads:\n{workloads}'
                                "timeouts: {wall: 120, progress: 8}\n")
    return tmp / "m.yaml"


def _with_token(token: str) -> list[tuple[int, str]]:
    """Every live process on this host whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in argv and state != "Z":
            found.append((int(entry.name), argv.replace(b"\0", b" ").decode(errors="replace")))
    return found


@pytest.fixture
def token():
    mark = f"leftover-{uuid.uuid4().hex}"
    yield mark
    for pid, _ in _with_token(mark):  # never leave the test's own sleepers behind, whatever happened
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _results(folder: Path) -> dict[str, dict]:
    return {data["cell"].split("/")[1]: data for _, data in iter_results(folder)}


def _check(results: dict[str, dict], token: str) -> None:
    assert _with_token(token) == [], "a process of the cell outlived `run`"
    for how in ("setsid", "daemon", "deaf"):
        r = results[how]
        assert r["status"] == "ok", (how, r.get("error"))  # the cell's own exit says ok
        left = r["exit"]["leftovers"]
        mine = [p for p in left["processes"] if token in (p.get("argv") or "")]
        assert left["count"] >= 1 and len(mine) == 1, (how, left)
        assert left["note"], left
    deaf = [p for p in results["deaf"]["exit"]["leftovers"]["processes"] if token in (p.get("argv") or "")]
    assert deaf[0]["signal"] == "SIGKILL"  # it ignored SIGTERM: the grace ran out
    setsid = [p for p in results["setsid"]["exit"]["leftovers"]["processes"] if token in (p.get("argv") or "")]
    assert setsid[0]["signal"] == "SIGTERM"


@pytest.mark.parametrize("cgroup", ["auto", "off"])
def test_what_a_script_leaves_running_ends_with_its_cell_on_venvs(tmp_path, token, cgroup):
    """venv engine, fresh cells: with the host's cgroup v2 where it has one, and with the
    subreaper alone (HARNESS_CGROUP=off)."""
    matrix = _project(tmp_path, ["setsid", "daemon", "deaf"], token)
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"), timeout=600,
                   env={"HARNESS_CGROUP": cgroup})
    results = _results(tmp_path / "r")
    assert set(results) == {"setsid", "daemon", "deaf"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check(results, token)
    memory = results["setsid"]["exit"]["memory"]
    if cgroup == "off":
        assert "HARNESS_CGROUP=off" in memory["unavailable"]
    else:  # a figure from the cgroup, or `unavailable` with the reason: never both, never neither
        assert ("peak_bytes" in memory) != ("unavailable" in memory), memory


def test_what_a_script_leaves_running_ends_with_its_cell_on_the_local_engine(tmp_path, token):
    matrix = _project(tmp_path, ["setsid", "daemon", "deaf"], token, python=THIS_PYTHON)
    proc = harness("run", str(matrix), "--engine", "local", "--python", f"{THIS_PYTHON}={sys.executable}",
                   "--results", str(tmp_path / "r"), timeout=600)
    results = _results(tmp_path / "r")
    assert set(results) == {"setsid", "daemon", "deaf"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check(results, token)


@pytest.fixture
def delegated_scope():
    """A new cgroup v2 beside this test's own, offered the memory controller and capped at 400 MiB:
    what `systemd-run --scope -p Delegate=yes -p MemoryMax=400M` gives a command. Made only where
    this test may (a host or container whose cgroup tree is this user's); skipped elsewhere."""
    own, why = cellgroup.own_cgroup()
    if own is None:
        pytest.skip(f"no cgroup v2 for this test: {why}")
    offered = (own / "cgroup.controllers").read_text().split()
    parent = own.parent
    if "memory" not in offered or not (parent / "cgroup.procs").is_file() or not os.access(parent, os.W_OK):
        pytest.skip(f"this host does not delegate a cgroup v2 memory controller beside {own}")
    scope = parent / f"harness-test-{uuid.uuid4().hex[:12]}"
    scope.mkdir()
    (scope / "memory.max").write_text(str(400 * 2**20))
    if (scope / "memory.swap.max").is_file():  # the cap is the kernel's OOM, not a slow swap
        (scope / "memory.swap.max").write_text("0")
    yield scope
    for leaf in sorted(scope.iterdir(), reverse=True):  # the harness's own leaf stays until it is gone
        if leaf.is_dir():
            cellgroup.CellGroup(leaf).kill()
            cellgroup.CellGroup(leaf).remove()
    cellgroup.CellGroup(scope).kill()
    cellgroup.CellGroup(scope).remove()


def test_a_cells_peak_memory_and_oom_kill_come_from_its_cgroup(tmp_path, token, delegated_scope):
    """Started alone in a cgroup with the memory controller delegated, the harness gives each cell
    a cgroup with it: the result carries the cell's own peak memory, and a cell the kernel killed
    for memory is `oom` from the cgroup's count, while its neighbours are not."""
    matrix = _project(tmp_path, ["mem", "hog", "setsid"], token, python=THIS_PYTHON)
    procs = str(delegated_scope / "cgroup.procs")

    def enter_scope() -> None:  # the harness is born alone in the scope, as systemd-run starts it
        with open(procs, "w") as f:
            f.write("0")

    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "local", "--jobs", "1",
                           "--python", f"{THIS_PYTHON}={sys.executable}", "--results", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=600, preexec_fn=enter_scope,
                          cwd=Path(__file__).resolve().parent.parent)
    results = _results(tmp_path / "r")
    assert set(results) == {"mem", "hog", "setsid"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    memory = {name: r["exit"]["memory"] for name, r in results.items()}
    assert memory["mem"].get("source") == "cgroup v2", memory
    assert memory["mem"]["peak_bytes"] >= 120 * 2**20, memory
    assert memory["mem"]["peak_bytes"] - memory["setsid"]["peak_bytes"] >= 90 * 2**20, memory
    assert memory["mem"]["oom_kills"] == 0 and memory["setsid"]["oom_kills"] == 0, memory
    assert results["hog"]["status"] == "oom" and memory["hog"]["oom_kills"] >= 1, (results["hog"], memory)
    assert results["mem"]["status"] == results["setsid"]["status"] == "ok"
    assert _with_token(token) == []
    made = sorted(c.name for c in delegated_scope.iterdir() if c.is_dir())
    assert [n for n in made if not n.startswith(cellgroup.MAIN_PREFIX)] == [], made  # each cell's cgroup removed


def test_a_hung_cell_takes_what_it_started_with_it(tmp_path, token):
    """A cell ended for no progress: its escaped `setsid` child ends too."""
    matrix = _project(tmp_path, ["hang"], token)
    harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"), timeout=600)
    assert _results(tmp_path / "r")["hang"]["status"] == "timeout"
    assert _with_token(token) == []


def test_an_interrupted_run_leaves_no_process_behind(tmp_path, token):
    """Ctrl-C while a cell's escaped child runs: nothing with the token survives the harness."""
    matrix = _project(tmp_path, ["hang"], token)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "venv",
                             "--results", str(tmp_path / "r")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=as_from_a_terminal,
                            cwd=Path(__file__).resolve().parent.parent)
    deadline = time.monotonic() + 120
    while not _with_token(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _with_token(token), "the cell never started its child"
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    time.sleep(0.5)
    assert _with_token(token) == []


def test_what_a_script_leaves_running_ends_with_its_container(tmp_path, token, docker_client):
    matrix = _project(tmp_path, ["setsid", "daemon", "deaf"], token)
    proc = harness("run", str(matrix), "--engine", "docker", "--results", str(tmp_path / "r"), timeout=900)
    results = _results(tmp_path / "r")
    assert set(results) == {"setsid", "daemon", "deaf"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check(results, token)
    assert "unavailable" in results["deaf"]["exit"]["memory"]


def test_the_subreaper_ends_as_its_cell_did(tmp_path):
    """The process between the harness and the cell hands on the cell's own ending: an exit
    status, or the signal that killed it (a SIGSEGV still reads as one)."""
    workloads = Path(__file__).resolve().parent.parent / "harness"
    env = {**os.environ, "PYTHONPATH": str(workloads)}

    def reaped(*cmd: str) -> int:
        return subprocess.run([sys.executable, "-m", "workloads.reaper", str(tmp_path / "r.json"), "1", "--", *cmd],
                              env=env).returncode

    assert reaped("sh", "-c", "exit 7") == 7
    assert reaped("sh", "-c", "kill -SEGV $$") == -signal.SIGSEGV
    assert json.loads((tmp_path / "r.json").read_text())["processes"] == []

