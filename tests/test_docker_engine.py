"""Docker-specific promises: a dead daemon is a message, the CA bundle never
reaches an image (neither the secret nor any CA's content, in any layer),
a cell's container is hardened, and an interrupt leaves no container and no
half result."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from harness.cells import Cell, Environment, Limits, Parallelism, Workload
from harness.results.store import iter_results

from .conftest import ROOT, as_from_a_terminal, containers_under, harness

pytestmark = pytest.mark.docker


def test_dead_daemon_is_an_error_message_not_a_traceback(tmp_path):
    proc = harness("run", "matrices/smoke.yaml", "--engine", "docker", "--results", str(tmp_path),
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert proc.returncode == 2
    assert "no Docker engine answers" in proc.stderr and "Traceback" not in proc.stderr


def _pem_bodies(text: str) -> list[str]:
    return re.findall(r"-----BEGIN CERTIFICATE-----\n(.*?)-----END CERTIFICATE-----", text, re.S)


def _debian_cas(saved: Path) -> set[str]:
    """The certificates Debian's ca-certificates package ships: from the host
    where it is Debian, and from the image's own /usr/share/ca-certificates."""
    files = [f.read_bytes() for f in Path("/usr/share/ca-certificates").rglob("*.crt")]
    files += [data for name, data in _contents(saved.read_bytes(), saved.name)
              if "usr/share/ca-certificates/" in name and name.endswith(".crt")]
    return {b.replace("\n", "") for data in files for b in _pem_bodies(data.decode(errors="replace"))}


def _extra_ca_lines(bundle: Path, debian: set[str]) -> list[bytes]:
    """One distinctive base64 line of each certificate in `bundle` that Debian
    does not ship (a proxy's CA, a company CA): such a line in an image can only
    have come from the host."""
    lines = []
    for body in _pem_bodies(bundle.read_text(errors="replace")):
        if body.replace("\n", "") not in debian:
            rows = [r for r in body.splitlines() if len(r) == 64]
            lines.append(rows[len(rows) // 2].encode())
    return lines


def _contents(data: bytes, name: str, depth: int = 0):
    """`data` and, where it is an archive (a layer, a wheel, a gzip), what it holds."""
    yield name, data
    if depth > 3:
        return
    if data[:2] == b"\x1f\x8b":
        try:
            yield from _contents(gzip.decompress(data), name + "!gunzip", depth + 1)
        except (OSError, EOFError):
            pass
    elif data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for member in zf.namelist():
                    yield from _contents(zf.read(member), f"{name}!{member}", depth + 1)
        except (zipfile.BadZipFile, OSError):
            pass
    elif len(data) > 1024 and data[257:262] == b"ustar":
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for member in tf:
                if member.isfile():
                    yield from _contents(tf.extractfile(member).read(), f"{name}!{member.name}", depth + 1)


def _leaks(saved: Path, needles: list[bytes]) -> list[str]:
    """Every file of every layer of a `docker save` archive (wheels, zips and gzips opened) holding a needle."""
    found = []
    for name, data in _contents(saved.read_bytes(), saved.name):
        found += [f"{name}: {needle[:20]!r}..." for needle in needles if needle in data]
    return found


@pytest.mark.parametrize("python", ["3.11", "3.6"])  # 3.6: the offline base carries a copied interpreter
def test_ca_bundle_is_used_but_never_written_into_an_image(tmp_path, docker_client, python):
    from harness.engines.docker import DockerEngine
    from harness.engines.docker_build import find_ca_bundle
    system_ca = find_ca_bundle(None)
    if system_ca is None:
        pytest.skip("no CA bundle configured (PIP_CERT / SSL_CERT_FILE / REQUESTS_CA_BUNDLE)")
    marker = f"harness-ca-marker-{uuid.uuid4().hex}"
    ca = tmp_path / "ca.pem"
    ca.write_text(system_ca.read_text() + f"\n# {marker}\n")  # a comment outside PEM blocks: still valid
    # A package list unique to this test makes the RUN step really execute with this secret.
    env = Environment(name=f"ca-check-{python}", python=python, packages=("six==1.16.0",))
    engine = DockerEngine(docker_client, ca_bundle=str(ca), console=Console(quiet=True))
    prepared = engine.prepare(env, tmp_path / "build.log")
    image = docker_client.images.get(prepared.handle)
    # the build was handed this CA bundle as its secret (the harness's own record of the command it ran)
    assert f"id=ca,src={ca}" in (tmp_path / "build.log").read_text() or prepared.reused
    saved = tmp_path / "image.tar"
    with open(saved, "wb") as fh:
        for chunk in image.save():
            fh.write(chunk)
    assert saved.stat().st_size > 1_000_000
    # the secret file itself, and the content of every CA the host has beyond Debian's own, anywhere in any layer
    debian = _debian_cas(saved)
    assert debian, "the image has Debian's CA certificates"
    control = next(iter(debian))[64:128].encode()
    assert _leaks(saved, [control]), "the scan reaches the files of the layers"
    needles = [marker.encode(), *_extra_ca_lines(system_ca, debian)]
    assert not _leaks(saved, needles), "the host's CA bundle leaked into the image"
    assert not any(v.startswith("PIP_CERT") for v in image.attrs["Config"]["Env"] or [])


def test_the_image_scan_finds_a_planted_ca(tmp_path):
    """The scan above is no formality: a CA line inside a wheel inside a layer is found."""
    needle = b"Q" * 64
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pip/_vendor/certifi/cacert.pem", b"-----BEGIN CERTIFICATE-----\n" + needle + b"\n")
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tf:
        info = tarfile.TarInfo("usr/lib/pip.whl")
        info.size = len(wheel.getvalue())
        tf.addfile(info, io.BytesIO(wheel.getvalue()))
    saved = tmp_path / "image.tar"
    with tarfile.open(saved, "w") as tf:
        info = tarfile.TarInfo("abc/layer.tar")
        info.size = len(layer.getvalue())
        tf.addfile(info, io.BytesIO(layer.getvalue()))
    assert _leaks(saved, [needle]) == [f"image.tar!abc/layer.tar!usr/lib/pip.whl!pip/_vendor/certifi/cacert.pem: "
                                       f"{needle[:20]!r}..."]


# errno's symbolic name of a write refused under /usr (the C library's sentence for it is not ours to assert)
READ_ONLY_PROBE = """import errno
try:
    open("/usr/planted", "w")
except OSError as exc:
    print(errno.errorcode[exc.errno])
else:
    print("written")
"""


def test_a_running_cell_container_is_hardened(tmp_path, docker_client):
    """Inspect a live cell's container for every setting, and check from inside that they hold."""
    from harness.engines.docker import LABEL, PIDS_LIMIT, DockerEngine, default_memory_limit
    from harness.run.runner import stage_workloads
    env = Environment(name="bare", python="3.11")  # the planted faults' environment: no framework needed
    engine = DockerEngine(docker_client, console=Console(quiet=True))
    prepared = engine.prepare(env, tmp_path / "build.log")
    cell = Cell(environment=env, workload=Workload(name="fault-hang", model="fault", params={"fault": "hang"}),
                parallelism=Parallelism(), batch_size=1, epochs=1, repeat=0, limits=Limits(wall=300, progress=300))
    work = tmp_path / "cell"
    work.mkdir()
    (work / "spec.json").write_text(json.dumps(cell.spec()))
    workloads_root, _ = stage_workloads(tmp_path / "run")
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(raw=engine.run(prepared, cell, work, workloads_root)))
    runner.start()
    try:
        def hanging() -> bool:
            events = work / "events.jsonl"
            return events.exists() and "hanging" in events.read_text(errors="replace")

        deadline = time.monotonic() + 120
        while not hanging():
            assert time.monotonic() < deadline and runner.is_alive(), "the hang cell never started"
            time.sleep(0.5)
        (container,) = docker_client.containers.list(filters={"label": f"{LABEL}.cell={cell.id}"})
        host = container.attrs["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == PIDS_LIMIT
        assert host["Memory"] == default_memory_limit(docker_client) > 0
        assert host["MemorySwap"] == host["Memory"], "no swap beyond the limit"
        assert host["ReadonlyRootfs"] is True
        assert "/tmp" in host["Tmpfs"]
        assert host["NetworkMode"] == "none" and host["Init"] is True

        def inside(*argv: str) -> tuple[int, str]:
            code, out = container.exec_run(list(argv))
            return code, out.decode(errors="replace")

        code, status = inside("cat", "/proc/self/status")
        assert code == 0 and re.search(r"^CapEff:\s+0+$", status, re.M), status
        assert re.search(r"^NoNewPrivs:\s+1$", status, re.M), status
        code, out = inside("touch", "/usr/planted")
        assert code != 0, out
        code, out = inside("python", "-c", READ_ONLY_PROBE)  # refused for the read-only root, not for permission
        assert code == 0 and out.split() == ["EROFS"], out
        assert inside("touch", "/tmp/scratch")[0] == 0, "/tmp is writable"
        assert inside("touch", "/out/scratch")[0] == 0, "the cell's folder is writable"
        code, out = inside("touch", "/opt/harness/workloads/planted")
        assert code != 0, "the workloads stay read-only"
    finally:
        for c in docker_client.containers.list(filters={"label": f"{LABEL}.cell={cell.id}"}):
            c.kill()
        runner.join(timeout=120)
    assert outcome["raw"].exit_code is not None
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL}.cell={cell.id}"})


def test_interrupt_removes_container_and_partial_result_and_resumes(tmp_path, docker_client):
    matrix = tmp_path / "hang.yaml"
    matrix.write_text(
        'name: hang\n'
        'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
        'workloads: [{model: fault, fault: exception}, {model: fault, fault: hang}]\n'
        'timeouts: {wall: 600, progress: 600}\n')
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "docker",
                             "--results", str(tmp_path / "r")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        # the hang cell runs: in a container of its own, or forked in a launcher's (warm run);
        # either way a container is running once the other cell has its result
        finished = [r for _, r in iter_results(tmp_path / "r")]
        if finished and containers_under(docker_client, tmp_path, all=False):
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
    assert not containers_under(docker_client, tmp_path)
    results = {r["workload"]: r for _, r in iter_results(tmp_path / "r")}
    assert list(results) == ["fault-exception"], "the finished cell stays, the interrupted one leaves nothing"
    assert not list((tmp_path / "r").rglob("*.partial-*"))
    again = harness("run", str(matrix), "--engine", "docker", "--results", str(tmp_path / "r"),
                    "--only", "*fault-exception*", check=True)
    assert "1 of 1 cells already have results" in again.stdout, "a re-run resumes from the finished cells"


def test_engines_starting_together_share_the_leftovers_without_a_fault(tmp_path, docker_client):
    """Every engine removes the containers of dead runs as it starts (`remove_leftovers`); several
    starting at once on one host -- Slurm tasks of one array, parallel runs -- find the same ones,
    and each container vanishes under all but one of them between their list and their removal.
    None of them may fail for it: an engine that raised there lost its cell in CI."""
    import docker

    from harness.engines.containers import LABEL
    from harness.engines.docker import DockerEngine

    tag = f"tfkeras-harness-test/leftover:{uuid.uuid4().hex[:12]}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # an image of one file: a container is made, never started
        info = tarfile.TarInfo("marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
    subprocess.run(["docker", "import", "-", tag], input=buf.getvalue(), check=True, capture_output=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    labels = {LABEL: "1", f"{LABEL}.host": os.uname().nodename, f"{LABEL}.pid": str(dead.pid),
              f"{LABEL}.pid-start": "1", "tfkeras-harness-test.planted": tag}
    planted = [docker_client.containers.create(tag, command=["/marker"], labels=labels).id for _ in range(16)]
    try:
        start, failures = threading.Barrier(6), []

        def engine() -> None:
            client = docker.from_env(timeout=120)
            start.wait()
            try:
                DockerEngine(client, console=Console(file=io.StringIO()))
            except Exception as exc:  # noqa: BLE001 - what the test looks for
                failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=engine) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert failures == [], failures
        left = docker_client.containers.list(all=True, filters={"label": f"tfkeras-harness-test.planted={tag}"})
        assert left == [], "every dead run's container is gone"
    finally:
        for cid in planted:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(cid, force=True)
        docker_client.images.remove(tag, force=True)
