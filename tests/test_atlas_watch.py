"""`harness atlas watch` on a planted index that gains a release between passes: the first pass
measures every row, finds the break and explains it (exit 1); a second pass with nothing new
runs nothing and exits 0; once the index has a newer TensorFlow, the next pass runs that row
alone, finds the mend it brings, bisects it and publishes it linked, in the feed (exit 1), and
leaves no environment on the disk; a
watch while another holds the results folder exits 3 and does nothing. Real `harness`
processes, real virtualenvs, the planted TensorFlow's module reading its own version."""

from __future__ import annotations

import fcntl
import json
import os
import xml.etree.ElementTree as ET

import pytest

from .conftest import harness
from .planted_index import PlantedIndex

pytestmark = pytest.mark.quick

UPLOADED = {"2.10.0": "2022-09-06T12:00:00Z", "2.11.0": "2022-11-18T12:00:00Z"}
NEWER = ("2.12.0", "2023-03-23T12:00:00Z")
MATRIX = """\
name: atlas-watched
environments:
  - {python: "3.11", tensorflow: ">=2.10"}
releases: {every: minor}
workloads:
  - {name: value, script: value.py}
timeouts: {wall: 120, progress: 100}
"""
# broken on 2.11 only: the first pass finds the break, the release after it brings the mend
SCRIPT = """\
import tensorflow
from workloads.metrics import report

if tensorflow.__version__.startswith("2.11."):
    raise AttributeError("planted: the API is missing in 2.11")
report("val_accuracy", 0.5)
"""


def _log(root) -> list[dict]:
    path = root / "r" / "atlas-run.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    root = tmp_path_factory.mktemp("atlas-watch")
    (root / "atlas").mkdir()
    (root / "atlas" / "watched.yaml").write_text(MATRIX)
    (root / "atlas" / "value.py").write_text(SCRIPT)
    releases = {"tensorflow": dict(UPLOADED), "tensorflow-cpu": dict(UPLOADED)}
    with PlantedIndex(releases, modules={"tensorflow-cpu": "tensorflow"}) as index:
        env = {"PIP_INDEX_URL": index.url, "HARNESS_CACHE": str(root / "cache")}
        args = ("atlas", "watch", str(root / "atlas"), "--results", str(root / "r"),
                "--out", str(root / "site" / "atlas"), "--explain-results", str(root / "explain"),
                "--explain-out", str(root / "explained"), "--no-nightly")
        passes = {"first": harness(*args, env=env, timeout=900)}
        logs = {"first": _log(root)}
        passes["again"] = harness(*args, env=env, timeout=900)
        logs["again"] = _log(root)
        for name in ("tensorflow", "tensorflow-cpu"):
            index.plant(name, *NEWER)
        passes["released"] = harness(*args, env=env, timeout=900)
        logs["released"] = _log(root)
        lock = root / "r" / ".atlas-watch" / "lock"
        fd = os.open(lock, os.O_RDWR) if lock.exists() else None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                passes["busy"] = harness(*args, env=env, timeout=300)
            finally:
                os.close(fd)
        yield root, passes, logs


def _changes(root) -> list[dict]:
    return json.loads((root / "site" / "atlas" / "changes.json").read_text())


def test_the_first_pass_measures_finds_the_break_and_explains_it(watched):
    _, passes, logs = watched
    first = passes["first"]
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert "new change: broke" in first.stdout
    assert {e["environment"] for e in logs["first"]} == {"tf2.10", "tf2.11"}


def test_a_pass_with_nothing_new_runs_nothing_and_exits_0(watched):
    _, passes, logs = watched
    again = passes["again"]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "new change:" not in again.stdout and "new row:" not in again.stdout
    assert logs["again"] == logs["first"]         # nothing ran: not a line more


def test_a_new_release_gets_its_row_and_its_change_explained_and_in_the_feed(watched):
    root, passes, logs = watched
    released = passes["released"]
    assert released.returncode == 1, released.stdout[-3000:] + released.stderr[-3000:]
    assert "new row: atlas-watched/tf2.12" in released.stdout and "new change: mended" in released.stdout
    assert [e["environment"] for e in logs["released"][len(logs["again"]):]] == ["tf2.12"]   # only the new row ran
    found = {c["kind"]: c for c in _changes(root)}
    assert set(found) == {"broke", "mended"}, found
    for kind, key in (("broke", "first_bad"), ("mended", "first_good")):
        [link] = [e["link"] for e in found[kind]["evidence"] if e.get("link")]
        record = json.loads((root / "site" / link).read_text())
        assert (record["package"], record[key]) == ("tensorflow", "2.11.0" if kind == "broke" else "2.12.0"), record
    atom = "{http://www.w3.org/2005/Atom}"
    feed = ET.parse(root / "site" / "atlas" / "feed.xml").getroot()
    ids = [e.findtext(f"{atom}id") for e in feed.findall(f"{atom}entry")]
    assert any(found["mended"]["id"] in i for i in ids), ids
    venvs = root / "cache" / "venvs"       # the disk bound: every environment the passes built, gone
    assert not venvs.is_dir() or not [p for p in venvs.iterdir() if p.is_dir()], list(venvs.iterdir())


def test_a_watch_while_another_holds_the_folder_does_nothing_and_exits_3(watched):
    root, passes, logs = watched
    busy = passes.get("busy")
    assert busy is not None, "the first pass left no lock file to hold"
    assert busy.returncode == 3, busy.stdout[-2000:] + busy.stderr[-2000:]
    assert _log(root) == logs["released"]
