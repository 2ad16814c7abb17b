"""`harness watch` for real: a planted package on a loopback index (releases 1.0, 1.1, 1.2 and
2.0, published a month apart), a user's script that fails from 1.2 and runs 15 % slower from
2.0, real virtualenvs and processes. Watched as of a date before the break, then after it: the
second watch runs only the new releases, reports the break (bisected) and the slow-down,
appends to the history without touching a line, and publishes a page, feeds and badges that a
real browser opens. Then: nothing new runs nothing; an interrupted watch resumes; two watches
at once leave one consistent history."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results.store import iter_results

from .conftest import ROOT, as_from_a_terminal, harness
from .planted_index import PlantedIndex
from .test_report import _browse

HERE = Path(__file__).resolve().parent / "watch_planted"
RELEASES = {"planted": {"1.0": "2024-01-10T12:00:00Z", "1.1": "2024-02-10T12:00:00Z",
                        "1.2": "2024-03-10T12:00:00Z", "2.0": "2024-04-10T12:00:00Z"}}
BEFORE, AFTER = "2024-03-01", "2024-05-01"
HOME_URL = "https://example.org/compat/"   # where the site would be served: the feeds' links start with it


@pytest.fixture(scope="module")
def index():
    with PlantedIndex(RELEASES) as served:
        yield served


@pytest.fixture(scope="module")
def world(tmp_path_factory, index):
    root = tmp_path_factory.mktemp("watch")
    shutil.copytree(HERE, root / "project")
    env = {"PIP_INDEX_URL": index.url, "HARNESS_CACHE": str(root / "cache")}
    return root, env


def watch(root: Path, env: dict, *args: str, results: str = "results", timeout: float = 1800):
    return harness("watch", str(root / "project" / "matrix.yaml"), "--engine", "venv", "--results",
                   str(root / results), "--site", str(root / "site"), "--bundles", str(root / "bundles"),
                   "--home-url", HOME_URL, *args, env=env, timeout=timeout)


def browse_history(page: Path) -> str:
    """The history page as headless Chromium renders it, once it is known to load without an error
    and to show every badge (an image that did not render has no width)."""
    check = page.with_name("check.html")
    check.write_text(page.read_text().replace("</body>", "<script>window.onload=function(){document.body."
                     "setAttribute('data-widths',Array.from(document.images).map(function(i){return i.naturalWidth})"
                     ".join(','))}</script></body>"))
    dom, errors = _browse(check)
    assert errors == [], errors
    widths = re.search(r'data-widths="([0-9,]*)"', dom).group(1).split(",")
    assert widths and all(int(w) > 20 for w in widths)         # every badge rendered
    return dom


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture(scope="module")
def watched(world):
    root, env = world
    first = watch(root, env, "--as-of", BEFORE)
    history = root / "results" / "planted-watch" / ".watch" / "history.jsonl"
    before = lines(history) if history.exists() else []
    second = watch(root, env, "--as-of", AFTER)
    third = watch(root, env, "--as-of", AFTER)
    return root, first, before, second, third


def test_the_first_watch_runs_the_releases_of_its_date_and_finds_nothing(watched):
    root, first, before, _, _ = watched
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "planted: 2 release(s) 1.0, 1.1" in first.stdout
    cells = {json.loads(b)["cell"] for b in before}
    assert len(before) == len(cells) == 16           # 2 releases x 2 workloads x 4 repeats, one line each
    assert all("planted1.0" in c or "planted1.1" in c for c in cells)


def test_the_second_watch_runs_only_the_new_releases_and_reports_the_break_bisected(watched):
    root, _, before, second, _ = watched
    out = second.stdout
    assert second.returncode == 1, out[-4000:] + second.stderr[-3000:]
    assert "32 cell(s), 16 new" in out
    history = root / "results" / "planted-watch" / ".watch" / "history.jsonl"
    now = lines(history)
    assert now[:len(before)] == before                # appended only: every earlier line byte for byte
    added = [json.loads(b) for b in now[len(before):]]
    assert len(added) == 16 and all("planted1.2" in e["cell"] or "planted2.0" in e["cell"] for e in added)
    assert all(e["as_of"].startswith(AFTER) and e["host"] and e["launch"] in ("warm", "fresh") for e in added)
    changes = [json.loads(b)["change"] for b in lines(history.with_name("changes.jsonl"))]
    broke = [c for c in changes if c["kind"] == "broke"]
    assert len(broke) == 1 and (broke[0]["before"], broke[0]["after"]) == ("1.1", "1.2"), changes
    assert broke[0]["bisected_to"] == "1.2" and any("/bundles/" in link for link in broke[0]["evidence"])
    assert "first bad: planted 1.2   last good: planted 1.1" in out
    slower = [c for c in changes if c["kind"] == "slower"]
    assert len(slower) == 1 and slower[0]["after"] == "2.0" and "slows" in slower[0]["cell"], changes
    assert 0.8 < slower[0]["ratio"] < 0.92                     # 15 % more time: about 13 % fewer per second
    assert not [c for c in changes if c["kind"] not in ("broke", "slower")], changes
    assert re.search(r"broke .*planted 1\.2", out) and re.search(r"slower .*planted 2\.0", out)


def test_a_watch_with_nothing_new_runs_nothing_and_exits_0(watched):
    root, _, _, second, third = watched
    assert third.returncode == 0, third.stdout[-3000:]
    assert "32 cell(s), 0 new" in third.stdout and "no new change" in third.stdout
    runs = [json.loads(b) for b in lines(root / "results" / "planted-watch" / ".watch" / "runs.jsonl")]
    assert [r["exit"] for r in runs] == [0, 1, 0] and runs[-1]["recorded"] == 0


def test_the_site_shows_the_change_log_feeds_and_badges_in_a_browser(watched):
    root, *_ = watched
    site = root / "site"
    page = site / "history" / "planted-watch.html"
    feed = json.loads((site / "feeds" / "planted-watch.json").read_text())
    assert {i["id"] for i in feed["items"]} and len(feed["items"]) == 2
    assert (site / "feeds" / "planted-watch.atom.xml").read_text().startswith("<?xml")
    badges = sorted((site / "badges" / "planted-watch").glob("*.svg"))
    assert badges and "<svg" in badges[0].read_text()
    dom = browse_history(page)
    assert "Change log" in dom and "bisected to" in dom and dom.count('id="change-') == 2
    for item in feed["items"]:                                  # every feed link lands on the change's row
        url = item["url"]
        target, _, anchor = url.partition("#")
        assert target.startswith(HOME_URL) and (site / target[len(HOME_URL):]).is_file(), url
        assert f'id="{anchor}"' in (site / target[len(HOME_URL):]).read_text()
    for link in re.findall(r'href="\.\./([^"#]+)"', page.read_text()):
        assert (site / link).exists(), link                    # evidence and bundles travel with the site


def test_the_site_is_what_its_record_renders_and_an_edit_is_named(watched, tmp_path):
    """`harness audit` on the watch's site: the history page, feeds and badges rendered again from
    the record beside the results, in a copy, are the published bytes (exit 0); a sentence typed
    into the page is named at its line (1); a site whose record is not where --results says, 2."""
    root, *_ = watched
    results = str(root / "results")
    proc = harness("audit", str(root / "site"), "--results", results, "--json")
    assert (proc.returncode, json.loads(proc.stdout or "null")) == (0, []), proc.stdout + proc.stderr
    site = tmp_path / "site"
    shutil.copytree(root / "site", site)
    page = site / "history" / "planted-watch.html"
    text = page.read_text().splitlines()
    n = next(i for i, line in enumerate(text) if "Change log" in line)
    text[n] += " Nothing broke."
    page.write_text("\n".join(text) + "\n")
    proc = harness("audit", str(site), "--results", results, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [found] = json.loads(proc.stdout)
    assert found["check"] == "rendered" and found["where"] == f"{page}:{n + 1}" and "Nothing broke" in found["what"]
    proc = harness("audit", str(site), "--results", str(tmp_path / "elsewhere"))
    assert proc.returncode == 2 and "planted-watch" in proc.stderr, proc.stdout + proc.stderr


def test_an_interrupted_watch_resumes_without_redoing_finished_cells(world):
    root, env = world
    cmd = [sys.executable, "-m", "harness", "watch", str(root / "project" / "matrix.yaml"), "--engine", "venv",
           "--results", str(root / "interrupted"), "--site", str(root / "site-i"), "--bundles",
           str(root / "bundles-i"), "--as-of", BEFORE, "--jobs", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_from_a_terminal)
    run_dir = root / "interrupted" / "planted-watch"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and len(list(iter_results(run_dir))) < 3:   # read as the store reads
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    done = {p / "result.json": (p / "result.json").read_bytes() for p, _ in iter_results(run_dir)}
    assert 3 <= len(done) < 16
    again = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"16 cell(s), {16 - len(done)} new" in again.stdout
    assert all(p.read_bytes() == data for p, data in done.items())     # finished cells untouched
    history = [json.loads(b) for b in lines(run_dir / ".watch" / "history.jsonl")]
    assert sorted(e["cell"] for e in history) == sorted({e["cell"] for e in history}) and len(history) == 16


def _text(path: Path) -> str:
    """A file's text, or "" while it is not there (the watch makes and removes its lock as it runs)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def test_two_watches_at_once_leave_one_consistent_history(world):
    """The second watch started while the first holds the lock says so and exits 3 at once; a third
    with --wait waits for the first, then finds nothing new."""
    root, env = world
    cmd = [sys.executable, "-m", "harness", "watch", str(root / "project" / "matrix.yaml"), "--engine", "venv",
           "--results", str(root / "together"), "--site", str(root / "site-t"), "--bundles", str(root / "bundles-t"),
           "--as-of", BEFORE]
    run = {**os.environ, **env}
    first = subprocess.Popen(cmd, cwd=ROOT, env=run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = root / "together" / "planted-watch" / ".watch" / "lock"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and _text(lock).strip() != str(first.pid):
        time.sleep(0.1)
    second = subprocess.run(cmd, cwd=ROOT, env=run, capture_output=True, text=True, timeout=600)
    third = subprocess.Popen(cmd + ["--wait"], cwd=ROOT, env=run, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    out1, err1 = first.communicate(timeout=1800)
    out3, err3 = third.communicate(timeout=1800)
    assert first.returncode == 0, out1[-2000:] + err1[-2000:]
    assert second.returncode == 3 and "another watch of planted-watch is running" in second.stdout, second.stdout
    assert third.returncode == 0 and "16 cell(s), 0 new" in out3, out3[-2000:] + err3[-2000:]
    history = [json.loads(b) for b in lines(root / "together" / "planted-watch" / ".watch" / "history.jsonl")]
    assert len(history) == len({e["cell"] for e in history}) == 16


@pytest.mark.parametrize("args, message", [
    (["--as-of", "yesterday"], "--as-of 'yesterday': expected a date"),
    (["--jobs", "0"], "--jobs"),
])
def test_bad_watch_input_is_one_line_and_exit_2(world, args, message):
    root, env = world
    proc = watch(root, env, *args, results="bad", timeout=300)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_the_report_links_each_watched_matrix_history(watched):
    root, *_ = watched
    out = root / "report"
    proc = harness("report", str(root / "results"), "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'href="history/planted-watch.html"' in (out / "index.html").read_text()
    assert (out / "history" / "planted-watch.html").is_file() and (out / "feeds" / "planted-watch.atom.xml").is_file()


def test_the_watch_key_of_a_matrix_is_checked_like_every_other(world, tmp_path):
    root, env = world
    bad = tmp_path / "bad.yaml"
    bad.write_text((root / "project" / "matrix.yaml").read_text()
                   + "watch: {pre: yes-please, nightly: 3, hourly: true}\n")
    proc = harness("list", str(bad), "--results", str(tmp_path / "r"), env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "watch.pre: expected" in proc.stderr and "watch.nightly: expected" in proc.stderr
    assert "watch.hourly: unknown key" in proc.stderr


def test_pre_releases_count_for_the_watch_only_when_the_matrix_asks(tmp_path):
    """With `watch: {pre: true}` the watch's expansion takes an rc; `list` of the same matrix does not."""
    releases = {"planted": {**RELEASES["planted"], "2.1rc1": "2024-04-20T12:00:00Z"}}
    with PlantedIndex(releases) as served:
        env = {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(tmp_path / "cache")}
        matrix = tmp_path / "pre.yaml"
        matrix.write_text('name: pre\nenvironments:\n  - {python: "3.11", packages: [{planted: ">=1.2"}]}\n'
                          "workloads:\n  - {name: w, script: w.py}\nwatch: {pre: true}\n")
        (tmp_path / "w.py").write_text("import planted\n")
        listed = harness("list", str(matrix), "--results", str(tmp_path / "r"), env=env, timeout=300)
        assert listed.returncode == 0 and "planted2.1rc1" not in listed.stdout, listed.stderr[-2000:]
        watched = harness("watch", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"), "--site",
                          str(tmp_path / "site"), "--bundles", str(tmp_path / "b"), "--as-of", AFTER, env=env,
                          timeout=900)
        assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr[-2000:]
        assert "planted: 3 release(s) 1.2, 2.0, 2.1rc1" in watched.stdout
