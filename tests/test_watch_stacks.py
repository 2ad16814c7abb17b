"""A release series is a structure, not a name (issue: a TensorFlow X.Y.0 release was a stack of
its own). A range over ``tensorflow:`` names 2.10.1's environment ``tf2.10.1`` but 2.11.0's
``tf2.11``; a user's ``name:`` names them ``mine-tf2.11.0``: every spelling of one environment
with its release left open is one series, so a value that drifts at 2.11.0 is a change the day
2.11.0 reaches the index. Real matrices, loaded against a loopback index whose releases are
named as TensorFlow names them; and a real watch, replayed over those releases, with real
virtualenvs and a user's script."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.index import pipsettings
from harness.matrix import load
from harness.matrix.release_cells import open_stack
from harness.results.result import Result
from harness.watch import history, series

from .conftest import harness
from .planted_index import PlantedIndex

TF = {"2.10.0": "2022-09-06T12:00:00Z", "2.10.1": "2022-11-10T12:00:00Z", "2.11.0": "2022-11-18T12:00:00Z"}
RELEASES = {"tensorflow": TF, "tensorflow-cpu": TF, "plantednp": {"1.0": "2022-01-01T00:00:00Z",
                                                                  "2.0": "2022-02-01T00:00:00Z"}}
MODULES = {"tensorflow-cpu": "tensorflow", "tensorflow": "tensorflow"}

MATRIX = """\
name: tfwatch
environments:
  - {python: "3.11", tensorflow: ">=2.10,<2.12"}
  - {name: mine, python: "3.11", tensorflow: ">=2.10,<2.12", env: {MINE: "1"}}
  - {name: both, python: "3.11", tensorflow: ">=2.10,<2.12", packages: [{plantednp: ">=1.0"}]}
workloads:
  - {name: value, script: value.py}
timeouts: {wall: 120, progress: 100}
"""
SCRIPT = """\
import tensorflow
from workloads.metrics import report

report("value", 2.0 if tensorflow.__version__.startswith("2.11") else 1.0)
"""


@pytest.fixture(scope="module")
def index():
    with PlantedIndex(RELEASES, modules=MODULES) as served:
        yield served


def _planted(monkeypatch, tmp_path, index) -> None:
    """This process reads the planted index: pip's settings are read once per process, so the
    ones an earlier test of this worker read are set aside for this test."""
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pipsettings, "_settings", None)


def _entries(tmp_path, index, monkeypatch, matrix: str = MATRIX) -> list[dict]:
    """A history as the watch writes it (history.entry) for every cell of the matrix: ok, and
    `drifted` at 2.11.0 -- what a script whose value moves at that release gives."""
    _planted(monkeypatch, tmp_path, index)
    (tmp_path / "value.py").write_text(SCRIPT)
    (tmp_path / "m.yaml").write_text(matrix)
    m = load(tmp_path / "m.yaml")
    out = []
    for cell in m.cells:
        e = history.entry(Result(cell=cell.id, status="ok"), cell, folder_=tmp_path, watch="w", date="d",
                          as_of=None)
        tf = dict((p, v) for p, _, v in cell.environment.ranges)["tensorflow"]
        out.append({**e, "status": "drifted" if tf == "2.11.0" else "ok"})
    return out


def test_every_spelling_of_one_environment_is_one_series_and_the_drift_is_at_the_x_y_0_release(
        tmp_path, index, monkeypatch):
    entries = _entries(tmp_path, index, monkeypatch)
    names = {e["environment"] for e in entries}
    assert {"tf2.10", "tf2.10.1", "tf2.11"} <= names                 # as TensorFlow's releases name them
    assert {"mine-tf2.10.0", "mine-tf2.11.0"} <= names
    along_tf = [k for k in series.outcomes(entries) if k.package == "tensorflow"]
    # one series for the plain environment, one for `mine`, two for `both` (plantednp 1.0 and 2.0)
    assert len(along_tf) == 4, sorted(k.label for k in along_tf)
    assert {len(points) for k, points in series.outcomes(entries).items() if k.package == "tensorflow"} == {3}
    assert {k.label.split("/")[0] for k in along_tf} >= {"tf*", "mine-tf*"}
    along_np = [k for k in series.outcomes(entries) if k.package == "plantednp"]
    assert len(along_np) == 3                                         # one per TensorFlow release
    found = series.find("tfwatch", entries, "d")
    drift = [c for c in found if c.kind == "expectation"]
    assert len(drift) == 4 and {(c.before, c.after) for c in drift} == {("2.10.1", "2.11.0")}, \
        [(c.where["cell"], c.before, c.after) for c in found]


def test_a_history_written_before_stacks_were_recorded_joins_the_same_series(tmp_path, index, monkeypatch):
    entries = _entries(tmp_path, index, monkeypatch)
    old = [{k: v for k, v in e.items() if k != "stacks"} for e in entries if "2.11.0" not in json.dumps(e["releases"])]
    new = [e for e in entries if "2.11.0" in json.dumps(e["releases"])]
    found = series.find("tfwatch", old + new, "d")
    assert {(c.before, c.after) for c in found if c.kind == "expectation"} == {("2.10.1", "2.11.0")}


def test_the_open_stack_is_everything_but_the_axis_release(tmp_path, index, monkeypatch):
    _planted(monkeypatch, tmp_path, index)
    (tmp_path / "value.py").write_text(SCRIPT)
    (tmp_path / "m.yaml").write_text(MATRIX)
    envs = {e.name: e for e in load(tmp_path / "m.yaml").environments}
    assert open_stack(envs["tf2.10"], "tensorflow") == open_stack(envs["tf2.11"], "tensorflow")
    assert open_stack(envs["tf2.10"], "tensorflow") != open_stack(envs["mine-tf2.10.0"], "tensorflow")  # its env:
    both = [e for n, e in envs.items() if n.startswith("both-")]
    by_np = {open_stack(e, "tensorflow") for e in both}
    by_tf = {open_stack(e, "plantednp") for e in both}
    assert len(by_np) == 2 and len(by_tf) == 3                        # the other range's release stays in


MATRIX_WATCH = """\
name: tfwatch
environments:
  - {python: "3.11", tensorflow: ">=2.10,<2.12"}
releases: {every: minor}
workloads:
  - {name: value, script: value.py}
expect:
  - {workload: value, metric: value, equals: 1.0}
timeouts: {wall: 120, progress: 100}
"""


@pytest.mark.slow
def test_a_watch_reports_a_value_drift_on_the_day_the_x_y_0_release_appears(tmp_path, index):
    (tmp_path / "value.py").write_text(SCRIPT)
    (tmp_path / "m.yaml").write_text(MATRIX_WATCH)
    env = {"PIP_INDEX_URL": index.url, "HARNESS_CACHE": str(tmp_path / "cache")}

    def watch(as_of: str):
        return harness("watch", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"),
                       "--site", str(tmp_path / "site"), "--bundles", str(tmp_path / "b"), "--as-of", as_of,
                       env=env, timeout=900)
    first = watch("2022-10-01")                                       # 2.10.0 only
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = watch("2022-11-19")                                      # the day after 2.11.0's upload
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]
    changes = [json.loads(line)["change"] for line in
               (tmp_path / "r" / "tfwatch" / ".watch" / "changes.jsonl").read_text().splitlines()]
    assert [(c["kind"], c["before"], c["after"]) for c in changes] == [("expectation", "2.10.1", "2.11.0")], changes
    badges = sorted(p.name for p in (tmp_path / "site").rglob("*.svg"))
    assert len(badges) == 1, badges                                    # one stack, one badge
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)

