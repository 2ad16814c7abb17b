"""`harness build` on a host without a GPU, for real: a TF 2 GPU image and a Keras 3
(JAX) GPU virtualenv are built from PyPI's CUDA wheels and self-checked (the
CUDA / cuDNN libraries their framework was built for are found and load); TF
1.12 on a GPU is `unavailable`, with the reason, both ways it can be: no
registry serves its CUDA 9 base image, and a virtualenv has no CUDA 9 libraries.

From nothing these pull about 2.4 GB of wheels each; environments are cached
(content-hashed image tags, HARNESS_CACHE venvs), so later runs reuse them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import harness

pytestmark = pytest.mark.slow
MATRIX = "matrices/gpu-build.yaml"


def _line(out: str, env: str) -> str:
    lines = [ln for ln in out.splitlines() if f" {env} (" in ln]
    assert lines, f"no line for {env} in:\n{out}"
    return lines[0]


def _report(results: Path, env: str) -> dict:
    """The self-check's JSON, as it was written into the environment's build log."""
    logs = sorted((results / "gpu-build" / ".build").glob(f"{env}-*.log"))
    assert logs, f"no build log for {env}"
    reports = [ln for ln in logs[0].read_text().splitlines() if ln.startswith('{"built_for"')]
    assert reports, f"no self-check report in {logs[0]}"
    return json.loads(reports[-1])


def _assert_libraries_load(report: dict, families: set[str]) -> None:
    libs = {lib["family"]: lib for lib in report["libraries"]}
    assert families <= set(libs)
    for family in families:
        assert libs[family]["loaded"], libs[family]
        assert libs[family]["version"], libs[family]   # the version the library itself reports


def test_only_matching_nothing_is_a_one_line_error():
    proc = harness("build", MATRIX, "--only", "no-such-environment*", timeout=60)
    assert proc.returncode == 2 and "no cell of matrices/gpu-build.yaml matches" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_tf2_gpu_image_builds_and_checks_and_tf1_gpu_is_unavailable(tmp_path, docker_client):
    proc = harness("build", MATRIX, "--engine", "docker", "--only", "tf*", "--results", str(tmp_path),
                   timeout=3600)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr  # one environment unavailable
    assert "Traceback" not in proc.stderr

    tf2 = _line(out, "tf2.15.1-gpu")
    assert tf2.split()[0] in ("built", "reused") and "self-check ok" in tf2
    assert "built for CUDA 12.2 / cuDNN 8" in tf2 and "no GPU here" in tf2
    report = _report(tmp_path, "tf2.15.1-gpu")
    assert report["ok"] and report["imported"] and report["version"] == "2.15.1"
    assert report["built_for"]["cuda"] == "12.2" and report["built_for"]["cudnn"] == "8"
    _assert_libraries_load(report, {"cudart", "cublas", "cublasLt", "cudnn", "cufft", "curand", "cusolver",
                                    "cusparse"})
    libs = {lib["family"]: lib for lib in report["libraries"]}
    assert libs["cudart"]["version"] == "12.2" and libs["cudnn"]["version"].startswith("8.9")
    assert report["packages"]["nvidia-cudnn-cu12"].startswith("8.9")

    # the image carries what the framework was built for
    images = docker_client.images.list(filters={"label": ["tfkeras-harness.cuda=12.2",
                                                          "tfkeras-harness.cudnn=8"]})
    assert any(t.startswith("tfkeras-harness/env:tf2.15.1-gpu-") for image in images for t in image.tags)

    tf1 = _line(out, "tf1.12-keras2.2.4-gpu")
    assert tf1.split()[0] == "unavailable"
    assert "tensorflow/tensorflow:1.12.0-gpu-py3" in tf1 and "cannot be pulled" in tf1

    again = harness("build", MATRIX, "--engine", "docker", "--only", "tf2*", "--results", str(tmp_path),
                    timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _line(again.stdout, "tf2.15.1-gpu").split()[0] == "reused"


def test_keras3_jax_gpu_virtualenv_builds_and_checks(tmp_path):
    proc = harness("build", MATRIX, "--engine", "venv", "--only", "keras3*", "--results", str(tmp_path),
                   timeout=3600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _line(proc.stdout, "keras3.15.1-jax-gpu")
    assert "self-check ok" in line and "built for CUDA 12." in line
    report = _report(tmp_path, "keras3.15.1-jax-gpu")
    assert report["ok"] and report["imported"] and report["framework"] == "jax"
    assert report["built_for"]["cuda"].startswith("12.") and report["built_for"]["cudnn"].split(".")[0] == "9"
    _assert_libraries_load(report, {"cudart", "cublas", "cublasLt", "cudnn", "cufft", "cusolver", "cusparse"})
    assert report["packages"]["jax-cuda12-plugin"] == report["packages"]["jax"]


def test_tf1_gpu_virtualenv_is_unavailable_for_its_missing_cuda9_libraries(tmp_path):
    """pip installs tensorflow-gpu 1.12 happily; its CUDA 9.0 libraries come from no wheel."""
    if not os.path.isdir(os.path.expanduser("~/.pyenv/versions")) and not os.environ.get("HARNESS_PYTHONS"):
        pytest.skip("no Python 3.6 interpreter source (pyenv or HARNESS_PYTHONS)")
    proc = harness("build", MATRIX, "--engine", "venv", "--only", "tf1.12*", "--results", str(tmp_path),
                   timeout=1800)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = _line(proc.stdout, "tf1.12-keras2.2.4-gpu")
    assert line.split()[0] == "unavailable" and "libcublas.so.9.0" in line, line


def test_export_writes_a_loadable_archive_and_the_cluster_commands(tmp_path, docker_client):
    """--export: `docker save` archives plus the Apptainer / enroot commands for them."""
    matrix = tmp_path / "one.yaml"
    matrix.write_text('name: one\n'  # the image test_docker_engine builds too: shared, not built twice
                      'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
                      'workloads: [{model: dense}]\n')
    out = tmp_path / "export"
    proc = harness("build", str(matrix), "--engine", "docker", "--export", str(out), "--results",
                   str(tmp_path / "results"), timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CPU environment: no self-check" in proc.stdout
    archive = out / "tf2.15.tar"
    assert archive.stat().st_size > 10_000_000
    commands = (out / "import-commands.sh").read_text()
    assert "apptainer build tf2.15.sif docker-archive:tf2.15.tar" in commands
    assert "enroot import -o tf2.15.sqsh dockerd://tfkeras-harness/env:tf2.15-" in commands
    import tarfile
    with tarfile.open(archive) as tar:  # a docker-archive: manifest naming the image's tag
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest[0]["RepoTags"][0].startswith("tfkeras-harness/env:tf2.15-")
