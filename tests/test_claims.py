"""One class models a change: the watch's change-log entries, the atlas's changes and the portability
grid's are each a `claims.Change`, and each product's ids and JSON are what they were before they
shared it -- the committed atlas and grid read back to the same ids and the same records, a watch
entry says the same JSON, and a history line an older watch wrote still loads."""

from __future__ import annotations

import json

import pytest

from harness.atlas import changes as atlas
from harness.atlas import records, rows
from harness.claims import Change
from harness.portability import changes as grid
from harness.portability import judge, publish
from harness.watch import changelog
from harness.watch.changes import Point, StatusChange, find_shifts

from .conftest import ROOT

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

ATLAS, PORTABILITY = ROOT / "docs" / "atlas", ROOT / "docs" / "portability"


def test_the_committed_atlas_changes_read_back_to_the_same_ids_and_records():
    published = json.loads((ATLAS / "changes.json").read_text())
    assert published, "the committed atlas has changes"
    for d in published:
        change = atlas.from_dict(d)
        assert isinstance(change, Change)
        assert change.id == d["id"] == atlas.change_id(d["line"], d["column"], d["kind"], d["after"])
        said = atlas.to_dict(change)
        assert said == d and list(said) == list(d)   # the same keys, in the same order
    recs, _ = records.read(ATLAS / "atlas.json")
    found = atlas.find(rows.build(recs))
    assert all(isinstance(c, Change) for c in found)
    assert [c.id for c in found] == [d["id"] for d in published]


def test_an_atlas_speed_shift_carries_its_spread_and_runs_besides_what_it_publishes():
    change = atlas.at("keras2", "gru-2x32 none-c1", "slower", "m/a", "m/b", "samples/s x0.70", 0.7, low=0.6,
                      high=0.8, confidence=0.99, runs=6, confirmed=False)
    assert (change.size, change.low, change.high, change.runs) == (0.7, 0.6, 0.8, 6)
    assert atlas.to_dict(change) == {"id": atlas.change_id("keras2", "gru-2x32 none-c1", "slower", "m/b"),
                                     "line": "keras2", "column": "gru-2x32 none-c1", "kind": "slower",
                                     "before": "m/a", "after": "m/b", "detail": "samples/s x0.70", "size": 0.7,
                                     "evidence": [], "confirmed": False}
    assert atlas.standing(change) == "candidate"


def test_a_watch_entry_keeps_its_id_and_json_and_an_older_line_still_loads():
    sc = StatusChange("broke", "3.11.3", "3.12.0", "crashes (BatchNotDivisible)")
    change = changelog.from_status("m", "lstm-2gpu", "keras", sc, "2026-03-09", evidence=["results/x/result.json"])
    assert isinstance(change, Change)
    said = changelog.to_dict(change)
    assert said == {"id": "092ff02b3928b96a", "matrix": "m", "cell": "lstm-2gpu", "kind": "broke",
                    "package": "keras", "before": "3.11.3", "after": "3.12.0", "first_seen": "2026-03-09",
                    "summary": "keras 3.12.0: lstm-2gpu crashes (BatchNotDivisible), last good 3.11.3, first seen "
                               "2026-03-09", "ratio": None, "low": None, "high": None, "confidence": None,
                    "bisected_to": None, "evidence": ["results/x/result.json"], "detail": "crashes (BatchNotDivisible)"}
    assert list(said) == ["id", "matrix", "cell", "kind", "package", "before", "after", "first_seen", "summary",
                          "ratio", "low", "high", "confidence", "bisected_to", "evidence", "detail"]
    assert changelog.from_dict(said) == change
    # a line an older (or newer) watch wrote: a key this one does not know is ignored, a missing optional one empty
    older = {k: v for k, v in said.items() if k not in ("detail", "bisected_to")}
    again = changelog.from_dict({**older, "someday": 1})
    assert again.id == change.id and again.detail == "" and again.where["bisected_to"] is None
    points = [Point(f"tensorflow 2.{i}.0", (10.0, 10.1, 9.9) if i < 3 else (5.0, 5.1, 4.9)) for i in range(6)]
    [shift] = find_shifts(points)
    slower = changelog.from_shift("m", "gru", "tensorflow", shift, "2026-03-08")
    assert isinstance(slower, Change) and slower.runs == 18 and "runs" not in changelog.to_dict(slower)
    assert changelog.from_dict(changelog.to_dict(slower)).size == slower.size


def test_the_grids_changes_keep_their_ids_and_records():
    stacks = {"tf2.13": {"api": "tf.keras", "keras": "2.13.1", "tensorflow": "2.13.1"},
              "tf2.14": {"api": "tf.keras", "keras": "2.14.0", "tensorflow": "2.14.1"}}
    verdicts = {("tf2.13", "tf2.13"): judge.SAME, ("tf2.13", "tf2.14"): judge.REFUSES,
                ("tf2.14", "tf2.14"): judge.SAME, ("tf2.14", "tf2.13"): judge.REFUSES}
    recs = [{"writer": w, "reader": r, "model": "custom", "format": "keras", "verdict": v}
            for (w, r), v in verdicts.items()]
    found = grid.find(recs, list(stacks), stacks)
    assert all(isinstance(c, Change) for c in found)
    reader = next(c for c in found if c.kind == grid.READER)
    assert reader.id == "reader:tf2.13->tf2.14:same->refuses"
    assert grid.as_dict(reader) == {"id": "reader:tf2.13->tf2.14:same->refuses", "moved": "reader",
                                    "line": "tf.keras", "before": "tf2.13", "after": "tf2.14", "was": "same",
                                    "now": "refuses", "files": [{"other": "tf2.13", "model": "custom",
                                                                 "format": "keras"}]}
    assert grid.sentence(reader) == ("reading on `tf2.14` (after `tf2.13`): same -> refuses, for files of "
                                     "`tf2.13` (custom keras)")
    # the committed grid: its changes found again from its data are the records it published
    data = json.loads((PORTABILITY / "portability.json").read_text())
    judged = [{**r, "writer_stack": data["stacks"][r["writer"]], "reader_stack": data["stacks"][r["reader"]]}
              for r in publish.expanded(data)]
    published = json.loads((PORTABILITY / publish.CHANGES).read_text())["records"]
    assert published, "the committed grid has changes"
    assert [grid.as_dict(c) for c in publish.Judged.of(judged).changes] == published
