"""Warm cells in containers (harness/engines/docker_warm.py), for real: planted faults read the
same forked in a launcher container as in a fresh container of their own; what a forked cell
leaves running ends with it; the launcher containers carry every hardening setting of a cell's
container and leave with the run; `--fresh` is one container per cell as before."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results.store import iter_results

from .conftest import ROOT, containers_under, harness
from .test_leftovers import SCRIPT, _check, _with_token, token  # noqa: F401 - the fixture, used by name

pytestmark = pytest.mark.docker

FAULTS = """\
name: warm-faults
environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]
workloads:
  - {model: fault, fault: segfault}
  - {model: fault, fault: abort}
  - {model: fault, fault: hang}
  - {model: fault, fault: exception}
  - {model: fault, fault: silent_exit}
batch_sizes: [1]
timeouts: {wall: 120, progress: 8}
"""


def _results(folder: Path) -> dict[str, dict]:
    return {r["cell"]: r for _, r in iter_results(folder)}


def _ours(client, label: str, folder: Path) -> list:
    return containers_under(client, folder, pid=os.getpid(), label=label)


def test_planted_faults_read_the_same_forked_in_a_launcher_container(tmp_path, docker_client):
    from harness.engines.docker import LABEL, PIDS_LIMIT, default_memory_limit
    matrix = tmp_path / "faults.yaml"
    matrix.write_text(FAULTS)
    fresh = harness("run", str(matrix), "--engine", "docker", "--fresh", "--results", str(tmp_path / "fresh"),
                    timeout=900)
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
    assert not _ours(docker_client, f"{LABEL}.launcher", tmp_path), "--fresh starts no launcher"
    # the warm run, watched while its hang cell hangs: the launcher containers are hardened as a cell's
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "docker",
                             "--results", str(tmp_path / "warm")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        launchers = containers_under(docker_client, tmp_path, label=f"{LABEL}.launcher", all=False)
        seen = [c.attrs for c in launchers] or seen
        time.sleep(0.5)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert seen, "no launcher container was seen"
    for attrs in seen:
        host = attrs["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] == PIDS_LIMIT
        assert host["ReadonlyRootfs"] is True and "/tmp" in host["Tmpfs"]
        assert host["NetworkMode"] == "none" and host["Init"] is True
        assert host["Memory"] == host["MemorySwap"] == default_memory_limit(docker_client) > 0
        assert host["CpusetCpus"], "a launcher serves one slot: its cores are the container's"
        mounts = {m["Destination"]: m for m in attrs["Mounts"]}
        assert mounts["/opt/harness"]["RW"] is False and mounts["/out"]["RW"] is True
    assert not _ours(docker_client, LABEL, tmp_path), "every container leaves with the run"
    before, after = _results(tmp_path / "fresh"), _results(tmp_path / "warm")
    assert set(before) == set(after) and len(before) == 5
    for cell, f in before.items():
        w = after[cell]
        assert f["warmth"]["launch"] == "fresh"
        assert w["warmth"]["launch"] == "warm", (cell, w["warmth"]["notes"])
        assert (w["status"], w["reason"]) == (f["status"], f["reason"]), cell
        assert (w["error"] or {}).get("signature") == (f["error"] or {}).get("signature"), cell
        assert (w["exit"]["code"], w["exit"]["signal"]) == (f["exit"]["code"], f["exit"]["signal"]), cell
    assert after["tf2.15/fault-hang/none-c1/b1/r0"]["status"] == "timeout"


FACTORY = '''\
import os
import subprocess
import sys

import numpy as np


def build(keras, how=None, token=None):
    inputs = keras.layers.Input(shape=(4,))
    return keras.models.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))


def data(how=None, token=None):
    """Leaves a process running the way `how` says (leave.py), then hands over a small problem."""
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "leave.py"), how, token], check=True)
    x = np.random.RandomState(0).normal(size=(64, 4)).astype("float32")
    return x, np.eye(2, dtype="float32")[(x[:, 0] > 0).astype(int)]
'''


def test_what_a_forked_cell_leaves_running_ends_with_it(tmp_path, token, docker_client):  # noqa: F811
    from harness.engines.docker import LABEL
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "factory.py").write_text(FACTORY)
    (tmp_path / "m" / "leave.py").write_text(SCRIPT)  # what a user's script leaves running, run from data()
    rows = "".join(f"  - {{name: {how}, model: user, path: ./m, build: 'factory:build', data: 'factory:data', "
                   f"params: {{how: {how}, token: {token}}}}}\n" for how in ("setsid", "daemon", "deaf"))
    (tmp_path / "m.yaml").write_text('environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
                                     f"workloads:\n{rows}epochs: 1\ntimeouts: {{wall: 300, progress: 240}}\n")
    proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "docker", "--results", str(tmp_path / "r"),
                   timeout=900)
    results = {r["cell"].split("/")[1]: r for r in _results(tmp_path / "r").values()}
    assert set(results) == {"setsid", "daemon", "deaf"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    for how, r in results.items():
        assert r["warmth"]["launch"] == "warm", (how, r["warmth"]["notes"])
        assert "launcher" in r["exit"]["leftovers"]["how"]
    _check(results, token)  # ok, each leftover named with the signal that ended it; none outlived `run`
    assert _with_token(token) == [] and not _ours(docker_client, LABEL, tmp_path)


def test_a_launcher_container_that_ends_before_it_is_ready_is_quoted(tmp_path, docker_client):
    """A launcher container that cannot start its server (here its PYTHONPATH misses the
    harness's workloads, as a broken image would) leaves the cells fresh with one line that
    quotes the last line the container wrote and says where its log is; nothing is left."""
    from harness.engines.docker import LABEL, DockerEngine
    from harness.matrix import load

    (tmp_path / "m.yaml").write_text('environments: [{python: "3.11", keras: "3.15.1", backend: jax}]\n'
                                     "workloads: [{model: idle, seconds: 1}]\n")
    env = load(tmp_path / "m.yaml").cells[0].environment
    log = tmp_path / ".launch" / "env.log"
    with DockerEngine(docker_client) as engine:
        image = engine.prepare(env, tmp_path / "build.log").handle
        server = engine.make_server()(image, {"PYTHONPATH": "/nowhere", "HOME": "/tmp"},
                                      {"api": "keras3", "backend": "jax", "device_kind": "cpu", "device_count": 1,
                                       "imports": []}, ROOT / "harness", log, name=env.name)
        try:
            server.wait_ready()
        finally:
            server.close()
    assert not server.ready
    head = "the warm launcher's container ended before it was ready: "
    assert server.refused.startswith(head) and server.refused.endswith(f" (log: {log})")
    last = [line.strip() for line in log.read_text().splitlines() if line.strip()][-1]
    assert server.refused == f"{head}{last} (log: {log})"
    assert not _ours(docker_client, LABEL, tmp_path)
