"""A bundle whose environment needed `force:` replays from an empty folder: run.sh installs the
freeze without the forced pins, then the forced pins with --no-deps, as the environment was
made -- never the raw freeze, which holds a set pip refuses. Cheap: requests with an urllib3
older than it allows, and a planted segfault that fires before any third-party import. The
same replay on Keras 2.2.4 forced onto TF 2.15 is in tests/test_held_out.py."""

from __future__ import annotations

import os
import shutil
import subprocess

from rich.console import Console

from harness.cells import Cell, Environment, Limits, Parallelism, Workload
from harness.engines.venv import VenvEngine
from harness.environments import interpreters
from harness.investigate import repro
from harness.matrix import Matrix

FORCED = Environment(name="py3.11-old-urllib3", python="3.11", packages=("requests==2.31.0",),
                     force=("urllib3==1.20",),  # requests 2.31 asks urllib3>=1.21.1: pip refuses the pair
                     env=(("REPRO_MARK", "it's set"),))


def test_a_forced_environment_bundle_replays_from_an_empty_folder(tmp_path):
    cell = Cell(environment=FORCED, workload=Workload(name="fault-segfault", model="fault",
                                                      params={"fault": "segfault"}),
                parallelism=Parallelism(), batch_size=1, epochs=1, repeat=0, limits=Limits(wall=120, progress=60))
    m = Matrix(path=tmp_path / "m.yaml", name="forced", description="", sha256="", cells=[cell])
    bundle, results = repro.reproduce(cell, m, VenvEngine(), tmp_path / "bundles", 1, Console(quiet=True),
                                      live=False)
    assert [r["status"] for r in results] == ["crash"], results[0].get("error")
    assert results[0]["seen"] == {} and results[0]["error"]["signal"] == "SIGSEGV"
    env_dir = bundle / "environment"
    lock = (env_dir / "requirements.lock").read_text()
    assert "requests==2.31.0" in lock and "urllib3" not in lock
    assert (env_dir / "forced.txt").read_text() == "urllib3==1.20\n"
    exports = "\n".join(ln for ln in (bundle / "run.sh").read_text().splitlines() if ln.startswith("export "))
    shown = subprocess.run(["bash", "-c", exports + '\nprintf %s "$REPRO_MARK"'], capture_output=True, text=True,
                           check=True).stdout
    assert shown == "it's set"   # the variable arrives exactly, whatever the quoting

    clean = tmp_path / "elsewhere"
    shutil.copytree(bundle, clean, ignore=shutil.ignore_patterns("attempts"))
    run = subprocess.run(["bash", "run.sh"], cwd=clean, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHON": interpreters.find("3.11")[0]})
    assert run.returncode == 139, run.stdout + run.stderr[-3000:]
    assert "killed by signal 11 (SEGV)" in run.stdout
    freeze = subprocess.run([str(clean / ".venv/bin/python"), "-m", "pip", "freeze"], capture_output=True,
                            text=True).stdout
    assert "urllib3==1.20" in freeze and "requests==2.31.0" in freeze
