"""The watch example as its README runs it: a user's `copy=False` line across real NumPy releases
on the real index, watched as of 2024-06-01 and then 2024-09-01. The second watch runs only the
new release, reports the break bisected to NumPy 2.0.0, and the published page -- change log,
feeds, badge -- opens in headless Chromium. NumPy virtualenvs are small and reused from the
harness cache after the first run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, harness
from .test_watch import browse_history

MATRIX = str(ROOT / "examples" / "watch-numpy" / "matrix.yaml")
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    root = tmp_path_factory.mktemp("watch-numpy")

    def watch(as_of: str, through_nox: bool = False):
        args = [MATRIX, "--engine", "venv", "--as-of", as_of, "--results", str(root / "results"),
                "--site", str(root / "site"), "--bundles", str(root / "bundles")]
        if not through_nox:
            return harness("watch", *args, timeout=1800)
        # the README's own door, `nox -s watch -- ...`: its exit 1 (new changes) must reach the caller
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir",
                               str(root / "nox"), "-s", "watch", "--", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=1800)

    return root, watch("2024-06-01"), watch("2024-09-01", through_nox=True), watch("2024-09-01")


def test_the_numpy_example_replays_its_history_and_bisects_the_break(replayed):
    root, before, after, again = replayed
    assert before.returncode == 0, before.stdout[-3000:] + before.stderr[-3000:]
    assert after.returncode == 1, after.stdout[-3000:] + after.stderr[-3000:]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    record = root / "results" / "watch-numpy" / ".watch"
    runs = [json.loads(line) for line in (record / "runs.jsonl").read_text().splitlines()]
    assert [r["exit"] for r in runs] == [0, 1, 0] and runs[-1]["recorded"] == 0
    [change] = [json.loads(line)["change"] for line in (record / "changes.jsonl").read_text().splitlines()]
    assert (change["kind"], change["package"], change["after"], change["before"]) == \
        ("broke", "numpy", "2.0.2", "1.26.4")
    assert change["bisected_to"] == "2.0.0"


def test_the_numpy_example_publishes_a_page_feeds_and_a_badge_a_browser_shows(replayed):
    root, *_ = replayed
    site = root / "site"
    page = site / "history" / "watch-numpy.html"
    feed = json.loads((site / "feeds" / "watch-numpy.json").read_text())
    assert len(feed["items"]) == 1
    target = (site / "feeds" / feed["items"][0]["url"].partition("#")[0]).resolve()
    assert target == page.resolve()                       # the feed's link, resolved from the feed file
    [badge] = (site / "badges" / "watch-numpy").glob("*.svg")
    assert "2.0.0" in badge.read_text()                   # names the bisected release
    dom = browse_history(page)
    assert "Change log" in dom and "bisected to" in dom and dom.count('id="change-') == 1
