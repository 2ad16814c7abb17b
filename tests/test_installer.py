"""uv builds every environment (harness/environments/installer.py), for real: what it promises over pip is
tested here -- a file fetched once for every environment that holds it, one copy of it on disk,
a file that is not what the index says refused, nothing of the caller's uv configuration read,
an image build served from a cache of its own, a resolution that fails said in one line. The
packages are planted on a loopback index of the test's own (tests/planted_index.py). Each test
plants a release of its own (a version no earlier run used), so that no image built before --
images are named by their pins -- can stand in for a build."""

from __future__ import annotations

import configparser
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness.environments import installer
from harness.results.store import iter_results

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


@pytest.fixture
def planted():
    version = f"1.{random.randrange(10 ** 8, 10 ** 9)}"
    with PlantedIndex({"harnessdl": {version: "2020-01-01T00:00:00Z"},
                       "harnessdlextra": {"2.0": "2020-01-01T00:00:00Z"}}) as index:
        index.version = version
        index.wheel = f"harnessdl-{version}-py3-none-any.whl"
        index.after = {}  # environment -> what the index had served when its run ended
        yield index


def _run(tmp_path, planted, engine: str, results: str, extra_env: dict | None = None, expect=("ok", "ok"),
         only=("one", "two")):
    """The matrix's environments, one run each and in order, so that what the second fetched is known."""
    (tmp_path / "version.py").write_text(SCRIPT)
    (tmp_path / "dl.yaml").write_text(MATRIX.format(version=planted.version))
    for name in only:
        variables = {"PIP_INDEX_URL": planted.url, "HARNESS_CACHE": str(tmp_path / "cache"), **(extra_env or {})}
        proc = harness("run", str(tmp_path / "dl.yaml"), "--engine", engine, "--only", f"{name}/*",
                       "--results", str(tmp_path / results), timeout=900, env=variables)
        planted.after[name] = dict(planted.served)
    found = {r["environment"]: r for _, r in iter_results(tmp_path / results)}
    assert tuple(found[e]["status"] for e in only) == expect, proc.stdout[-3000:] + proc.stderr[-3000:]
    return found


def test_two_virtualenvs_fetch_a_file_once_and_hold_it_once_on_disk(tmp_path, planted):
    results = _run(tmp_path, planted, "venv", "r")
    one, two = planted.after["one"], planted.after["two"]
    assert one[planted.wheel] >= 1 and two[planted.wheel] == one[planted.wheel], planted.after  # 2nd: uv's cache
    assert two["harnessdlextra-2.0-py3-none-any.whl"] >= 1                    # what it had not seen: fetched
    assert all(r["metrics"]["version"] == float(planted.version) for r in results.values())
    modules = [Path(r["provenance"]["venv"]) / "lib" / "python3.11" / "site-packages" / "harnessdl" / "__init__.py"
               for r in results.values()]
    assert modules[0].stat().st_ino == modules[1].stat().st_ino      # one file, linked from uv's cache
    for r in results.values():
        prov = r["provenance"]
        assert prov["installer"].startswith("uv ") and prov["index"] == planted.url, json.dumps(prov)[:2000]


def test_a_file_that_is_not_what_the_index_says_is_refused(tmp_path, planted):
    planted.lies[planted.wheel] = planted.files[planted.wheel][1][:-7] + b"changed"
    results = _run(tmp_path, planted, "venv", "r", expect=("unavailable", "unavailable"))
    reason = results["one"]["reason"]
    assert "harnessdl" in reason and "\n" not in reason, reason     # why, in one line
    assert not list((tmp_path / "cache" / "venvs").glob("py3.11-*/lib/python3.11/site-packages/harnessdl"))


def test_the_callers_uv_settings_change_nothing(tmp_path, planted):
    """An environment resolves from what its record names: pip's index, not a UV_* variable or
    a uv.toml of the caller's (which would send it elsewhere, or as of another day)."""
    config = tmp_path / "xdg" / "uv"
    config.mkdir(parents=True)
    (config / "uv.toml").write_text('index-url = "http://127.0.0.1:9/nothing"\n')
    results = _run(tmp_path, planted, "venv", "r", extra_env={
        "UV_INDEX_URL": "http://127.0.0.1:9/nothing", "UV_DEFAULT_INDEX": "http://127.0.0.1:9/nothing",
        "UV_EXCLUDE_NEWER": "2001-01-01T00:00:00Z", "UV_OFFLINE": "1", "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert all(r["metrics"]["version"] == float(planted.version) for r in results.values())


def test_a_resolution_that_fails_says_why_in_one_line(tmp_path, planted):
    (tmp_path / "m.yaml").write_text('name: nope\nenvironments:\n  - {python: "3.11", packages: ["harnessdl==9.9"]}\n'
                                     "workloads:\n  - {name: v, script: version.py}\n")
    (tmp_path / "version.py").write_text(SCRIPT)
    proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"),
                   env={"PIP_INDEX_URL": planted.url, "HARNESS_CACHE": str(tmp_path / "cache")}, timeout=300)
    [(_, result)] = list(iter_results(tmp_path / "r"))
    assert result["status"] == "unavailable", proc.stdout[-2000:]
    assert "harnessdl==9.9" in result["reason"] and "\n" not in result["reason"], result["reason"]


@pytest.mark.quick
def test_a_cutoff_lifts_only_the_build_tools_that_did_not_exist_yet_and_pip():
    early = installer.cutoff_options("2018-11-09T00:00:00Z")
    assert early[:2] == ["--exclude-newer", "2018-11-09T00:00:00Z"]
    lifted = dict(early[i + 1].split("=", 1) for i, a in enumerate(early) if a == "--exclude-newer-package")
    assert lifted["setuptools"] == installer.BUILD_TOOLS["setuptools"] and "pip" in lifted
    late = installer.cutoff_options("2024-06-17T00:00:00Z")
    assert "setuptools" not in " ".join(late) and "pip=" in " ".join(late)


@pytest.mark.quick
def test_pips_settings_are_read_from_its_files_in_its_order(tmp_path):
    """The index, CA bundle and proxy come from pip's configuration files (no pip is asked: the
    harness's environments hold none): [install] over [global], a later file over an earlier one,
    PIP_* variables over both, and PIP_CONFIG_FILE=os.devnull leaves every file out."""
    (tmp_path / "xdg" / "pip").mkdir(parents=True)
    (tmp_path / "xdg" / "pip" / "pip.conf").write_text("[global]\nindex-url = http://global.invalid/simple\n"
                                                      "cert = /global.pem\nproxy = http://proxy.invalid:3128\n")
    (tmp_path / "user.conf").write_text("[global]\nindex-url = http://user.invalid/simple\n"
                                        "[install]\ncert = /install.pem\n")
    code = "from harness.index.releases import pip_settings; s = pip_settings(); print(s.index, s.cert, s.proxy)"
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}

    def settings(**env) -> list[str]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**base, "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), "HOME": str(tmp_path), **env})
        return out.stdout.split()

    assert settings()[0] in ("http://global.invalid/simple", *_etc_index())   # /etc/pip.conf comes after
    assert settings(PIP_CONFIG_FILE=str(tmp_path / "user.conf"))[:2] == ["http://user.invalid/simple", "/install.pem"]
    assert settings(PIP_CONFIG_FILE=str(tmp_path / "user.conf"), PIP_INDEX_URL="http://env.invalid/simple")[0] == \
        "http://env.invalid/simple"
    assert settings(PIP_CONFIG_FILE=os.devnull) == ["https://pypi.org/simple", "None", "None"]


def _etc_index() -> list[str]:
    """The index /etc/pip.conf names, if it names one: this host's, read after $XDG_CONFIG_DIRS."""
    parser = configparser.RawConfigParser()
    parser.read("/etc/pip.conf")
    return [parser.get(s, "index-url").rstrip("/") for s in ("global", "install") if parser.has_option(s, "index-url")]


@pytest.mark.docker
def test_an_image_build_reads_a_loopback_index_and_a_cache_of_its_own(tmp_path, planted, docker_client):
    results = _run(tmp_path, planted, "docker", "images")
    one, two = planted.after["one"], planted.after["two"]
    assert one[planted.wheel] >= 1 and two[planted.wheel] == one[planted.wheel], planted.after  # 2nd: the cache
    for r in results.values():
        assert r["provenance"]["installer"].startswith("uv "), json.dumps(r["provenance"])[:2000]
    image = results["two"]["provenance"]["image"]
    lock = docker_client.containers.run(image,
                                        ["cat", "/opt/env/requirements.lock"], entrypoint="", remove=True).decode()
    assert f"harnessdl=={planted.version}" in lock and "harnessdlextra==2.0" in lock
    assert "/uv" not in docker_client.containers.run(image, ["sh", "-c", "command -v uv || echo none"],
                                                     entrypoint="", remove=True).decode()  # nothing of uv stays
