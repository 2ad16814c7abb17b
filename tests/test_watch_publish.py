"""Feeds and badges: valid documents (parsed back), stable ids, hostile text escaped, files
written once and left alone when nothing changed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness.claims import Change
from harness.watch import changelog
from harness.watch.changelog import from_dict, from_status
from harness.watch.changes import StatusChange
from harness.watch.publish import (
    JSON_FEED_VERSION,
    atom_feed,
    badge_svg,
    json_feed,
    stack_badge,
    write,
)

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

A = "{http://www.w3.org/2005/Atom}"
HOSTILE = 'lstm<&">\'\x01]]>'


def changes() -> list[Change]:
    broke = from_status("m", "lstm-2gpu", "keras", StatusChange("broke", "3.11.3", "3.12.0",
                                                                  "crashes (BatchNotDivisible)"), "2026-03-09",
                        evidence=["bundles/lstm.tar.gz"])
    slower = changelog.entry("m", "GRU on 2 devices", "slower", "tensorflow", "2.20.0", "2.21.0", "2026-03-08",
                             summary="tf 18 % slower", ratio=0.82, low=0.76, high=0.88, confidence=0.99, id="abc123")
    hostile = from_status("m", HOSTILE, "numpy", StatusChange("broke", "1.0", "2.0", f"fails ({HOSTILE})"),
                          "2026-03-07")
    return [slower, broke, hostile]


def test_json_feed_is_json_feed_1_1():
    feed = json_feed(changes(), title="m: changes", home_url="https://x.test/history/m.html",
                     feed_url="https://x.test/feeds/m.json")
    again = json.loads(json.dumps(feed))
    assert again["version"] == JSON_FEED_VERSION and again["title"] == "m: changes"
    assert [i["date_published"] for i in again["items"]] == ["2026-03-09T00:00:00Z", "2026-03-08T00:00:00Z",
                                                             "2026-03-07T00:00:00Z"]
    for item in again["items"]:
        assert item["id"] and item["content_text"] and item["url"].startswith("https://x.test/history/m.html#")
        assert from_dict(item["_harness"]).id in item["url"]
    # the same change twice is one item; ids do not move when another change arrives
    twice = json_feed(changes() + changes()[:1], title="t", home_url="", feed_url="")
    assert [i["id"] for i in twice["items"]] == [i["id"] for i in feed["items"]]
    assert [i["id"] for i in json_feed(changes()[1:], title="t", home_url="", feed_url="")["items"]] == \
        [i["id"] for i in feed["items"] if i["_harness"]["id"] != "abc123"]


def test_atom_feed_parses_and_has_what_rfc_4287_requires():
    text = atom_feed(changes(), title=f"m {HOSTILE}", home_url="https://x.test/h.html?a=1&b=2",
                     feed_url="https://x.test/feeds/m.atom.xml", updated="2026-03-09")
    root = ET.fromstring(text.encode())
    assert root.tag == f"{A}feed"
    for tag in ("id", "title", "updated", "author"):
        assert root.find(f"{A}{tag}") is not None, tag
    assert root.find(f"{A}author/{A}name").text
    assert root.find(f"{A}updated").text == "2026-03-09T00:00:00Z"
    assert root.find(f"{A}link[@rel='self']").get("href") == "https://x.test/feeds/m.atom.xml"
    assert root.find(f"{A}link[@rel='alternate']").get("href") == "https://x.test/h.html?a=1&b=2"
    assert root.find(f"{A}title").text == "m lstm<&\">']]>"     # escaped on the way out, whole on the way in
    entries = root.findall(f"{A}entry")
    assert len(entries) == 3
    for entry in entries:
        for tag in ("id", "title", "updated", "summary"):
            assert (entry.find(f"{A}{tag}").text or "").strip(), tag
        assert entry.find(f"{A}id").text.startswith("urn:uuid:")
    ids = [e.find(f"{A}id").text for e in entries]
    assert len(set(ids)) == 3
    # stable: written tomorrow with one change fewer, the others keep their ids
    later = ET.fromstring(atom_feed(changes()[:2], title="t", home_url="", feed_url="", updated="2026-03-10")
                          .encode())
    assert [e.find(f"{A}id").text for e in later.findall(f"{A}entry")] == ids[:2]
    assert any("lstm<&\">'" in (e.find(f"{A}summary").text or "") for e in entries)


def test_badge_svg_escapes_and_sizes():
    for label, message in (("works with", "TF 2.21"), (HOSTILE, HOSTILE + " 2.0"), ("", "")):
        svg = badge_svg(label, message, 'red" onload="x')
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("height") == "20"
        texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert texts == [label.replace("\x01", "")] * 2 + [message.replace("\x01", "")] * 2
        fills = {r.get("fill") for r in root.iter("{http://www.w3.org/2000/svg}rect")}
        assert "#9f9f9f" in fills            # an unknown colour is grey, never pasted in
        assert "onload" not in svg
    short = int(ET.fromstring(badge_svg("a", "b", "green")).get("width"))
    long = int(ET.fromstring(badge_svg("works with", "TensorFlow 2.21.0rc1", "green")).get("width"))
    assert long > short + 100
    assert 'fill="#4c1"' in badge_svg("a", "b", "green") and 'fill="#abcdef"' in badge_svg("a", "b", "#abcdef")


def test_stack_badge():
    assert stack_badge("tensorflow", "2.21", True) == ("works with", "TF 2.21", "green")
    assert stack_badge("tensorflow", "2.22", False) == ("broken since", "TF 2.22", "red")
    assert stack_badge("keras", None, None) == ("Keras", "untested", "grey")
    assert stack_badge("mypkg", "1.0", True) == ("works with", "mypkg 1.0", "green")


def test_write_files_parse_and_rewrite_nothing_unchanged(tmp_path):
    badges = {"tf-2.21/gru": stack_badge("tensorflow", "2.21", True), "../evil": ("a", "b", "red")}
    paths = write(tmp_path, "nightly/ci", changes(), badges, home_url="https://x.test/site")
    names = sorted(p.relative_to(tmp_path).as_posix() for p in paths)
    assert names == ["badges/nightly-ci/evil.svg", "badges/nightly-ci/tf-2.21-gru.svg",
                     "feeds/nightly-ci.atom.xml", "feeds/nightly-ci.json"]
    assert all(p.resolve().is_relative_to(tmp_path.resolve()) for p in paths)
    feed = json.loads((tmp_path / "feeds/nightly-ci.json").read_text())
    assert feed["feed_url"] == "https://x.test/site/feeds/nightly-ci.json"
    assert len(feed["items"]) == 3
    for p in paths:
        if p.suffix in (".xml", ".svg"):
            ET.parse(p)
    stamps = {p: p.stat().st_mtime_ns for p in paths}
    assert write(tmp_path, "nightly/ci", changes(), badges, home_url="https://x.test/site") == paths
    assert {p: p.stat().st_mtime_ns for p in paths} == stamps          # nothing new, nothing rewritten
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    # no changes at all: still valid, dated by a fixed moment so a rerun rewrites nothing
    empty = write(tmp_path / "e", "m", [], {})
    root = ET.parse(empty[1]).getroot()
    assert root.find(f"{A}entry") is None and root.find(f"{A}updated").text


def test_without_a_home_url_a_feeds_links_resolve_from_the_feed_file(tmp_path):
    """A feed reader resolves an item's relative link from the feed's own address (feeds/...),
    so without --home-url the links must climb out of feeds/ to the history page."""
    json_path = write(tmp_path, "m", changes(), {})[0]
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "m.html").write_text("page")
    for item in json.loads(json_path.read_text())["items"]:
        target = (json_path.parent / item["url"].split("#")[0]).resolve()
        assert target == (tmp_path / "history" / "m.html").resolve(), item["url"]
