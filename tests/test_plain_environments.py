"""A plain environment -- Python and its `packages:`, no TensorFlow, no Keras -- runs a user's
script for real on virtualenvs and containers, is named for its Python, and refuses a workload
that needs a framework with the workload's key (exit 2, nothing built)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness import matrix, stacks
from harness.errors import MatrixError
from harness.results.store import iter_results

from .conftest import harness

SCRIPT = '''\
import json
import os
import sys

import packaging

# what the cell saw (reported as the README says): the environment's own release, not the host's
with open(os.environ["HARNESS_METRICS"], "a") as out:
    out.write(json.dumps({"name": "packaging_major", "value": int(packaging.__version__.split(".")[0])}) + "\\n")
sys.exit(0 if packaging.__version__ == sys.argv[1] else 3)
'''


def _project(tmp: Path, workloads: str) -> Path:
    (tmp / "s").mkdir(parents=True, exist_ok=True)
    (tmp / "s" / "which.py").write_text(SCRIPT)
    (tmp / "s" / "factory.py").write_text("def build(keras):\n    pass\n\n\ndef data():\n    pass\n")
    path = tmp / "m.yaml"
    path.write_text(textwrap.dedent("""\
        name: plain
        environments:
          - {python: "3.11", packages: ["packaging==21.3"]}
        """) + workloads)
    return path


def test_a_plain_environment_is_named_for_its_python_and_installs_only_its_packages(tmp_path):
    m = matrix.load(_project(tmp_path, "workloads: [{script: s/which.py, args: ['21.3']}]\n"))
    [cell] = m.cells
    env = cell.environment
    assert (env.name, env.api, env.requirements) == ("py3.11", stacks.PLAIN, ["packaging==21.3"])
    assert env.variables({"KERAS_BACKEND": "jax"}) == {}, "no Keras switch is set, nor inherited"


@pytest.mark.parametrize("workload, key", [
    ("{model: rnn}", "workloads[1]"),
    ("{model: user, path: s, build: 'factory:build', data: 'factory:data'}", "workloads[1]"),
])
def test_a_workload_that_needs_a_framework_is_refused_in_a_plain_environment(tmp_path, workload, key):
    path = _project(tmp_path, f"workloads: [{{script: s/which.py}}, {workload}]\n")
    with pytest.raises(MatrixError) as info:
        matrix.load(path)
    assert f"{key}: environment 'py3.11' has no tensorflow or keras" in str(info.value)
    proc = harness("list", str(path))
    assert proc.returncode == 2 and key in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("extra, key", [("keras_api: tf.keras", "environments[0].keras_api"),
                                        ("backend: jax", "environments[0].backend")])
def test_a_framework_setting_without_a_framework_names_its_key(tmp_path, extra, key):
    path = tmp_path / "m.yaml"
    path.write_text(f'environments: [{{python: "3.11", {extra}}}]\nworkloads: [{{script: m.yaml}}]\n')
    with pytest.raises(MatrixError) as info:
        matrix.load(path)
    assert key in str(info.value)


@pytest.mark.parametrize("engine", ["venv", "docker"])
def test_a_script_runs_in_a_plain_environment_with_its_own_packages(engine, tmp_path, request):
    if engine == "docker":
        request.getfixturevalue("docker_client")
    path = _project(tmp_path, textwrap.dedent("""\
        workloads:
          - {name: right, script: s/which.py, args: ["21.3"]}
          - {name: wrong, script: s/which.py, args: ["99.0"]}
        timeouts: {wall: 300, progress: 200}
        """))
    proc = harness("run", str(path), "--engine", engine, "--results", str(tmp_path / "r"), timeout=1800)
    results = {data["cell"].split("/")[1]: data for _, data in iter_results(tmp_path / "r" / "plain")}
    assert results["right"]["status"] == "ok", (results["right"], proc.stderr[-2000:])
    assert results["right"]["metrics"]["packaging_major"] == 21
    assert results["wrong"]["status"] == "error" and "status 3" in results["wrong"]["error"]["message"]
