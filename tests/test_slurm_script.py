"""The generated Slurm scripts never execute a value (no Slurm needed: a stand-in ``sbatch``).

Every value that reaches ``array-*.sh`` or sbatch's command line -- the results folder, the
working folder, the interpreter, the matrix file's name, sbatch arguments, partition, account --
is checked where it enters and quoted in the script. Here the values are hostile: shell
substitutions, quotes, semicolons, spaces. A stand-in ``sbatch`` on PATH records its arguments
and runs the script with bash, as a node would; the interpreter it names is a stand-in too
(with a hostile file name) that records how it was called. Nothing may run but that.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import socketserver
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from .conftest import ROOT, harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

HOSTILE = "x $(touch PWNED-1) `touch PWNED-2` 'q' \"d\" ; touch PWNED-3 #"
MATRIX = """name: hostile
environments:
  - {python: "3.11", tensorflow: "2.15.0"}
workloads:
  - {model: fault, fault: exception}
batch_sizes: [1]
slurm:
  python: %s
  sbatch_args: ["--comment=$(touch PWNED-4) `touch PWNED-5`; touch PWNED-6"]
"""

SBATCH = """#!/bin/bash
# a stand-in sbatch: note the arguments, run the script as a node would, answer a job id
printf '%%s\\n' "$@" > {log}
SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=42 bash "${{@: -1}}" > {out} 2>&1
echo 42
"""
PYTHON = """#!/bin/bash
printf '%%s\\n' "$@" > {log}
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def stand_ins(tmp_path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    _executable(bin_dir / "sbatch", SBATCH.replace("%%", "%").format(log=shlex.quote(str(logs / "sbatch.args")),
                                                                      out=shlex.quote(str(logs / "task.out"))))
    python = _executable(tmp_path / f"python {HOSTILE}", PYTHON.replace("%%", "%").format(
        log=shlex.quote(str(logs / "python.args"))))
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "logs": logs, "python": python}


def _pwned(*roots: Path) -> list[Path]:
    """Files a hostile value would have made, anywhere under `roots`. Walked with os.walk, which
    passes over a folder that goes while it looks: other workers' tests make and remove theirs
    under the same checkout (nox's temporary folder) meanwhile."""
    return [Path(folder) / name for root in roots for folder, _, files in os.walk(root)
            for name in files if name.startswith("PWNED-")]


def test_hostile_values_are_quoted_and_nothing_runs_but_the_task(tmp_path, stand_ins):
    here = tmp_path / f"cwd {HOSTILE}"
    here.mkdir()
    matrix = here / f"m {HOSTILE.replace('/', '')}.yaml"
    matrix.write_text(MATRIX % json.dumps(str(stand_ins["python"])))  # a JSON string is a YAML string
    results = tmp_path / f"results {HOSTILE}"
    proc = harness("run", str(matrix), "--engine", "local", "--results", str(results), "--executor", "slurm",
                   "--sbatch-arg=--qos=$(touch PWNED-7)", cwd=here,
                   env={"PATH": stand_ins["PATH"], "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _pwned(tmp_path, ROOT) == [], "a value was executed"

    [sub] = list((results / "hostile" / ".slurm").iterdir())
    script = sub / "array-0.sh"
    argv = (stand_ins["logs"] / "sbatch.args").read_text().splitlines()
    assert argv == ["--parsable", "--comment=$(touch PWNED-4) `touch PWNED-5`; touch PWNED-6",
                    "--qos=$(touch PWNED-7)", str(script)], "sbatch gets each argument as one word"
    called = (stand_ins["logs"] / "python.args").read_text().splitlines()
    assert called == ["-m", "harness.run.executors.slurm", "task", str(sub), "0"], \
        (stand_ins["logs"] / "task.out").read_text()

    directives = {}
    for line in script.read_text().splitlines():
        if line.startswith("#SBATCH "):
            [word] = shlex.split(line[len("#SBATCH "):])  # Slurm reads #SBATCH lines with the shell's quoting
            name, _, value = word.partition("=")
            directives[name] = value
    assert directives["--chdir"] == str(here.resolve())
    assert directives["--output"] == str(sub / "logs" / "%A_%a.out")


@pytest.mark.parametrize("args,error", [
    (["--partition", "debug\ntouch PWNED"], "--partition expects a Slurm name"),
    (["--partition", "a b"], "--partition expects a Slurm name"),
    (["--account", "$(touch PWNED)"], "--account expects a Slurm name"),
    (["--sbatch-arg=--wrap=touch PWNED"], "the harness sets --wrap itself"),
    (["--sbatch-arg=--output=/tmp/x"], "the harness sets --output itself"),
    (["--sbatch-arg=qos=long"], "expects an sbatch option such as '--qos=long'"),
    (["--sbatch-arg=--comment=a\nb"], "expects an sbatch option such as '--qos=long'"),
    (["--throttle", "0"], "--throttle expects at least 1, got 0"),
])
def test_hostile_flags_are_one_clear_error(tmp_path, stand_ins, args, error):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX % "python3")
    proc = harness("run", str(matrix), "--engine", "local", "--results", str(tmp_path / "r"), "--executor", "slurm",
                   *args, env={"PATH": stand_ins["PATH"]})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert error in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (stand_ins["logs"] / "sbatch.args").exists(), "nothing was submitted"
    assert _pwned(tmp_path) == []


@pytest.mark.parametrize("key,value,error", [
    ("partition", '"gpu\\nx"', "slurm.partition: expected a Slurm name"),
    ("account", '"a;b"', "slurm.account: expected a Slurm name"),
    ("python", '"/usr/bin/python3\\nrm -rf ~"', "slurm.python: "),
    ("sbatch_args", '["--wrap=id"]', "slurm.sbatch_args[0]: "),
    ("time_margin", ".inf", "slurm.time_margin: expected seconds >= 0, got inf"),
    ("time_margin", "1" + "0" * 400, "slurm.time_margin: expected at most 604800 seconds (a week), got 1000"),
    ("throttle", "0", "slurm.throttle: expected at least 1, got 0"),
    ("mem", '"1g\\n"', "slurm.mem: expected a size"),
])
def test_hostile_matrix_values_are_one_clear_error(tmp_path, key, value, error):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.split("slurm:")[0] + f"slurm:\n  {key}: {value}\n")
    proc = harness("list", str(matrix))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert error in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_results_folder_with_a_newline_cannot_reach_a_script(tmp_path, stand_ins):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX % "python3")
    proc = harness("run", str(matrix), "--engine", "local", "--results", str(tmp_path / "r\ntouch PWNED"),
                   "--executor", "slurm", env={"PATH": stand_ins["PATH"]})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot be handed to Slurm" in proc.stderr and "r\\ntouch PWNED" in proc.stderr, proc.stderr
    assert not (stand_ins["logs"] / "sbatch.args").exists()


DERIVE_MATRIX = """name: derive
environments:
  - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
workloads:
  - {model: fault, fault: exception}
batch_sizes: [1]
expect:
  - {workload: fault-exception, status: error}
"""


def test_a_task_rebuilds_a_bisect_cell_only_from_an_entry_the_harness_wrote(tmp_path):
    """`bisect --executor slurm` submits cells that are not the matrix's own; the task rebuilds
    each from derived.json with the search's own function -- and refuses an entry of another
    shape, one whose base is not in the matrix, or one that rebuilds another cell."""
    from harness import matrix
    from harness.matrix import release_cells
    from harness.run.executors.slurm.task import _derived

    (tmp_path / "m.yaml").write_text(DERIVE_MATRIX)
    m = matrix.load(tmp_path / "m.yaml")
    base = m.cells[0]
    cell = release_cells.derived_cell(base, "numpy", "1.26.4", "2024-02-06T00:00:00Z", 1)
    assert cell.id != base.id and cell.environment.uploaded_before == "2024-02-06T00:00:00Z"
    assert cell.expect is None, "a search judges values only; the base's status rule is dropped"
    good = release_cells.derivation(cell, base, "numpy", "1.26.4")
    sub = tmp_path / "sub"
    sub.mkdir()

    def rebuilt(entry):
        (sub / "derived.json").write_text(json.dumps({cell.id: entry}))
        return _derived(sub, m, cell.id)

    assert rebuilt(good) == cell
    assert _derived(sub, m, "not/listed/here/b1/r0") is None
    hostile = [[], "x", {**good, "base": 3}, {**good, "package": ""}, {**good, "version": "1.26.4\n; rm -rf ~"},
               {**good, "cutoff": "yesterday"}, {**good, "cutoff": 5}, {**good, "repeat": -1},
               {**good, "repeat": True}, {k: v for k, v in good.items() if k != "version"}]
    for entry in hostile:
        why = rebuilt(entry)
        assert isinstance(why, str) and "not one the harness wrote" in why, (entry, why)
    assert "is not in the matrix" in rebuilt({**good, "base": "tf2.15/other/none-c1/b1/r0"})
    assert "rebuilds" in rebuilt({**good, "version": "1.26.3"})
    (sub / "derived.json").write_text("[1, 2")
    assert _derived(sub, m, cell.id) is None  # unreadable: the cell is simply not listed


class _BrokenEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A Docker engine that answers its ping and version, then fails every other request: what a
    node's engine looks like to a task whose set-up meets another run's removals, or a daemon in
    trouble. Served for real on a Unix socket; docker-py talks to it as to dockerd."""

    daemon_threads = True

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            path = self.path.split("?")[0]
            if path.endswith("/_ping"):
                body, code, kind = b"OK", 200, "text/plain"
            elif path.endswith("/version"):
                body, code, kind = json.dumps({"ApiVersion": "1.41", "Version": "20.10.24"}).encode(), 200, \
                    "application/json"
            else:
                body, code, kind = json.dumps({"message": "planted engine fault"}).encode(), 500, "application/json"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_DELETE = do_HEAD = do_GET

        def log_message(self, *args):
            pass

        def address_string(self):  # a Unix socket has no host to name
            return "engine"


def test_a_task_whose_engine_set_up_raises_records_its_cell_as_the_harness_fault(tmp_path, stand_ins):
    """No cell is lost to a fault of the harness's own code: a node whose Docker engine fails the
    task's engine set-up (its list of leftover containers) records the cell as an `error` of kind
    harness, with the traceback in the cell's harness.log -- not a missing result -- and the next
    run takes the cell again."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.split("slurm:")[0] + f"slurm:\n  python: {json.dumps(sys.executable)}\n")
    results = tmp_path / "results"
    # submitted as it is on a host without an engine; the node's engine is Docker, and it is broken
    no_run = stand_ins["PATH"].split(os.pathsep)[0] + "/sbatch"
    _executable(Path(no_run), "#!/bin/bash\necho 42\n")
    proc = harness("run", str(matrix), "--engine", "local", "--results", str(results), "--executor", "slurm",
                   env={"PATH": stand_ins["PATH"], "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [sub] = list((results / "hostile" / ".slurm").iterdir())
    meta = json.loads((sub / "submission.json").read_text())
    (sub / "submission.json").write_text(json.dumps({**meta, "engine": "docker"}))

    # a Unix socket's path is at most 107 bytes: a deep pytest tmp_path (CI's own) is longer, /tmp is not
    socket_dir = Path(tempfile.mkdtemp(prefix="engine-", dir="/tmp"))
    socket_path = socket_dir / "engine.sock"
    server = _BrokenEngine(str(socket_path), _BrokenEngine.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    docker_cli = _executable(tmp_path / "docker", "#!/bin/bash\necho 20.10.24\n")
    try:
        task = subprocess.run(["bash", str(sub / "array-0.sh")], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "42",
                                   "DOCKER_HOST": f"unix://{socket_path}", "HARNESS_DOCKER_CLI": str(docker_cli),
                                   "PYTHONPATH": str(ROOT)})
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert task.returncode == 0, task.stdout + task.stderr
    [folder] = [p.parent for p in (results / "hostile").rglob("result.json")]
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "error" and result["error"]["kind"] == "harness", result
    assert "APIError" in result["error"]["type"] and "the harness's own code" in result["reason"]
    assert "remove_leftovers" in (folder / "harness.log").read_text(), "the traceback is kept beside the result"

    from harness import matrix as matrix_mod
    from harness.results.store import ResultStore
    [cell] = matrix_mod.load(matrix).cells
    assert ResultStore(results, "hostile").needs_run(cell), "a harness fault says nothing of the stack: run again"
