"""Docker-specific promises: a dead daemon is a message, the CA bundle never
reaches an image layer, and an interrupt leaves no container and no half result."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import pytest
from rich.console import Console

from harness.cells import Environment
from harness.store import iter_results

from .conftest import ROOT, harness

pytestmark = pytest.mark.docker


def test_dead_daemon_is_an_error_message_not_a_traceback(tmp_path):
    proc = harness("run", "matrices/smoke.yaml", "--engine", "docker", "--results", str(tmp_path),
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert proc.returncode == 2
    assert "no Docker engine answers" in proc.stderr and "Traceback" not in proc.stderr


def test_ca_bundle_is_used_but_never_written_into_a_layer(tmp_path, docker_client):
    from harness.engines.docker import DockerEngine, find_ca_bundle
    system_ca = find_ca_bundle(None)
    if system_ca is None:
        pytest.skip("no CA bundle configured (PIP_CERT / SSL_CERT_FILE / REQUESTS_CA_BUNDLE)")
    marker = f"harness-ca-marker-{uuid.uuid4().hex}"
    ca = tmp_path / "ca.pem"
    ca.write_text(system_ca.read_text() + f"\n# {marker}\n")  # a comment outside PEM blocks: still valid
    # A package list unique to this test makes the RUN step really execute with this secret.
    env = Environment(name="ca-check", python="3.11", packages=("six==1.16.0",))
    engine = DockerEngine(docker_client, ca_bundle=str(ca), console=Console(quiet=True))
    prepared = engine.prepare(env, tmp_path / "build.log")
    image = docker_client.images.get(prepared.handle)
    assert "/run/secrets/ca" in (tmp_path / "build.log").read_text() or prepared.reused
    saved = tmp_path / "image.tar"
    with open(saved, "wb") as fh:
        for chunk in image.save():
            fh.write(chunk)
    blob = saved.read_bytes()
    assert len(blob) > 1_000_000
    assert marker.encode() not in blob, "the CA bundle leaked into the image"
    assert not any(v.startswith("PIP_CERT") for v in image.attrs["Config"]["Env"] or [])


def test_interrupt_removes_container_and_partial_result_and_resumes(tmp_path, docker_client):
    matrix = tmp_path / "hang.yaml"
    matrix.write_text(
        'name: hang\n'
        'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
        'workloads: [{model: fault, fault: exception}, {model: fault, fault: hang}]\n'
        'timeouts: {wall: 600, progress: 600}\n')
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "docker",
                             "--results", str(tmp_path / "r")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        label = "tfkeras-harness.cell=tf2.15/fault-hang/none-c1/b128/r0"
        running = docker_client.containers.list(filters={"label": label})
        if running:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(1)
    else:
        pytest.fail("the hang cell never started")
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "finished cell's result is kept" in err
    assert not docker_client.containers.list(all=True, filters={"label": "tfkeras-harness"})
    results = {r["workload"]: r for _, r in iter_results(tmp_path / "r")}
    assert list(results) == ["fault-exception"], "the finished cell stays, the interrupted one leaves nothing"
    assert not list((tmp_path / "r").rglob("*.partial-*"))
    again = harness("run", str(matrix), "--engine", "docker", "--results", str(tmp_path / "r"),
                    "--only", "*fault-exception*", check=True)
    assert "1 of 1 cells already have results" in again.stdout, "a re-run resumes from the finished cells"
