"""`harness atlas {run,publish,lookup}` on a planted index: an atlas folder of two matrices over
a planted `tensorflow` (2.10.0, 2.11.0, 2.12.0, each with its upload time), their workloads a
user's script that reads the version it got. In one, the script raises from 2.11 on (a break at
2.11); in the other, it raises on 2.10 only (a mend at 2.11) and otherwise reports a validation
accuracy that depends on the repeat's own seed (`reseed: true`). Real `harness` processes, real
virtualenvs (a second or two each: quick tier), real files read back: the run log, the results,
the published data, changes, feed and pages, and the page's filters in a real browser.

Then a real slice (`tf`): a tiny GRU on real TensorFlow, one device with two reseeded repeats
and two virtual CPU devices, run and published as the atlas runs and publishes its own."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.atlas.records import FIELDS, SCHEMA, from_csv
from harness.errors import UserError
from harness.results.store import iter_results

from .conftest import ROOT, as_from_a_terminal, harness
from .planted_index import PlantedIndex
from .test_slurm import slurm as cluster  # noqa: F401 - the fixture: skips (or fails where required) without a cluster

QUICK = pytest.mark.quick

TF = {"2.10.0": "2022-09-06T12:00:00Z", "2.11.0": "2022-11-18T12:00:00Z", "2.12.0": "2023-03-23T12:00:00Z"}
# a CPU environment installs tensorflow-cpu, whose module is `tensorflow`
RELEASES = {"tensorflow": TF, "tensorflow-cpu": TF, "plantedextra": {"1.0": "2022-01-01T00:00:00Z"}}
MODULES = {"tensorflow-cpu": "tensorflow"}

# every minor of the planted TensorFlow; the script raises from 2.11 on
def every_minor(name: str, workload: str, script: str, more: str = "") -> str:
    """A matrix over every minor of the planted TensorFlow, one script workload."""
    return (f"name: {name}\nenvironments:\n  - {{python: \"3.11\", tensorflow: \">=2.10\"}}\n"
            f"releases: {{every: minor}}\nworkloads:\n  - {{name: {workload}, script: {script}}}\n"
            f"{more}timeouts: {{wall: 120, progress: 100}}\n")


BREAK = every_minor("atlas-break", "value", "value.py", "repeats: 2\nreseed: true\n")
BREAK_SCRIPT = """\
import tensorflow
from workloads.metrics import report

if tuple(int(x) for x in tensorflow.__version__.split(".")[:2]) >= (2, 11):
    raise AttributeError("planted: the API went in 2.11")
report("val_accuracy", 0.5)
"""
# an explicit range (every release in it), with a package of its own: its virtualenvs are not
# the other matrix's. The script raises on 2.10 only; elsewhere its accuracy is its seed's
VALUE = """\
name: atlas-value
environments:
  - {python: "3.11", tensorflow: ">=2.10,<2.13", packages: ["plantedextra==1.0"]}
workloads:
  - {name: score, script: score.py}
repeats: 2
reseed: true
timeouts: {wall: 120, progress: 100}
"""
SCORE_SCRIPT = """\
import json
import os

import plantedextra
import tensorflow
from workloads.metrics import report

if tensorflow.__version__.startswith("2.10."):
    raise ImportError("planted: 2.10 lacks what this needs")
spec = json.load(open(os.environ["HARNESS_SPEC"]))
report("val_accuracy", 0.8 + 0.01 * (spec["training_seed"] - spec["seed"]))
"""
ENVIRONMENTS = {(m, f"tf{v}") for m in ("atlas-break", "atlas-value") for v in ("2.10", "2.11", "2.12")}
CELLS = 12            # 6 environments x 2 repeats
RELEASE_OF = {"2.10": "2.10.0", "2.11": "2.11.0", "2.12": "2.12.0"}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The atlas folder (two matrices and their scripts) and the planted index's variables."""
    root = tmp_path_factory.mktemp("atlas")
    folder = root / "atlas"
    folder.mkdir()
    (folder / "break.yaml").write_text(BREAK)
    (folder / "value.py").write_text(BREAK_SCRIPT)
    (folder / "value.yaml").write_text(VALUE)
    (folder / "score.py").write_text(SCORE_SCRIPT)
    with PlantedIndex(RELEASES, modules=MODULES) as served:
        yield root, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def atlas(env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return harness("atlas", *args, env=env, timeout=timeout)


def said(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-4000:] + proc.stderr[-4000:]


def log_of(results: Path) -> list[dict]:
    path = results / "atlas-run.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def virtualenvs(cache: Path) -> list[Path]:
    """The virtualenv folders under a harness cache (their build locks are files beside them)."""
    where = cache / "venvs"
    return sorted(p for p in where.iterdir() if p.is_dir()) if where.is_dir() else []


def tensorflow_in(venv: Path) -> str:
    """The planted TensorFlow release a virtualenv holds, read from its installed module."""
    [module] = venv.glob("lib/python*/site-packages/tensorflow/__init__.py")
    return module.read_text().split('"')[1]


@pytest.fixture(scope="module")
def ran(planted):
    """The atlas run three times on one results folder: first two environments only (`--only`
    twice: either), then the whole atlas (which owes the rest), then again (which owes nothing)."""
    root, env = planted
    results = root / "r"
    first = atlas(env, "run", str(root / "atlas"), "--results", str(results), "--only", "tf2.10", "--only", "tf2.11")
    assert first.returncode == 0, said(first)
    after_first = log_of(results)
    full = atlas(env, "run", str(root / "atlas"), "--results", str(results))
    assert full.returncode == 0, said(full)
    after_full, venvs_after_full = log_of(results), virtualenvs(root / "cache")
    log_full = (results / "atlas-run.jsonl").read_bytes()
    again = atlas(env, "run", str(root / "atlas"), "--results", str(results))
    return {"results": results, "first": after_first, "full": after_full, "venvs": venvs_after_full,
            "log_full": log_full, "again": again, "log_again": (results / "atlas-run.jsonl").read_bytes(),
            "venvs_again": virtualenvs(root / "cache")}


@QUICK
def test_a_run_measures_every_environment_and_removes_each_once_done(planted, ran):
    """Every environment of every matrix in the folder runs; every cell gets a result (failing
    cells too: the run exits 0); the log holds one line per environment with its cells, time and
    disk, each removed -- and the virtualenvs and their own uv caches are gone from the disk."""
    root, _ = planted
    log = ran["full"]
    assert sorted((e["matrix"], e["environment"]) for e in log) == sorted(ENVIRONMENTS), log
    for entry in log:
        assert entry["cells"] == 2 and entry["left"] == 0 and entry["rc"] == 0, entry
        assert entry["seconds"] > 0 and entry["disk_bytes"] > 0 and entry["removed"] is True, entry
    results = [r for _, r in iter_results(ran["results"])]
    assert len(results) == CELLS
    status = {(r["environment"], r["workload"], r["repeat"]): r["status"] for r in results}
    assert status == {**{(f"tf{v}", "value", n): ("ok" if v == "2.10" else "error")
                         for v in RELEASE_OF for n in (0, 1)},
                      **{(f"tf{v}", "score", n): ("error" if v == "2.10" else "ok")
                         for v in RELEASE_OF for n in (0, 1)}}, status
    assert ran["venvs"] == [], ran["venvs"]                       # the disk bound: none kept
    uv = root / "cache" / "atlas-uv"
    assert not uv.exists() or not any(uv.iterdir()), list(uv.iterdir())


@QUICK
def test_a_run_resumes_and_a_finished_atlas_runs_nothing(ran):
    """A run limited by name (`--only tf2.10 --only tf2.11`: those environments of each matrix) runs
    those; the next run runs only the others (those are complete, never run again); a third finds
    every cell done: no environment is run or built, the log gains no line, and it exits 0."""
    first = [(m, f"tf{v}") for m in ("atlas-break", "atlas-value") for v in ("2.10", "2.11")]
    assert sorted((e["matrix"], e["environment"]) for e in ran["first"]) == first
    full = [(e["matrix"], e["environment"]) for e in ran["full"]]
    assert sorted(full[:4]) == first and len(full) == len(set(full)) == len(ENVIRONMENTS), full
    again = ran["again"]
    assert again.returncode == 0, said(again)
    assert ran["log_again"] == ran["log_full"]                   # not a line more
    assert ran["venvs_again"] == []                                # nothing built to find that out


@pytest.fixture(scope="module")
def kept(planted):
    """One environment of one matrix file, run with --keep into a cache and results of its own;
    then the same again without --keep."""
    root, env = planted
    env = {**env, "HARNESS_CACHE": str(root / "cache-keep")}
    results = root / "r-keep"
    proc = atlas(env, "run", str(root / "atlas" / "break.yaml"), "--results", str(results), "--keep",
                 "--only", "tf2.12")
    assert proc.returncode == 0, said(proc)
    venvs, log = virtualenvs(root / "cache-keep"), log_of(results)
    again = atlas(env, "run", str(root / "atlas" / "break.yaml"), "--results", str(results), "--only", "tf2.12")
    return {"results": results, "venvs": venvs, "log": log, "again": again,
            "venvs_again": virtualenvs(root / "cache-keep")}


@QUICK
def test_keep_leaves_the_environment_on_disk(kept):
    """`--keep`: the environment's line says it was not removed, and its virtualenv, holding the
    release it measured, is still there; a later run without --keep that owes nothing neither
    runs nor removes it."""
    assert [(e["environment"], e["removed"], e["left"]) for e in kept["log"]] == [("tf2.12", False, 0)]
    [venv] = kept["venvs"]
    assert tensorflow_in(venv) == "2.12.0"
    assert kept["again"].returncode == 0, said(kept["again"])
    assert log_of(kept["results"]) == kept["log"]
    assert kept["venvs_again"] == [venv] and tensorflow_in(venv) == "2.12.0"


# -- publish --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published(planted, ran):
    """`atlas publish` of the whole run's results: OUT/atlas/ and OUT/atlas.md."""
    root, env = planted
    out = root / "site" / "atlas"
    proc = atlas(env, "publish", "--results", str(ran["results"]), "--out", str(out))
    assert proc.returncode == 0, said(proc)
    return out


def _records(out: Path) -> list[dict]:
    return json.loads((out / "atlas.json").read_text())["records"]


def _row_key(record: dict) -> str:
    return f"{record['matrix']}/{record['environment']}"


@QUICK
def test_publish_writes_the_data_one_record_per_cell(published):
    """atlas.json (this schema, its fields, a record per cell with the stack each cell's process
    saw and, for the reseeded repeats, each its own seed) and atlas.csv (the same records, the
    fields as its header)."""
    data = json.loads((published / "atlas.json").read_text())
    assert data["schema"] == SCHEMA == 3 and data["fields"] == list(FIELDS)
    recs = data["records"]
    assert len(recs) == CELLS and all(list(r) == list(FIELDS) for r in recs)
    assert {(r["matrix"], r["environment"]) for r in recs} == ENVIRONMENTS
    for r in recs:
        release = RELEASE_OF[r["environment"].removeprefix("tf")]
        assert r["tensorflow"] == release and r["python"].startswith("3.11"), r
        assert r["training_seed"] == 1234 + r["repeat"], r        # reseed: each repeat its own seed
        assert r["cutoff"] and r["cutoff"] > TF[release], r        # resolved as of its release
    ok = [r for r in recs if r["status"] == "ok"]
    assert sorted((r["workload"], r["tensorflow"], r["val_accuracy"]) for r in ok) == [
        ("score", "2.11.0", 0.8), ("score", "2.11.0", 0.81), ("score", "2.12.0", 0.8), ("score", "2.12.0", 0.81),
        ("value", "2.10.0", 0.5), ("value", "2.10.0", 0.5)]
    assert all(r["family"] for r in recs if r["status"] != "ok")
    text = (published / "atlas.csv").read_text()
    assert next(csv.reader(io.StringIO(text))) == list(FIELDS)
    assert from_csv(text) == recs


@QUICK
def test_publish_finds_the_break_and_the_mend_at_their_releases(published):
    """changes.json: the break in one matrix's column at 2.11 (after its 2.10 row), the mend in
    the other's at 2.11, and nothing else: the seeds' accuracies do not move. The two matrices
    measured the same stacks, so each stack is one row (under the first matrix) holding both
    columns."""
    found = json.loads((published / "changes.json").read_text())
    moved = sorted((c["kind"], c["column"], c["before"], c["after"]) for c in found)
    assert moved == [("broke", "value none-c1", "atlas-break/tf2.10", "atlas-break/tf2.11"),
                     ("mended", "score none-c1", "atlas-break/tf2.10", "atlas-break/tf2.11")], found
    assert len({c["id"] for c in found}) == len(found)
    [broke] = [c for c in found if c["kind"] == "broke"]
    assert any(e.get("command") for e in broke["evidence"]), broke   # how to narrow it further


@QUICK
def test_explain_bisects_each_change_to_its_release_and_publish_links_it(planted, published, tmp_path):
    """`atlas explain` on the published data: the break and the mend each bisected between their
    rows' releases (the first bad and the first good TensorFlow: 2.11.0), each record kept as
    evidence under its change's id and each bundle under --out (even where a run's results sit in
    the folder above the bisects' results, as in `results/`); publishing again links it from the
    change; a second explain bisects nothing (every change has its evidence)."""
    _, env = planted
    out = tmp_path / "site" / "atlas"
    shutil.copytree(published, out)
    args = ("explain", "--data", str(out / "atlas.json"), "--evidence", str(out / "evidence"),
            "--results", str(tmp_path / "results" / "atlas-explain"), "--out", str(tmp_path / "bundles"),
            "--no-nightly")
    # a run's results already in the folder above the bisects' (as `results/` after `harness run`)
    shutil.copytree(published.parent.parent / "r" / "atlas-break", tmp_path / "results" / "atlas-break")
    proc = atlas(env, *args)
    assert proc.returncode == 0, said(proc)
    found = {c["kind"]: c for c in json.loads((out / "changes.json").read_text())}
    broke = json.loads((out / "evidence" / f"{found['broke']['id']}.json").read_text())
    mended = json.loads((out / "evidence" / f"{found['mended']['id']}.json").read_text())
    assert (broke["package"], broke["first_bad"], broke["last_good"]) == ("tensorflow", "2.11.0", "2.10.0"), said(proc)
    assert (mended["first_good"], mended["last_bad"]) == ("2.11.0", "2.10.0"), mended
    assert broke["command"].startswith("python -m harness bisect ") and "--package tensorflow" in broke["command"]
    assert list((tmp_path / "bundles" / "bundles").iterdir()), "each bisect's bundle, under --out"
    republished = atlas(env, "publish", "--data", str(out / "atlas.json"), "--out", str(out))
    assert republished.returncode == 0, said(republished)
    linked = {c["kind"]: [e["link"] for e in c["evidence"] if e.get("link")]
              for c in json.loads((out / "changes.json").read_text())}
    assert linked == {"broke": [f"atlas/evidence/{found['broke']['id']}.json"],
                      "mended": [f"atlas/evidence/{found['mended']['id']}.json"]}, linked
    again = atlas(env, *args)
    assert again.returncode == 0 and "0 change(s) explained" in again.stdout, said(again)


@QUICK
def test_publish_writes_the_feed_the_row_pages_and_the_main_page(published):
    """feed.xml is Atom with an entry per row and per change, each id once, each linking a row
    page that was written; a page per row under rows/; the main page beside the folder, its
    table's stack links leading to those pages; a plot where two or more rows trained."""
    recs, found = _records(published), json.loads((published / "changes.json").read_text())
    keys = {_row_key(r) for r in recs}
    pages = {p.stem for p in (published / "rows").glob("*.md")}
    assert len(keys) == 6 and len(pages) == 3  # two matrices measured the same three stacks: a row each
    atom = "{http://www.w3.org/2005/Atom}"
    feed = ET.parse(published / "feed.xml").getroot()
    assert feed.tag == f"{atom}feed"
    entries = feed.findall(f"{atom}entry")
    assert len(entries) == len(pages) + len(found), [e.findtext(f"{atom}title") for e in entries]
    ids = [e.findtext(f"{atom}id") for e in entries]
    assert len(set(ids)) == len(ids) and all(ids)
    for entry in entries:
        href = entry.find(f"{atom}link").get("href")
        assert href.startswith("rows/") and href.endswith(".html"), href
        assert (published / href).with_suffix(".md").is_file(), href
    main = published.parent / "atlas.md"
    page = main.read_text()
    assert 'id="atlas-table"' in page
    links = _Links.of(page)
    rows = [h for h in links if h.startswith("atlas/rows/")]
    assert len(rows) == len(pages)
    assert all((main.parent / h).with_suffix(".md").is_file() for h in rows), rows
    plots = sorted((published / "plots").glob("*.png"))
    assert len(plots) == 1, plots                # only the score column trained on two rows
    assert plots[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"atlas/plots/{plots[0].name}" in page


@QUICK
def test_a_row_pages_command_run_as_written_measures_that_row_again(planted, published, tmp_path):
    """The "run it again" command of a row page, as the page prints it (its matrix file as the atlas
    run named it), into a fresh results folder: the row's cells, each with the status the atlas
    published for it."""
    _, env = planted
    page = (published / "rows" / "atlas-break-tf2.11.md").read_text()
    commands = [line for line in page.splitlines() if line.startswith("python -m harness run ")]
    assert len(commands) == 2, commands  # one per matrix that measured the stack
    [command] = [c for c in commands if "break" in c]
    words = shlex.split(command)
    assert words[3] == "run" and "--engine" in words and "--only" in words, words
    proc = harness(*words[3:], "--results", str(tmp_path / "again"), env=env, timeout=600)
    published_status = {r["cell"]: r["status"] for r in _records(published) if r["environment"] == "tf2.11"
                        and r["matrix"] == "atlas-break"}
    again = {r["cell"]: r["status"] for _, r in iter_results(tmp_path / "again")}
    assert again == published_status and set(again.values()) == {"error"}, (again, said(proc))


@QUICK
def test_publishing_from_the_data_alone_gives_the_same_files(planted, published):
    """`publish --data atlas.json` (no results folder) writes the same data, changes, feed and
    pages, byte for byte, as the publication it was read from."""
    root, env = planted
    again = root / "site-again" / "atlas"
    proc = atlas(env, "publish", "--data", str(published / "atlas.json"), "--out", str(again),
                 "--results", str(root / "no-such-results"))
    assert proc.returncode == 0, said(proc)
    texts = sorted(p.relative_to(published).as_posix() for p in published.rglob("*")
                   if p.is_file() and p.suffix in (".json", ".csv", ".xml", ".md"))
    assert {"atlas.json", "atlas.csv", "changes.json", "feed.xml"} <= set(texts)
    for name in texts:
        assert (again / name).read_bytes() == (published / name).read_bytes(), name
    assert (again.parent / "atlas.md").read_bytes() == (published.parent / "atlas.md").read_bytes()


@QUICK
def test_publishing_a_slice_keeps_the_published_cells_it_does_not_hold(planted, published, kept):
    """A results folder holding one environment's cells (the --keep run's), published over an
    existing publication: those cells are there once, and every other published cell is kept."""
    root, env = planted
    out = root / "site-slice" / "atlas"
    shutil.copytree(published, out)
    proc = atlas(env, "publish", "--results", str(kept["results"]), "--out", str(out))
    assert proc.returncode == 0, said(proc)
    before, after = _records(published), _records(out)
    assert sorted(r["cell"] for r in after) == sorted(r["cell"] for r in before)
    assert {r["cell"] for r in after if r["environment"] == "tf2.12" and r["matrix"] == "atlas-break"} == \
        {"tf2.12/value/none-c1/b128/r0", "tf2.12/value/none-c1/b128/r1"}


@QUICK
def test_a_fresh_clone_runs_only_what_the_committed_data_lacks_and_says_the_cost_first(planted, published, tmp_path):
    """A fresh clone has the committed atlas and no results folder: `atlas run` runs nothing the
    data measured; with data that lacks an environment, it says what it owes before it runs it."""
    root, env = planted
    proc = atlas(env, "run", str(root / "atlas"), "--results", str(tmp_path / "fresh"),
                 "--data", str(published / "atlas.json"))
    assert proc.returncode == 0, said(proc)
    assert "ran 0" in proc.stdout and "0 cells without a result" in proc.stdout, said(proc)
    assert not log_of(tmp_path / "fresh")                                     # no environment was run
    data = json.loads((published / "atlas.json").read_text())
    data["records"] = [r for r in data["records"] if r["environment"] != "tf2.12"]
    (tmp_path / "lacking.json").write_text(json.dumps(data))
    proc = atlas(env, "run", str(root / "atlas"), "--results", str(tmp_path / "some"),
                 "--data", str(tmp_path / "lacking.json"))
    assert proc.returncode == 0, said(proc)
    lines = proc.stdout.splitlines()
    cost = next(i for i, line in enumerate(lines) if line.startswith("atlas: 2 environments owe"))
    assert cost < next(i for i, line in enumerate(lines) if "tf2.12: " in line), lines   # said before it ran
    assert {e["environment"] for e in log_of(tmp_path / "some")} == {"tf2.12"}
    # one cell missing from the data: that cell alone runs, not its environment's others
    data = json.loads((published / "atlas.json").read_text())
    gone = next(r for r in data["records"] if r["environment"] == "tf2.11")
    data["records"] = [r for r in data["records"] if r is not gone]
    (tmp_path / "one.json").write_text(json.dumps(data))
    proc = atlas(env, "run", str(root / "atlas"), "--results", str(tmp_path / "one"),
                 "--data", str(tmp_path / "one.json"))
    assert proc.returncode == 0, said(proc)
    [entry] = log_of(tmp_path / "one")
    assert (entry["matrix"], entry["environment"], entry["cells"], entry["left"]) == (gone["matrix"], "tf2.11", 1, 0)
    assert [r["cell"] for _, r in iter_results(tmp_path / "one")] == [gone["cell"]]


@QUICK
def test_a_fresh_unavailable_never_replaces_a_measured_committed_record():
    from harness.atlas.publish import merged
    old = [{"matrix": "m", "cell": "a", "status": "ok"}, {"matrix": "m", "cell": "b", "status": "ok"},
           {"matrix": "m", "cell": "c", "status": "ok"}]
    fresh = [{"matrix": "m", "cell": "a", "status": "unavailable", "family": "no Python 3.6 on this host"},
             {"matrix": "m", "cell": "b", "status": "error"}]
    recs, kept, moved = merged(fresh, old)
    assert {r["cell"]: r["status"] for r in recs} == {"a": "ok", "b": "error", "c": "ok"}
    assert [was["cell"] for _, was in kept] == ["a"] and [was["cell"] for _, was in moved] == ["b"]


# -- lookup -----------------------------------------------------------------------------------
def lookup(env: dict, data: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    proc = atlas(env, "lookup", *args, "--data", str(data), "--json", timeout=120)
    try:
        return proc, json.loads(proc.stdout)
    except ValueError:
        return proc, None


@QUICK
def test_lookup_of_pins_before_a_break_exits_1_and_names_it(planted, published):
    """A requirements file pinning TensorFlow 2.10.0: the nearest row is a 2.10.0 one, the target
    the newest release, and the break at 2.11 lies between them: exit 1, the break listed."""
    root, env = planted
    req = root / "requirements.txt"
    req.write_text("# a project's pins\ntensorflow==2.10.0\nrequests==2.31.0\n")
    proc, answer = lookup(env, published / "atlas.json", "-r", str(req))
    assert proc.returncode == 1, said(proc)
    assert answer["pins"]["tensorflow"] == "2.10.0"
    assert answer["nearest"][0]["stack"]["tensorflow"] == "2.10.0"
    assert answer["target"]["stack"]["tensorflow"] == "2.12.0" and answer["direction"] == "up"
    assert ("broke", "atlas-break/tf2.11") in {(c["kind"], c["after"]) for c in answer["changes"]}
    plain = atlas(env, "lookup", "-r", str(req), "--data", str(published / "atlas.json"))
    assert plain.returncode == 1 and "atlas-break/tf2.11" in plain.stdout, said(plain)


@QUICK
def test_lookup_of_pins_past_the_break_exits_0(planted, published):
    """Pins already at the newest release (an argument, the -cpu package's name): no break lies
    ahead of them, exit 0."""
    _, env = planted
    proc, answer = lookup(env, published / "atlas.json", "tensorflow-cpu==2.12.0")
    assert proc.returncode == 0, said(proc)
    assert answer["nearest"][0]["stack"]["tensorflow"] == "2.12.0"
    assert not [c for c in answer["changes"] if c["kind"] == "broke"], answer["changes"]


@QUICK
def test_lookup_to_a_target_release_lists_every_change_at_that_release(planted, published):
    """`--target tensorflow==2.11.0` from 2.10.0: both matrices change at 2.11 (one breaks, one
    mends), so both changes are on the way, as both are when the target is left to default."""
    _, env = planted
    proc, answer = lookup(env, published / "atlas.json", "tensorflow==2.10.0", "--target", "tensorflow==2.11.0")
    assert proc.returncode == 1, said(proc)
    assert answer["target"]["stack"]["tensorflow"] == "2.11.0"
    assert {(c["kind"], c["after"]) for c in answer["changes"]} == {
        ("broke", "atlas-break/tf2.11"), ("mended", "atlas-break/tf2.11")}, answer["changes"]


@QUICK
def test_lookup_down_to_an_older_target_judges_the_changes_it_crosses_backwards(planted, published, tmp_path):
    """Each matrix's rows alone (its records of the published data), from 2.12.0 down to 2.10.0:
    the score workload, mended at 2.11, fails again at 2.10 -- the move breaks it, exit 1; the
    value workload, broken at 2.11, works again at 2.10 -- nothing breaks, exit 0."""
    _, env = planted
    data = json.loads((published / "atlas.json").read_text())
    for matrix, expected in (("atlas-value", 1), ("atlas-break", 0)):
        part = tmp_path / f"{matrix}.json"
        part.write_text(json.dumps({**data, "records": [r for r in data["records"] if r["matrix"] == matrix]}))
        proc, answer = lookup(env, part, "tensorflow==2.12.0", "--target", "tensorflow==2.10.0")
        assert answer["direction"] == "down" and answer["target"]["stack"]["tensorflow"] == "2.10.0", answer
        assert proc.returncode == expected, (matrix, answer["changes"])


# -- input that cannot be used: one line, exit 2, nothing written -----------------------------
BAD_MATRIX = """\
name: atlas-bad
environments: [{python: "3.11", tensorflow: ">=2.10"}]
workloads: [{script: v.py}]
repeets: 2
"""


@QUICK
@pytest.mark.parametrize("case", ["range-pin", "other-schema", "not-json", "no-pins", "run-missing",
                                  "run-bad-matrix", "publish-missing", "publish-empty", "publish-other-schema"])
def test_input_that_cannot_be_used_exits_2_naming_it(planted, tmp_path, case):
    """Each: exit 2, one line on stderr naming the file (and line or key) at fault, no traceback,
    nothing written where the command would have written."""
    _, env = planted
    data = tmp_path / "atlas.json"
    data.write_text(json.dumps({"schema": SCHEMA, "fields": list(FIELDS), "about": {}, "records": []}))
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": 1, "records": []}))
    out, results = tmp_path / "out" / "atlas", tmp_path / "results"
    if case == "range-pin":
        req = tmp_path / "requirements.txt"
        req.write_text("tensorflow>=2\n")
        args, named = ["lookup", "-r", str(req), "--data", str(data)], [f"{req}:1"]
    elif case == "other-schema":
        args, named = ["lookup", "tensorflow==2.10.0", "--data", str(old)], [str(old)]
    elif case == "not-json":
        (tmp_path / "broken.json").write_text("{not json")
        args, named = ["lookup", "tensorflow==2.10.0", "--data", str(tmp_path / "broken.json")], ["broken.json"]
    elif case == "no-pins":
        args, named = ["lookup", "--data", str(data)], []
    elif case == "run-missing":
        args, named = ["run", str(tmp_path / "no-atlas"), "--results", str(results)], [str(tmp_path / "no-atlas")]
    elif case == "run-bad-matrix":
        (tmp_path / "atlas").mkdir()
        (tmp_path / "atlas" / "bad.yaml").write_text(BAD_MATRIX)
        (tmp_path / "atlas" / "v.py").write_text("print(1)\n")
        args, named = ["run", str(tmp_path / "atlas"), "--results", str(results)], ["bad.yaml", "repeets"]
    elif case == "publish-missing":
        args, named = ["publish", "--results", str(results), "--out", str(out)], [str(results)]
    elif case == "publish-empty":
        results.mkdir()
        args, named = ["publish", "--results", str(results), "--out", str(out)], [str(results)]
    else:
        args, named = ["publish", "--data", str(old), "--out", str(out)], [str(old)]
    proc = atlas(env, *args, timeout=120)
    assert proc.returncode == 2, said(proc)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert all(n in proc.stderr for n in named), proc.stderr
    assert not out.exists() and not (out.parent / "atlas.md").exists()
    assert case == "publish-empty" or not results.exists() or not any(results.iterdir())


# -- the page's filters, in a browser ------------------------------------------------------------
class _Links(HTMLParser):
    """Every href of a page's HTML, and its table rows' attributes (filter data, hidden)."""

    def __init__(self):
        super().__init__()
        self.hrefs, self.rows, self.cells = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        if tag == "tr" and "data-tensorflow" in a:
            self.rows.append(a)
        if tag in ("td", "th") and "data-workload" in a:
            self.cells.append(a)

    @classmethod
    def of(cls, text: str) -> list[str]:
        return cls.parsed(text).hrefs

    @classmethod
    def parsed(cls, text: str) -> _Links:
        p = cls()
        p.feed(text)
        return p


@QUICK
def test_the_table_filters_by_the_address_in_a_browser(tmp_path, published):
    """The page's table and its filter script, opened in headless Chromium at an address that
    names a TensorFlow minor and a workload (as a shared link does): only that minor's rows and
    that workload's columns stay shown, the filters list the rows' values, no script error.
    (`_browse` opens a file without a fragment, so the page sets it first, as following such a
    link would, before the atlas's own script reads it.)"""
    from .test_report import _browse
    page = (published.parent / "atlas.md").read_text()
    start, end = page.index('<div class="atlas-filters"'), page.index("</script>") + len("</script>")
    shown = tmp_path / "atlas.html"
    shown.write_text('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>atlas</title></head><body>\n'
                     '<script>history.replaceState(null, "", "#tensorflow=2.11&workload=score");</script>\n'
                     f"{page[start:end]}\n</body></html>\n")
    dom, errors = _browse(shown)
    assert errors == [], errors
    found = _Links.parsed(dom)
    assert len(found.rows) == 3  # a row per stack
    visible = [r for r in found.rows if "hidden" not in r]
    assert {r["data-tensorflow"] for r in visible} == {"2.11"} and len(visible) == 1, found.rows
    assert 'data-shown="1"' in dom
    assert {c["data-workload"] for c in found.cells if "hidden" not in c} == {"score"}
    assert any(c["data-workload"] == "value" and "hidden" in c for c in found.cells)
    for minor in RELEASE_OF:
        assert f'<option value="{minor}">{minor}</option>' in dom


# -- an interrupted atlas resumes where it stopped --------------------------------------------
STOP = every_minor("atlas-stop", "slow", "slow.py")
SLOW_SCRIPT = """\
import os
import time

if not os.path.exists(%(go)r):
    open(%(started)r, "w").close()
    time.sleep(100)
"""


def _ignoring_ctrl_c() -> None:
    """As a background job of a non-interactive shell starts (`nohup ... &` in a script): SIGINT
    ignored, which Python and every process it starts then keep."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@QUICK
@pytest.mark.parametrize("how", ["ctrl-c", "term-in-the-background"])
def test_an_interrupted_atlas_stops_there_and_a_second_run_finishes_it(planted, tmp_path, how):
    """Ctrl-C during the first environment (the terminal's whole group), or SIGTERM to the atlas
    alone started as a background job (SIGINT ignored, so it must pass TERM on): the atlas stops
    (exit 130) without going on to the next environments, and leaves no process behind; the next
    run runs what is missing -- every environment -- and exits 0."""
    _, env = planted
    env = {**env, "HARNESS_CACHE": str(tmp_path / "cache")}
    go, started = tmp_path / "go", tmp_path / "started"
    (tmp_path / "stop.yaml").write_text(STOP)
    (tmp_path / "slow.py").write_text(SLOW_SCRIPT % {"go": str(go), "started": str(started)})
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "harness", "atlas", "run", str(tmp_path / "stop.yaml"), "--results", str(results)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=as_from_a_terminal if how == "ctrl-c" else _ignoring_ctrl_c)
    try:
        deadline = time.monotonic() + 180
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), proc.communicate(timeout=60)[0][-3000:] if proc.poll() is not None else "no start"
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)               # Ctrl-C: the terminal's whole group
        else:
            os.kill(proc.pid, signal.SIGTERM)                # `kill PID`: the atlas alone
        out, _ = proc.communicate(timeout=50)                # before the child's 60 s grace for a deaf child
        leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out[-3000:]
    assert leftovers == [], leftovers                        # no harness run, no cell left running
    reached = {r["environment"]: r["status"] for _, r in iter_results(results)}
    assert set(reached) <= {"tf2.10"} and "ok" not in reached.values(), reached
    assert {e["environment"] for e in log_of(results)} <= {"tf2.10"}   # nothing after the one interrupted
    go.write_text("")
    again = atlas(env, "run", str(tmp_path / "stop.yaml"), "--results", str(results))
    assert again.returncode == 0, said(again)
    final = {r["environment"]: r["status"] for _, r in iter_results(results)}
    assert final == {"tf2.10": "ok", "tf2.11": "ok", "tf2.12": "ok"}, final
    assert {e["environment"] for e in log_of(results) if e["left"] == 0} == {"tf2.10", "tf2.11", "tf2.12"}
    assert virtualenvs(tmp_path / "cache") == []


# -- the real slice ---------------------------------------------------------------------------
# The environment the other TensorFlow tests use (tests/test_local_engine.py, test_report.py,
# test_hostile_input.py): an exact pin, no cut-off, so its virtualenv is theirs
REAL = """\
name: atlas-real
environments:
  - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
workloads:
  - {name: gru, model: rnn, cell: gru, layers: 1, units: 8, dense: 8, timesteps: 8, features: 4, classes: 4,
     samples: 512}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: make_parallel, devices: 2}
epochs: 2
repeats: 2
reseed: true
exclude:
  - {devices: 2, repeat: 1}            # the spread is measured on one device
timeouts: {wall: 900, progress: 600}
"""


@pytest.fixture(scope="module")
def real_slice(tmp_path_factory):
    """The real slice run (`--keep`, so the shared virtualenv stays) and published: its folder,
    the run's output, the run's log, the published folder and the virtualenv."""
    from harness.engines.venv import VenvEngine
    from harness.files import paths
    from harness.matrix import load
    root = tmp_path_factory.mktemp("real")
    (root / "atlas").mkdir()
    (root / "atlas" / "real.yaml").write_text(REAL)
    [environment] = load(root / "atlas" / "real.yaml").environments
    venv = VenvEngine().location(environment)
    # the uv cache `atlas run` installs this environment from, should it build it: the atlas
    # names it like the virtualenv (drive.uv_cache); other atlas runs' caches are theirs
    uv = paths.cache_dir() / "atlas-uv" / venv.name
    had_uv = uv.exists()
    try:
        proc = harness("atlas", "run", str(root / "atlas"), "--results", str(root / "r"), "--keep", timeout=1800)
    finally:
        if not had_uv:                               # the virtualenv holds its files (hard links): the
            shutil.rmtree(uv, ignore_errors=True)    # copy in the cache is what --keep would leave over
    assert proc.returncode == 0, said(proc)
    pub = harness("atlas", "publish", "--results", str(root / "r"), "--out", str(root / "site" / "atlas"),
                  timeout=600)
    assert pub.returncode == 0, said(pub)
    return {"root": root, "log": log_of(root / "r"), "out": root / "site" / "atlas", "venv": venv}


@pytest.mark.tf
def test_a_real_slice_runs_and_publishes_real_numbers(real_slice):
    """A tiny GRU on real TensorFlow 2.15, as the atlas runs it: two reseeded repeats on one
    device, one cell on two virtual CPU devices. `--keep`, so the shared virtualenv stays. The
    records hold real accuracies, each one-device repeat its own seed, the two-device cell's
    evidence that both devices trained; the row's page is written."""
    assert (real_slice["venv"] / "bin" / "python").exists()   # kept: the other tests' virtualenv is still there
    [entry] = real_slice["log"]
    assert (entry["environment"], entry["cells"], entry["left"], entry["removed"]) == ("tf2.15", 3, 0, False)
    out = real_slice["out"]
    recs = _records(out)
    assert len(recs) == 3 and {r["status"] for r in recs} == {"ok"}, recs
    assert {r["tensorflow"] for r in recs} == {"2.15.0"} and all(r["keras"] for r in recs), recs
    for r in recs:
        assert isinstance(r["val_accuracy"], float) and 0.0 <= r["val_accuracy"] <= 1.0, r
        assert r["chance"] == 0.25 and r["epochs"] == 2 and r["samples_per_sec"] != "", r
    one = [r for r in recs if r["devices"] == 1]
    assert sorted(r["repeat"] for r in one) == [0, 1]
    assert len({r["training_seed"] for r in one}) == 2, one
    [two] = [r for r in recs if r["devices"] == 2]
    assert two["wrapper"] == "make_parallel" and two["devices_trained"] == 2, two
    assert (out / "rows" / "atlas-real-tf2.15.md").is_file() and (out.parent / "atlas.md").is_file()
    assert isinstance(json.loads((out / "changes.json").read_text()), list)


@pytest.mark.tf
def test_explain_follows_a_two_device_finding_layer_by_layer(real_slice, tmp_path):
    """A two-device finding (planted in the data: the slice's two-device accuracy moved far outside
    its one-device range) is explained by a real `diverge` of the row's one-device cell and its
    two-device cell: the evidence under the change's id holds the diverge's command and verdict,
    and the next publish links it."""
    out = tmp_path / "site" / "atlas"
    shutil.copytree(real_slice["out"], out)
    data = json.loads((out / "atlas.json").read_text())
    one = [r["val_accuracy"] for r in data["records"] if r["devices"] == 1]
    for r in data["records"]:
        if r["devices"] == 2:
            r["val_accuracy"] = 0.0 if min(one) > 0.1 else 1.0
    (out / "atlas.json").write_text(json.dumps(data))
    published = harness("atlas", "publish", "--data", str(out / "atlas.json"), "--out", str(out), timeout=600)
    assert published.returncode == 0, said(published)
    [found] = [c for c in json.loads((out / "changes.json").read_text()) if c["kind"] == "devices"]
    assert any(e.get("command", "").startswith("python -m harness diverge ") for e in found["evidence"]), found
    proc = harness("atlas", "explain", "--data", str(out / "atlas.json"), "--evidence", str(out / "evidence"),
                   "--results", str(tmp_path / "explain"), "--out", str(tmp_path / "explained"),
                   "--change", found["id"], timeout=1800)
    assert proc.returncode == 0, said(proc)
    kept = json.loads((out / "evidence" / f"{found['id']}.json").read_text())
    assert kept["kind"] == "diverge" and kept["exit"] in (0, 1) and isinstance(kept["diverges"], bool), kept
    assert kept["diverges"] == (kept["exit"] == 1) and kept["summary"], kept
    assert kept["command"].startswith("python -m harness diverge ") and "none-c1" in kept["command"], kept
    assert list((tmp_path / "explained" / "diverge").rglob("divergence.json")), "its record and page, under --out"
    again = harness("atlas", "publish", "--data", str(out / "atlas.json"), "--out", str(out), timeout=600)
    assert again.returncode == 0, said(again)
    [linked] = [c for c in json.loads((out / "changes.json").read_text()) if c["id"] == found["id"]]
    assert [e["link"] for e in linked["evidence"] if e.get("link")] == [f"atlas/evidence/{found['id']}.json"]


# -- on a cluster ------------------------------------------------------------------------------
@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_on_a_cluster_each_environment_is_a_job_array_waited_for_then_removed(planted, tmp_path):
    """`atlas run --executor slurm`: each environment is built here, its cells submitted as one job
    array and waited for; only then is it removed. Every cell's result comes from an array task, and
    the disk holds no environment at the end."""
    _, env = planted
    folder = tmp_path / "atlas"
    folder.mkdir()
    (folder / "break.yaml").write_text(BREAK)
    (folder / "value.py").write_text(BREAK_SCRIPT)
    cache = tmp_path / "cache"
    env = {**env, "HARNESS_CACHE": str(cache)}
    results = tmp_path / "r"
    proc = atlas(env, "run", str(folder), "--results", str(results), "--executor", "slurm", timeout=1200)
    assert proc.returncode == 0, said(proc)
    log = log_of(results)
    assert sorted(e["environment"] for e in log) == ["tf2.10", "tf2.11", "tf2.12"], log
    assert all(e["left"] == 0 and e["removed"] for e in log), log
    results_ = [r for _, r in iter_results(results)]
    assert len(results_) == 6
    assert all(r["provenance"]["slurm"]["job"] for r in results_), [r["provenance"].get("slurm") for r in results_]
    assert {r["environment"]: r["status"] for r in results_} == {"tf2.10": "ok", "tf2.11": "error", "tf2.12": "error"}
    assert virtualenvs(cache) == []


# -- the release notes, held against the rows -------------------------------------------------
def _record(**values) -> dict:
    return {**dict.fromkeys(FIELDS, ""), "schema": SCHEMA, "devices": 1, "repeat": 0, **values}


@QUICK
def test_a_row_that_contradicts_a_release_note_is_named():
    """Each release note is held against the rows it speaks of: a TF 2.16 row whose tf.keras is not
    Keras 3 (the harness imported the wrong Keras) is named as disagreeing; a right one agrees; a
    note no row speaks of says so."""
    from harness.atlas import notes, rows

    base = {"workload": "gru", "model": "gru", "wrapper": "none", "status": "ok", "tensorflow": "2.16.2",
            "python": "3.12.1", "keras_api": "keras3"}
    table = rows.build([_record(matrix="m", environment="right", cell="right/gru/none-c1/b128/r0", keras="3.4.1",
                                **base),
                        _record(matrix="m", environment="wrong", cell="wrong/gru/none-c1/b128/r0", keras="2.16.0",
                                **{**base, "keras_api": "tf.keras"})])
    by_note = {c["says"]: c for c in notes.check(table)}
    tf216 = next(c for says, c in by_note.items() if says.startswith("From TensorFlow 2.16"))
    assert tf216["rows"] == 2 and tf216["disagree"] == ["m/wrong"], tf216
    jax = next(c for says, c in by_note.items() if "JAX" in says)
    assert jax["rows"] == 0 and jax["disagree"] == []


@QUICK
def test_explain_bisects_in_the_before_rows_environment_where_an_end_does_not_install_in_the_afters():
    """TF 2.1.4 has no wheels for the Python of TF 2.2.3's row: a bisect in the after-row's environment
    cannot judge its old end (`unavailable`), so explain plans it again in the before-row's
    environment, where both releases install; an end skipped for another reason is the answer."""
    from harness.atlas import changes, explain, rows

    def rec(env, tf, python):
        return _record(matrix="atlas-tf2", matrix_file="matrices/atlas/tf2.yaml", environment=env,
                       cell=f"{env}/gru-2x32/none-c1/b128/r0", workload="gru-2x32", model="gru", wrapper="none",
                       status="ok", python=python, tensorflow=tf, keras="2.3.0-tf", keras_api="tf.keras",
                       numpy="1.18.5", samples_per_sec=100.0 if tf < "2.2" else 300.0, samples_per_sec_min=90.0
                       if tf < "2.2" else 280.0, samples_per_sec_max=110.0 if tf < "2.2" else 320.0)
    table = rows.build([rec("tf2.1.4-tensorflow", "2.1.4", "3.7.16"), rec("tf2.2.3", "2.2.3", "3.8.18")])
    change = changes.at("keras2", "gru-2x32 none-c1", "faster", "atlas-tf2/tf2.1.4-tensorflow",
                        "atlas-tf2/tf2.2.3", "samples/s x3.00", 3.0)
    by_key = {r.key: r for r in table}
    after, before = (explain.plan(change, by_key, nightly=False, side=side) for side in ("after", "before"))
    assert after[after.index("--cell") + 1] == "tf2.2.3/gru-2x32/none-c1/*", after
    assert before[before.index("--cell") + 1] == "tf2.1.4-tensorflow/gru-2x32/none-c1/*", before
    assert before[before.index("--old") + 1:before.index("--old") + 4] == ["2.1.4", "--new", "2.2.3"]

    def kept(why_old: str) -> dict:
        return {"versions": ["2.1.4", "2.2.0", "2.2.3"],
                "tested": {"2.1.4": {"verdict": "skip", "why": why_old}, "2.2.3": {"verdict": "good", "why": ""}}}
    assert explain._an_end_not_installed(kept("unavailable: no wheel for cp38"))
    assert not explain._an_end_not_installed(kept("flaky: 1 ok, 2 error"))
    assert not explain._an_end_not_installed({"versions": [], "tested": {}})


@QUICK
def test_a_speed_shift_is_a_candidate_until_run_side_by_side_then_confirmed_or_refuted(tmp_path):
    """A speed shift between rows starts as a candidate; `explain`'s record for it (both releases in
    one session) makes it confirmed when the bisect found the newer end the worse for a slow-down (the
    older for a speed-up), refuted when it found no difference or the other way; a change of another
    kind has no such standing."""
    from harness.atlas import explain
    from harness.atlas.changes import at, standing
    from harness.claims import Change

    def shift(kind: str, after: str) -> Change:
        return at("keras2", "gru-2x32 none-c1", kind, "m/a", after, "samples/s x0.70", 0.7, confirmed=False)
    found = [shift("slower", "m/b-slower"), shift("faster", "m/b-faster"), shift("slower", "m/c"),
             shift("faster", "m/d"), at("keras2", "gru-2x32 none-c1", "broke", "m/a", "m/b", "error")]
    assert [standing(c) for c in found] == ["candidate"] * 4 + [None]
    for change, direction in zip(found[:3], ("broke", "mended", "mended"), strict=True):  # the 4th: not run
        (tmp_path / f"{change.id}.json").write_text(json.dumps({"package": "tensorflow", "direction": direction,
                                                                 "problem": None}))
    explain.attach(found, tmp_path, "evidence")
    # a slow-down found with the newer end the worse, a speed-up with the older: confirmed; a slow-down
    # whose newer end was the faster side by side: refuted
    assert [standing(c) for c in found] == ["confirmed", "confirmed", "refuted", "candidate", None]
    # refuted the other way: the verdict names the direction found, never the rows' one struck through alone
    assert "the other way: faster" in found[2].detail and "other way" not in found[0].detail + found[3].detail


@QUICK
def test_a_speed_shift_whose_side_by_side_medians_moved_as_claimed_is_unresolved_not_refuted(tmp_path):
    """The bisect called the ends alike (their ranges overlapped: one end noisy) while its own medians,
    run side by side, moved x1.69 as the rows claim, past its threshold: the change is neither
    confirmed nor refuted, and its evidence says why with the figures; medians that did not move
    leave it refuted."""
    from harness.atlas import explain
    from harness.atlas.changes import at, standing

    def record(old: float, new: float) -> dict:
        return {"package": "tensorflow", "direction": None, "problem": "the ends do not differ: both good",
                "command": "python -m harness bisect m.yaml --package tensorflow --old 2.1.4 --new 2.2.3 "
                           "--speed-drop 20", "versions": ["2.1.4", "2.2.3"],
                "tested": {"2.1.4": {"evidence": {"samples_per_sec": {"median": old}}},
                           "2.2.3": {"evidence": {"samples_per_sec": {"median": new}}}}}

    moved, still = (at("keras2", f"{w}-2x32 none-c1", "faster", "m/a", "m/b", "samples/s x3.26", 3.26,
                       confirmed=False) for w in ("gru", "lstm"))
    (tmp_path / f"{moved.id}.json").write_text(json.dumps(record(7908.0, 13347.0)))
    (tmp_path / f"{still.id}.json").write_text(json.dumps(record(7908.0, 8100.0)))
    explain.attach([moved, still], tmp_path, "evidence")
    assert (standing(moved), standing(still)) == ("unresolved", "refuted")
    assert "x1.69 (7,908 -> 13,347 samples/s), past its 20% threshold" in moved.evidence[0]["what"]


@QUICK
def test_a_stack_two_matrices_measured_is_one_row_whose_records_keep_their_matrix():
    """One stack (the same versions) measured by two matrices is one row, under the matrix that measured
    most of it: the other's records join its columns as more repeats, and a repro command names the
    matrix that ran the record it quotes."""
    from harness.atlas import changes, rows

    pins = {"workload": "gru-2x32", "model": "gru", "wrapper": "none", "python": "3.12.1", "tensorflow": "2.17.1",
            "keras": "3.6.0", "keras_api": "keras3", "backend": "tensorflow", "numpy": "1.26.4"}
    recs = [_record(matrix="atlas-keras3", matrix_file="matrices/atlas/keras3.yaml", environment="tf2.17.1-keras3.6.0",
                    cell="tf2.17.1-keras3.6.0/gru-2x32/none-c1/b128/r0", status="ok", **pins),
            _record(matrix="atlas-tf2-keras3", matrix_file="matrices/atlas/tf2-keras3.yaml",
                    environment="tf2.17.1-keras3", cell="tf2.17.1-keras3/gru-2x32/none-c1/b128/r0", status="ok",
                    **pins),
            _record(matrix="atlas-tf2-keras3", matrix_file="matrices/atlas/tf2-keras3.yaml",
                    environment="tf2.17.1-keras3", cell="tf2.17.1-keras3/gru-2x32/mirrored-c2/b128/r0",
                    status="error", family="exception: ValueError", **{**pins, "wrapper": "mirrored"}, devices=2)]
    table = rows.build(recs)
    assert [r.key for r in table] == ["atlas-tf2-keras3/tf2.17.1-keras3"]
    assert len(table[0].entries["gru-2x32 none-c1"].records) == 2
    said = changes._status_evidence(table[0], "gru-2x32 mirrored-c2", "broke")
    assert any("matrices/atlas/tf2-keras3.yaml 'tf2.17.1-keras3/" in e.get("command", "") for e in said), said


@QUICK
def test_a_change_between_rows_names_every_package_that_moved_and_the_defaults_a_release_changed():
    """Neighbouring rows resolved as of their own weeks differ by more than the release: the change
    names each other package that moved, with both versions, and across TF 2.0 -- whose notes changed the
    GRU's defaults -- says the same code built another model, naming the defaults."""
    from harness.atlas import changes, rows

    def rec(env, tf, numpy, status):
        return _record(matrix="atlas-tf", environment=env, cell=f"{env}/gru-2x32/make_parallel-c2/b128/r0",
                       workload="gru-2x32", model="gru", wrapper="make_parallel", devices=2, status=status,
                       python="3.7.17", tensorflow=tf, keras="2.2.4-tf", keras_api="tf.keras", numpy=numpy,
                       family="exception: InvalidArgumentError" if status == "error" else "")
    table = rows.build([rec("tf1.15.5", "1.15.5", "1.18.5", "ok"), rec("tf2.0.4", "2.0.4", "1.19.5", "error")])
    broke = next(c for c in changes.find(table) if c.kind == "broke")
    assert "numpy moved too (1.18.5 -> 1.19.5)" in broke.detail, broke.detail
    assert "tensorflow 2.0.0 changed the GRU's defaults (reset_after" in broke.detail, broke.detail
    assert "keras moved" not in broke.detail  # tf.keras moves with TensorFlow: not another package


@QUICK
def test_a_model_whose_changed_defaults_are_pinned_on_both_sides_is_the_release_alone():
    """A column whose cells pinned the GRU's TF 1 defaults (`layer_args`) on 1.15.5 and on 2.0.4 built
    the same model on both: its change is the release's own, and says nothing of another model; the
    plain column between the same rows still does. A pin on one side only is not the same model."""
    from harness.atlas import changes, records, rows

    tf1 = {"reset_after": False, "recurrent_activation": "hard_sigmoid", "implementation": 1}

    def rec(env, tf, workload, status, pinned):
        return _record(matrix="atlas-tf", environment=env, cell=f"{env}/{workload}/make_parallel-c2/b128/r0",
                       workload=workload, model="gru", wrapper="make_parallel", devices=2, status=status,
                       python="3.7.17", tensorflow=tf, keras="2.2.4-tf", keras_api="tf.keras", numpy="1.18.5",
                       family="exception: InvalidArgumentError" if status == "error" else "",
                       layer_args=records.pinned_args(pinned))
    table = rows.build([rec("tf1.15.5", "1.15.5", "gru-2x32", "ok", {}),
                        rec("tf2.0.4", "2.0.4", "gru-2x32", "error", {}),
                        rec("tf1.15.5", "1.15.5", "gru-2x32-tf1args", "ok", tf1),
                        rec("tf2.0.4", "2.0.4", "gru-2x32-tf1args", "error", tf1),
                        rec("tf1.15.5", "1.15.5", "gru-2x32-half", "ok", tf1),
                        rec("tf2.0.4", "2.0.4", "gru-2x32-half", "error", {"reset_after": False})])
    broke = {c.where["column"].split()[0]: c.detail for c in changes.find(table) if c.kind == "broke"}
    assert "another model" in broke["gru-2x32"], broke
    assert "with them pinned on both (gru-2x32-tf1args): ok -> error" in broke["gru-2x32"], broke
    assert "another model" not in broke["gru-2x32-tf1args"] and "not this release alone" not in \
        broke["gru-2x32-tf1args"], broke
    assert "another model" in broke["gru-2x32-half"], broke
    assert records.layer_args(table[0].entries["gru-2x32-tf1args make_parallel-c2"].records[0]) == tf1


@QUICK
def test_atlas_data_of_the_schema_before_layer_args_still_reads(tmp_path):
    """Schema 3 added `layer_args` at the end of a record: a schema-2 file reads, the field empty."""
    from harness.atlas import records

    old = [{k: v for k, v in _record(matrix="m", environment="e", cell="e/gru/none-c1/b128/r0").items()
            if k != "layer_args"}]
    path = tmp_path / "atlas.json"
    path.write_text(json.dumps({"schema": 2, "fields": [f for f in FIELDS if f != "layer_args"], "about": {},
                                "records": old}))
    got, _ = records.read(path)
    assert got[0]["layer_args"] == "" and records.layer_args(got[0]) == {}
    path.write_text(json.dumps({"schema": 1, "fields": [], "about": {}, "records": []}))
    with pytest.raises(UserError, match=str(path)):
        records.read(path)


@QUICK
def test_a_wrapper_the_host_cannot_run_is_there_until_a_release_removes_it():
    """multi_gpu_model on CPU devices is `unsupported` for the host's reason on TF 2.3 and for the
    release's on TF 2.4 (tf.keras no longer has it): the wrapper goes at 2.4, a change of that release;
    between two rows where the host alone refuses it, nothing changed."""
    from harness.atlas import changes, rows

    def rec(tf, family):
        env = f"tf{tf}"
        return _record(matrix="atlas-tf2", environment=env, cell=f"{env}/gru-2x32/multi_gpu_model-c2/b128/r0",
                       workload="gru-2x32", model="gru", wrapper="multi_gpu_model", devices=2, status="unsupported",
                       python="3.8.18", tensorflow=tf, keras="2.4.0", keras_api="tf.keras", numpy="1.19.5",
                       family=family)
    host = "Keras' multi_gpu_model accepts GPUs only, these are virtual CPU devices"
    table = rows.build([rec("2.2.3", host), rec("2.3.4", host),
                        rec("2.4.4", "tf.keras 2.4.0 has no multi_gpu_model (tf.keras dropped it in TF 2.4)")])
    went = [c for c in changes.find(table) if c.kind == "wrapper"]
    assert [(c.before, c.after) for c in went] == [("atlas-tf2/tf2.3.4", "atlas-tf2/tf2.4.4")], went
    assert "no longer available (tf.keras 2.4.0 has no multi_gpu_model" in went[0].detail


@QUICK
def test_a_bisects_nights_are_said_by_the_build_that_ran_not_by_a_guess():
    """Where the nights do not narrow a release's change, the evidence names the build its search ran
    and what that build did, with its upload day -- never where the change might have come from."""
    from harness.atlas import explain

    night = {"nightly": "keras-nightly", "window": ["3.7.0.dev2024112603", "3.7.0.dev2024112703"],
             "uploaded": {"3.7.0.dev2024112703": "2024-11-27T03:30:00Z"},
             "problem": "the new end 3.7.0.dev2024112703 is not bad: good (1 ok) -- the change is not between two "
                        "nights of the main branch: it may have reached the release through its release branch"}
    said = explain._answer({"package": "keras", "first_bad": "3.7.0", "nightly": night})
    assert "keras-nightly 3.7.0.dev2024112703 (uploaded 2024-11-27) is not bad: good" in said, said
    assert "release branch" not in said


@QUICK
def test_two_devices_part_by_their_median_or_are_seed_sensitive_by_one_seed():
    """Against the row's one-device range (three seeds, widened by 0.02): a two-device column whose
    median lies outside it parts (`devices`); one whose median lies inside while one seed trains far
    below it -- the same seed inside it on one device -- is seed-sensitive (`devices-seed`), and its
    evidence compares that seed on one device and on two; a column within it is no finding."""
    from harness.atlas import changes, rows

    def cell(parallelism: str, repeat: int, accuracy: float) -> dict:
        rec = {name: "" for name in FIELDS}
        rec.update(schema=SCHEMA, matrix="atlas-p", matrix_file="p.yaml", environment="tf2.1.4", workload="conv",
                   model="convnet", wrapper=parallelism.split("-")[0], devices=1 if parallelism == "none-c1" else 2,
                   repeat=repeat, training_seed=1234 + repeat, status="ok", tensorflow="2.1.4", keras="2.3.0-tf",
                   val_accuracy=accuracy, chance=0.25, cell=f"tf2.1.4/conv/{parallelism}/b128/r{repeat}")
        return rec
    values = {"none-c1": (0.984, 0.986, 0.988), "make_parallel-c2": (0.760, 0.986, 0.986),
              "mirrored-c2": (0.90, 0.91, 0.99), "ratio-c2": (0.98, 0.985, 0.99)}
    table = rows.build([cell(p, r, v) for p, vs in values.items() for r, v in enumerate(vs)])
    found = {c.where["column"]: c for c in changes.find(table) if c.kind.startswith("devices")}
    assert {col: c.kind for col, c in found.items()} == {"conv make_parallel-c2": "devices-seed",
                                                         "conv mirrored-c2": "devices"}, found
    assert "seed 1234 trains to 0.760 on two devices, 0.984 on one" in found["conv make_parallel-c2"].detail
    assert changes.device_pair(table[0], "conv make_parallel-c2") == ("tf2.1.4/conv/none-c1/b128/r0",
                                                                       "tf2.1.4/conv/make_parallel-c2/b128/r0")


@QUICK
def test_a_keras_3_project_without_tensorflow_is_looked_up_on_the_backend_it_pins():
    """Pins of Keras 3 with JAX, or with torch, and no TensorFlow lead to that backend's line;
    with TensorFlow (or no backend at all) to the TensorFlow line; Keras 2 pins to the Keras 2 line."""
    from harness.atlas.lookup import line_of
    assert line_of({"keras": "3.10.0", "torch": "2.7.0"}) == "keras3-torch"
    assert line_of({"keras": "3.10.0", "jax": "0.6.0"}) == "keras3-jax"
    assert line_of({"keras": "3.10.0", "torch": "2.7.0", "tensorflow": "2.19.0"}) == "keras3-tensorflow"
    assert line_of({"keras": "3.10.0"}) == "keras3-tensorflow"
    assert line_of({"tensorflow": "2.1.4"}) == "keras2"


@QUICK
def test_publish_on_a_fresh_clone_republishes_the_committed_atlas_byte_for_byte(tmp_path):
    """A fresh clone has the committed data and no results folder: `atlas publish` publishes that
    data (exit 0), and every file it writes is the one committed -- the pages are made from the data;
    an evidence file no change links is removed, not published."""
    site = tmp_path / "docs"
    shutil.copytree(ROOT / "docs" / "atlas", site / "atlas")
    shutil.copy2(ROOT / "docs" / "atlas.md", site / "atlas.md")
    stale = site / "atlas" / "evidence" / "000000000000.json"   # a bisect's record of a change the data lost
    stale.write_text('{"package": "tensorflow"}\n')
    proc = harness("atlas", "publish", "--results", str(tmp_path / "no-results"), "--out", str(site / "atlas"),
                   timeout=300)
    assert proc.returncode == 0 and "republishing the committed data" in proc.stdout, proc.stdout + proc.stderr
    assert not stale.exists() and "000000000000.json" in proc.stdout, proc.stdout   # unlinked: not published
    committed = {p.relative_to(ROOT / "docs"): p.read_bytes() for p in (ROOT / "docs" / "atlas").rglob("*")
                 if p.is_file() and not p.name.startswith(".")}   # a dot-file: the output folder's own mark
    written = {p.relative_to(site): p.read_bytes() for p in (site / "atlas").rglob("*")
               if p.is_file() and not p.name.startswith(".")}
    assert set(written) == set(committed), set(written) ^ set(committed)
    assert [f for f in committed if written[f] != committed[f]] == []
    assert (site / "atlas.md").read_bytes() == (ROOT / "docs" / "atlas.md").read_bytes()
