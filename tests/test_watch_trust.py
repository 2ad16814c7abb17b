"""The watch's record is the harness's own, and never followed blindly: a named pipe or a
symbolic link where the history, its lock or its folder should be is one clear line and exit 2
within seconds, and the file a link points at is left as it was; a published site is never
written through a link, and only evidence the watch recorded is copied into it. And the small
things a schedule meets: an empty ``--as-of`` is refused, a range with no release yet is a
quiet exit 0, ``--home-url`` is an http(s) address. Real watches against a loopback index."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.files import ownfiles
from harness.results.result import Quarantined, load
from harness.watch import page, publish

from .conftest import harness
from .planted_index import PlantedIndex
from .test_watch import HERE, RELEASES

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def index():
    with PlantedIndex(RELEASES) as served:
        yield served


@pytest.fixture
def world(tmp_path, index):
    shutil.copytree(HERE, tmp_path / "project")
    return tmp_path, {"PIP_INDEX_URL": index.url, "HARNESS_CACHE": str(tmp_path / "cache")}


def watch(root: Path, env: dict, *args: str, timeout: float = 120):
    started = time.monotonic()
    proc = harness("watch", str(root / "project" / "matrix.yaml"), "--engine", "venv", "--results",
                   str(root / "results"), "--site", str(root / "site"), "--bundles", str(root / "bundles"),
                   *args, env=env, timeout=timeout)
    return proc, time.monotonic() - started


def record(root: Path) -> Path:
    folder = root / "results" / "planted-watch" / ".watch"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("name", ["history.jsonl", "lock"])
def test_a_pipe_in_place_of_a_record_file_is_refused_at_once(world, name):
    root, env = world
    fifo = record(root) / name
    os.mkfifo(fifo)
    proc, took = watch(root, env, "--as-of", "2024-02-01")   # 1.0 is out: the watch would run it
    assert proc.returncode == 2 and took < 60, (took, proc.stdout[-2000:], proc.stderr[-2000:])
    assert str(fifo) in proc.stderr and "not a regular file" in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr   # one line


def test_a_link_in_place_of_the_history_is_refused_and_its_target_left_as_it_was(world):
    root, env = world
    outside = root / "someone-elses.txt"
    outside.write_text("11 bytes.\n")
    (record(root) / "history.jsonl").symlink_to(outside)
    proc, _ = watch(root, env, "--as-of", "2024-02-01")     # 1.0 is out: the watch would run and append
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "history.jsonl" in proc.stderr and "symbolic link" in proc.stderr
    assert outside.read_text() == "11 bytes.\n"


def test_a_linked_record_folder_is_refused(world):
    root, env = world
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (root / "results" / "planted-watch").mkdir(parents=True)
    (root / "results" / "planted-watch" / ".watch").symlink_to(elsewhere)
    proc, _ = watch(root, env, "--as-of", "2024-02-01")
    assert proc.returncode == 2 and ".watch" in proc.stderr and "symbolic link" in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == []


def test_an_empty_as_of_is_refused_and_a_range_with_no_release_yet_is_a_quiet_exit_0(world):
    root, env = world
    proc, _ = watch(root, env, "--as-of", "")
    assert proc.returncode == 2 and "--as-of" in proc.stderr, proc.stderr
    assert not (root / "results" / "planted-watch" / ".watch" / "history.jsonl").exists()
    proc, _ = watch(root, env, "--as-of", "2023-06-01")     # before planted 1.0 was uploaded
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no release yet" in proc.stdout and "planted" in proc.stdout


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/", "example.org/compat", "https://"])
def test_a_home_url_that_is_not_an_http_address_is_refused(world, url):
    root, env = world
    proc, _ = watch(root, env, "--home-url", url, "--as-of", "2023-06-01")
    assert proc.returncode == 2 and "--home-url" in proc.stderr, proc.stderr
    assert not (root / "site" / "feeds").exists()


def test_a_site_is_never_written_through_a_link(tmp_path):
    site, outside = tmp_path / "site", tmp_path / "outside.json"
    outside.write_text("{}\n")
    (site / "feeds").mkdir(parents=True)
    (site / "feeds" / "m.json").symlink_to(outside)
    with pytest.raises(ownfiles.NotOwn, match="symbolic link"):
        publish.write(site, "m", [], {})
    assert outside.read_text() == "{}\n"
    shutil.rmtree(site / "feeds")
    (site / "feeds").symlink_to(tmp_path)                    # the folder itself
    with pytest.raises(ownfiles.NotOwn, match="symbolic link"):
        publish.write(site, "m", [], {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.json", "site"]


def test_only_evidence_the_watch_recorded_is_copied_into_the_site(tmp_path):
    """A changes.jsonl edited to name any file (a key, a password file) as a change's evidence:
    the site gets nothing of it, and the watch says which path it refused."""
    results, site = tmp_path / "results", tmp_path / "site"
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE\n")
    where = results / "m" / ".watch"
    where.mkdir(parents=True)
    change = {"id": "c1", "matrix": "m", "cell": "x/y", "kind": "broke", "package": "p", "before": "1", "after": "2",
              "first_seen": "2024-01-01", "summary": "s"}
    (where / "changes.jsonl").write_text(json.dumps({"change": change, "sources": {
        "history/m/evidence/c1/1.json": str(secret)}}) + "\n")
    with pytest.raises(ownfiles.NotOwn, match="not evidence"):
        page.write_site(site, results, "m")
    assert not list(site.rglob("1.json"))
    (where / "changes.jsonl").write_text(json.dumps({"change": change, "sources": {
        "../../escaped.json": str(secret)}}) + "\n")         # and never outside the site
    with pytest.raises(UserError, match="outside"):
        page.write_site(site, results, "m")
    assert not (tmp_path / "escaped.json").exists()


def test_a_result_file_that_is_a_pipe_or_a_link_is_quarantined_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    started = time.monotonic()
    got = load(tmp_path / "result.json")
    assert isinstance(got, Quarantined) and "not a regular file" in got.why and time.monotonic() - started < 5
    (tmp_path / "real.json").write_text(json.dumps({"schema": 1, "cell": "a/b/c/d/r0", "status": "ok"}))
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "result.json").symlink_to(tmp_path / "real.json")
    got = load(tmp_path / "linked" / "result.json")
    assert isinstance(got, Quarantined) and "symbolic link" in got.why
