"""`repro`: one command reproduces a cell N times with live logs, counts the
failures, and leaves a bundle whose run.sh reproduces it again on its own,
from a clean folder, with plain python or plain docker."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cells import Cell, Environment, Limits, Parallelism, Workload
from harness.engines.venv import VenvEngine
from harness.environments import interpreters
from harness.errors import UserError
from harness.investigate.repro import write_bundle
from harness.names import file_name

from .conftest import ROOT, harness

SEGFAULT = "tf2.15/fault-segfault/none-c1/b1/r0"


def _bundle(out):
    return out / file_name(SEGFAULT)


def test_repro_counts_failures_and_bundles_a_venv_recipe(tmp_path):
    out = tmp_path / "bundles"
    proc = harness("repro", "tf2.15/fault-segfault/*", "--matrix", "matrices/faults.yaml", "--repeat", "3",
                   "--engine", "venv", "--out", str(out), check=True)
    assert "3/3 attempts failed" in proc.stdout and "SIGSEGV" in proc.stdout
    # the live log: the cell's stderr as it comes, faulthandler's stack naming the frame the fault fired in
    live = [line for line in proc.stdout.splitlines() if line.lstrip().startswith("stderr |")]
    assert any("faults.py" in line and "_segfault" in line for line in live), proc.stdout[-3000:]
    bundle = _bundle(out)
    for name in ("run.sh", "spec.json", "README.md", "provenance.json", "environment/requirements.lock",
                 "workloads/run.py"):
        assert (bundle / name).exists(), name
    assert len(list((bundle / "attempts").glob("attempt-*/**/result.json"))) == 3
    assert "3/3 attempts failed" in (bundle / "README.md").read_text()

    clean = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(bundle, clean, ignore=shutil.ignore_patterns("attempts"))
    python = interpreters.find("3.11")[0]
    run = subprocess.run(["bash", "run.sh"], cwd=clean, capture_output=True, text=True, timeout=1800,
                         env={**os.environ, "PYTHON": python})
    assert run.returncode == 139, run.stdout + run.stderr[-3000:]
    assert "killed by signal 11 (SEGV)" in run.stdout
    assert "_segfault" in run.stderr, run.stderr[-3000:]  # the crash's stack reaches the user's terminal


def test_repro_bundle_runs_with_plain_docker(tmp_path, docker_client):
    from harness.engines.docker_build import find_cli
    out = tmp_path / "bundles"
    proc = harness("repro", SEGFAULT, "--matrix", "matrices/faults.yaml", "--engine", "docker", "--out", str(out),
                   check=True)
    assert "1/1 attempts failed" in proc.stdout
    clean = tmp_path / "elsewhere"
    shutil.copytree(_bundle(out), clean, ignore=shutil.ignore_patterns("attempts"))
    assert (clean / "environment" / "Dockerfile").exists()
    run = subprocess.run(["bash", "run.sh"], cwd=clean, capture_output=True, text=True, timeout=1800,
                         env={**os.environ, "DOCKER": find_cli()})
    assert run.returncode == 139, run.stdout + run.stderr[-3000:]
    assert "killed by signal 11" in run.stdout


def test_shell_opens_in_the_cells_environment(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "repro", SEGFAULT, "--matrix", "matrices/faults.yaml",
                           "--engine", "venv", "--out", str(tmp_path), "--shell"], cwd=ROOT,
                          input='python -c "import tensorflow as tf, workloads; print(\'TF\', tf.__version__)"\n',
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TF 2.15.0" in proc.stdout


def test_unknown_cell_is_a_clear_error():
    proc = harness("repro", "no-such-env/*", "--matrix", "matrices/faults.yaml", "--engine", "venv")
    assert proc.returncode == 2
    assert "no cell matches 'no-such-env/*'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [["--repeat", "0"]])
def test_bad_repeat_is_a_clear_error(argv):
    proc = harness("repro", SEGFAULT, "--matrix", "matrices/faults.yaml", "--engine", "venv", *argv)
    assert proc.returncode == 2 and "--repeat" in proc.stderr


def test_an_environment_that_cannot_be_had_still_leaves_a_bundle(tmp_path):
    (tmp_path / "m.yaml").write_text('name: unav\nenvironments: [{python: "3.11", tensorflow: "9.9.9"}]\n'
                                     "workloads: [{model: fault, fault: segfault}]\n")
    proc = harness("repro", "tf9.9.9/*", "--matrix", str(tmp_path / "m.yaml"), "--engine", "venv",
                   "--out", str(tmp_path / "b"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "1/1 attempts failed -- unavailable" in proc.stdout and "no run.sh" in proc.stdout
    bundle = next(p for p in (tmp_path / "b").iterdir() if p.is_dir())
    assert not (bundle / "run.sh").exists() and "unavailable" in (bundle / "README.md").read_text()
    from harness.engines.venv import VenvEngine
    from harness.matrix import load
    where = VenvEngine().location(load(tmp_path / "m.yaml").cells[0].environment)
    assert not where.with_name(where.name + ".building").exists(), "a failed install leaves no half venv"
    assert not where.exists()


# -- hostile values: run.sh is generated safely whatever validation lets through --------------
HOSTILE = "x\ntouch PWNED-newline\n#$(touch PWNED-subst)`touch PWNED-tick`'\"; touch PWNED-semi"
# `env:` values validation allows (one printable line): they reach run.sh as exports, quoted
VARIABLES = (("HOSTILE_A", "$(touch PWNED-env)`touch PWNED-env2`'\"; touch PWNED-env3 #"),
             ("HOSTILE_B", "'; touch PWNED-env4; echo '"), ("HOSTILE_C", "${IFS}$(id)\\$HOME"))


def _hostile_cell(env_name: str = f"env{HOSTILE}") -> Cell:
    """A cell with hostile names (validation refuses them, so it is built by hand) and the
    hostile values validation does allow: a pip marker string and a fault's message."""
    env = Environment(name=env_name, python="3.11",
                      packages=('six; os_name != "$(touch PWNED-pin)`touch PWNED-pin2`"',), env=VARIABLES)
    work = Workload(name=f"w{HOSTILE}", model="fault", params={"fault": "exception", "message": HOSTILE})
    return Cell(environment=env, workload=work, parallelism=Parallelism(), batch_size=1, epochs=1, repeat=0,
                limits=Limits(wall=300, progress=300))


def _named(folder: Path, prefix: str) -> list[str]:
    """Files and folders under `folder` whose name starts with `prefix`, passing over folders that
    vanish while they are walked (other tests' temp folders come and go beside this one's)."""
    return [os.path.join(top, name) for top, dirs, files in os.walk(folder) for name in dirs + files
            if name.startswith(prefix)]


def _check_no_side_effect(bundle, run: subprocess.CompletedProcess, *folders) -> None:
    assert run.returncode == 3, run.stdout + run.stderr[-3000:]  # the planted exception, nothing else
    assert '"outcome": "error"' in run.stdout, run.stdout
    for folder in folders:
        assert not _named(folder, "PWNED"), "a value from the matrix ran as a command"
    script = (bundle / "run.sh").read_text()
    reproduce = [line for line in script.splitlines() if line.startswith("# Reproduce")]
    assert len(reproduce) == 1 and "\\ntouch PWNED-newline\\n" in reproduce[0], "the comment stays one line"
    exports = {}
    for line in script.splitlines():
        words = shlex.split(line.rstrip(" \\")) if "HOSTILE_" in line and line != reproduce[0] else []
        exports.update(w.split("=", 1) for w in words if w.startswith("HOSTILE_"))
    assert exports == dict(VARIABLES), "each variable reaches the script as one quoted word, exactly"
    rest = "\n".join(line for line in script.splitlines() if "HOSTILE_" not in line and line != reproduce[0])
    assert "touch PWNED" not in rest, "no other value reaches the script but the comment"


def test_a_control_character_that_slips_past_validation_is_refused_not_written(tmp_path):
    cell = _hostile_cell()
    env = replace(cell.environment, env=(("V", "a\nb"),))
    with pytest.raises(UserError, match="control characters"):
        write_bundle(tmp_path / "bundle", replace(cell, environment=env), VenvEngine(), {"venv": ""}, [])
    assert not (tmp_path / "bundle" / "run.sh").exists()


def test_a_bundle_of_hostile_values_runs_without_side_effects_venv(tmp_path):
    cell = _hostile_cell()
    bundle = tmp_path / "bundle"
    write_bundle(bundle, cell, VenvEngine(), {"venv": ""}, [])
    assert subprocess.run(["bash", "-n", "run.sh"], cwd=bundle).returncode == 0
    python = interpreters.find("3.11")[0]
    run = subprocess.run(["bash", "run.sh"], cwd=bundle, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHON": python})
    _check_no_side_effect(bundle, run, tmp_path, ROOT)
    assert "six" in (bundle / "environment" / "requirements.txt").read_text()


def test_a_bundle_of_hostile_values_runs_without_side_effects_docker(tmp_path, docker_client):
    from rich.console import Console

    from harness.engines.docker import DockerEngine
    from harness.engines.docker_build import find_cli
    bare = Environment(name="bare", python="3.11")  # the planted faults' image: the cell needs no framework
    engine = DockerEngine(docker_client, console=Console(quiet=True))
    prepared = engine.prepare(bare, tmp_path / "build.log")
    cell = _hostile_cell()
    bundle = tmp_path / "bundle"
    write_bundle(bundle, cell, engine, prepared.provenance, [])
    assert subprocess.run(["bash", "-n", "run.sh"], cwd=bundle).returncode == 0
    lock = (bundle / "environment" / "requirements.txt").read_text()
    assert lock.startswith("# pip freeze of the environment") and "\npip==" in lock, "the image's own freeze"
    run = subprocess.run(["bash", "run.sh"], cwd=bundle, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "DOCKER": find_cli()})
    _check_no_side_effect(bundle, run, tmp_path, ROOT)
