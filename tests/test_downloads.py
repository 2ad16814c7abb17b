"""The download cache, for real: every environment build -- virtualenvs and Docker images --
fetches a file from the index once and is served the kept copy after, through the harness's
loopback index (harness/downloads.py); a kept copy changed on disk is fetched anew, never
served; a file that is not what the index says is refused and not kept. The packages are
planted on a loopback index of the test's own (tests/planted_index.py), with real pip
installing them. Each test plants a release of its own (a version no earlier run used), so that
no image built before -- images are named by their pins -- can stand in for a build."""

from __future__ import annotations

import hashlib
import json
import os
import random

import pytest

from harness import downloads, ledger
from harness.releases import File
from harness.store import iter_results

from .conftest import harness
from .planted_index import PlantedIndex

MATRIX = """\
name: dl
environments:
  - {{name: one, python: "3.11", packages: ["harnessdl=={version}"]}}
  - {{name: two, python: "3.11", packages: ["harnessdl=={version}", "harnessdlextra==2.0"]}}
workloads:
  - {{name: version, script: version.py}}
"""
SCRIPT = """\
import harnessdl
from workloads.metrics import report

report("version", float(harnessdl.__version__))
"""


def _downloads(cache, name: str) -> list[dict]:
    return [e for e in ledger.read(cache) if e["kind"] == "download" and e["file"].startswith(name + "-")]


@pytest.fixture
def planted():
    version = f"1.{random.randrange(10 ** 8, 10 ** 9)}"
    with PlantedIndex({"harnessdl": {version: "2020-01-01T00:00:00Z"},
                       "harnessdlextra": {"2.0": "2020-01-01T00:00:00Z"}}) as index:
        index.version = version
        yield index


def _run(tmp_path, planted, engine: str, results: str):
    (tmp_path / "version.py").write_text(SCRIPT)
    (tmp_path / "dl.yaml").write_text(MATRIX.format(version=planted.version))
    proc = harness("run", str(tmp_path / "dl.yaml"), "--engine", engine, "--results", str(tmp_path / results),
                   env={"PIP_INDEX_URL": planted.url, "HARNESS_CACHE": str(tmp_path / "cache")}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {r["environment"]: r for _, r in iter_results(tmp_path / results)}
    assert {e: r["status"] for e, r in results.items()} == {"one": "ok", "two": "ok"}, proc.stdout[-3000:]
    assert all(r["metrics"]["version"] == float(planted.version) for r in results.values())
    return results


def test_two_virtualenvs_fetch_a_file_once_and_a_changed_copy_is_fetched_anew(tmp_path, planted, monkeypatch):
    results = _run(tmp_path, planted, "venv", "r")
    cache = tmp_path / "cache"
    first = _downloads(cache, f"harnessdl-{planted.version}")
    assert [e["fetched"] for e in first] == [True, False], first   # one environment fetched it, the other was served
    filename = f"harnessdl-{planted.version}-py3-none-any.whl"
    data = planted.files[filename][1]
    sha = hashlib.sha256(data).hexdigest()
    kept = cache / "downloads" / sha[:2] / f"{sha}-{filename}"
    assert kept.read_bytes() == data
    for r in results.values():
        prov = r["provenance"]
        assert prov["downloads"]["index"] == planted.url and "download cache" in prov["downloads"]["via"]
    # a kept copy that changed on disk is not what the index says: fetched again, never served
    kept.write_bytes(b"not a wheel")
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    same = File(filename=filename, url=f"{planted.url.rsplit('/simple', 1)[0]}/files/{filename}", sha256=sha)
    assert downloads.obtain(same).read_bytes() == data
    assert _downloads(cache, f"harnessdl-{planted.version}")[-1]["fetched"] is True


def test_a_file_that_is_not_what_the_index_says_is_refused_and_not_kept(tmp_path, planted, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    filename = f"harnessdl-{planted.version}-py3-none-any.whl"
    lie = File(filename=filename, url=f"{planted.url.rsplit('/simple', 1)[0]}/files/{filename}", sha256="0" * 64)
    with pytest.raises(downloads.DownloadFailed, match="sha256"):
        downloads.obtain(lie)
    assert not [p for p in (tmp_path / "cache" / "downloads").rglob("*") if p.is_file()]


@pytest.mark.docker
def test_an_image_build_is_served_what_a_virtualenv_fetched(tmp_path, planted, docker_client):
    _run(tmp_path, planted, "venv", "venvs")
    fetched = len([e for e in _downloads(tmp_path / "cache", f"harnessdl-{planted.version}") if e["fetched"]])
    results = _run(tmp_path, planted, "docker", "images")
    served = _downloads(tmp_path / "cache", f"harnessdl-{planted.version}")
    assert len([e for e in served if e["fetched"]]) == fetched == 1, served
    assert len([e for e in served if not e["fetched"]]) >= 3, served    # the second venv and both images
    for r in results.values():
        assert "--network host" in r["provenance"]["downloads"]["via"], json.dumps(r["provenance"])[:2000]


def test_the_cache_keeps_what_fits_its_bound_and_the_least_recently_served_go_first(tmp_path, planted, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    base = planted.url.rsplit("/simple", 1)[0]
    files = {}
    for name in (f"harnessdl-{planted.version}-py3-none-any.whl", "harnessdlextra-2.0-py3-none-any.whl"):
        data = planted.files[name][1]
        files[name] = File(filename=name, url=f"{base}/files/{name}", sha256=hashlib.sha256(data).hexdigest())
    old, new = (downloads.obtain(f) for f in files.values())
    os.utime(old, (1, 1))                                   # served long ago
    gone = downloads.trim(new.stat().st_size)               # room for one file: the newer one stays
    assert gone == [old] and not old.exists() and new.exists()
    assert [e["file"] for e in ledger.read(tmp_path / "cache") if e["kind"] == "download-evicted"] == [old.name[65:]]
    assert downloads.trim(0) == [new] and not new.exists()
    again = downloads.obtain(next(iter(files.values())))   # what went is fetched again when asked for
    assert again.exists() and _downloads(tmp_path / "cache", f"harnessdl-{planted.version}")[-1]["fetched"] is True


def test_a_bound_of_zero_keeps_nothing_past_a_build_and_a_bound_that_is_no_size_exits_2(tmp_path, planted,
                                                                                      monkeypatch):
    monkeypatch.setenv("HARNESS_DOWNLOAD_CACHE_MAX", "0")
    _run(tmp_path, planted, "venv", "r")
    first = _downloads(tmp_path / "cache", f"harnessdl-{planted.version}")
    assert [e["fetched"] for e in first] == [True, True], first   # each build's index let it go when it closed
    assert not [p for p in (tmp_path / "cache" / "downloads").rglob("*.whl")]
    monkeypatch.setenv("HARNESS_DOWNLOAD_CACHE_MAX", "lots")
    proc = harness("run", str(tmp_path / "dl.yaml"), "--engine", "venv", "--results", str(tmp_path / "r2"),
                   env={"PIP_INDEX_URL": planted.url, "HARNESS_CACHE": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == 2 and "HARNESS_DOWNLOAD_CACHE_MAX" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "r2").exists()
