"""bench/suite_cost.py reads the figures a run's log holds, and the table of runs in
docs/reference/tests.md is made from its records.

The log it reads here is a real one: a tiny pytest session run through the suite's own timing
plugin (tests/suite_timing.py) on two xdist workers, with build-ledger lines written by the
harness's own ledger, wrapped in the lines .ci/run prints around the tests -- so a change to
what the plugin or pytest prints that the script no longer reads fails here, not in a CI log
read months later. The page's table is held to the committed records, so neither drifts alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from bench import suite_cost
from tests import suite_timing
from tests.conftest import ROOT

pytestmark = pytest.mark.quick

TINY_A = """
import time
import pytest
from harness.environments import ledger

def test_builds_two_virtualenvs():
    ledger.append("build", engine="venv", environment="tf2.15", seconds=4.0)
    ledger.append("build", engine="venv", environment="tf1.12", seconds=3.0)
    time.sleep(0.3)

def test_builds_an_image():
    ledger.append("build", engine="docker", environment="keras3", seconds=20.0)
    ledger.append("cell", engine="venv", environment="tf2.15", status="ok", seconds=10.0, starting=4.0,
                  first_epoch=3.0)
    ledger.append("cell", engine="venv", environment="tf2.15", status="ok", seconds=6.0, starting=0.5,
                  first_epoch=2.5)

@pytest.mark.skip(reason="planted")
def test_skipped():
    pass
"""
TINY_B = """
import subprocess
import sys
import time

def test_passes():
    time.sleep(0.4)

def test_spends_cpu_in_a_process_it_waits_for():
    spin = "import time; t = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)

def test_passes_too():
    pass

def test_fails():
    assert False, "planted"
"""


@pytest.fixture(scope="module")
def ci_log():
    """A log as .ci/run leaves it: its phase line, the tests' own output, its closing lines. The tiny
    suite and its harness cache lie outside pytest's base folder: the suite's own table of
    environments built reads every ledger there, and these builds are planted. Its own base folder
    is its own too: by default it lies beside the outer suite's, whose cells' ledgers the tiny
    suite's table would then count (it did, in CI: 14 cells where 2 were planted)."""
    with tempfile.TemporaryDirectory(prefix="tiny-suite-") as folder:
        yield _tiny_ci_log(Path(folder))


def _tiny_ci_log(where: Path) -> str:
    (where / "pytest.ini").write_text("[pytest]\n")
    (where / "test_a.py").write_text(textwrap.dedent(TINY_A))
    (where / "test_b.py").write_text(textwrap.dedent(TINY_B))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "HARNESS_CACHE": str(where / "cache")}
    env.pop("PYTEST_ADDOPTS", None)   # the outer suite's options are not the tiny suite's
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.suite_timing", "-c", str(where / "pytest.ini"),
                           "--rootdir", str(where), "--basetemp", str(where / "tmp"),
                           "-n", "2", "--dist", "loadfile", "-ra",
                           "test_a.py", "test_b.py"], cwd=where, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the planted failure, nothing worse
    assert "where the time went" in proc.stdout, proc.stdout + proc.stderr
    # .ci/run's own lines, as its printf formats write them ('%4d', '%6d s  %s', ...)
    before = "== [  95 s] nox -s tests (a worker per core and one more; ...)\n"
    after = ("== the cores were busy 97 % of the tests' time (2 cores)\n"
             "== [ 120 s] nox -s lock -- --check (information only; asked while the tests ran)\n"
             "== [ 121 s] end\n\n"
             "== where CI's 121 s went\n"
             "    60 s  installing: docker.io\n"
             "    35 s  nox -s lint\n"
             "    25 s  nox -s tests (a worker per core and one more; ...)\n"
             "     1 s  nox -s lock -- --check (information only; asked while the tests ran)\n"
             "== disk: 52 GB free at the start, 7 GB at the least, 30 GB at the end\n")
    return before + proc.stdout + after


def test_a_real_log_gives_its_figures(ci_log):
    parsed = suite_cost.parse(ci_log)
    assert set(parsed["files"]) == {"test_a.py", "test_b.py"}
    assert parsed["tests_per_file"] == {"test_a.py": 3, "test_b.py": 4}
    assert parsed["files"]["test_b.py"] >= 0.4 and parsed["files"]["test_a.py"] >= 0.3
    assert parsed["test_seconds"] == pytest.approx(sum(parsed["files"].values()), abs=0.05)
    assert parsed["results"] == {"passed": 5, "failed": 1, "skipped": 1}
    # the work without the waiting: a child's half second of CPU is test_b's, the sleeps are no one's
    cpu = parsed["cpu"]
    assert set(cpu["by_file"]) == {"test_a.py", "test_b.py"} and cpu["by_file"]["test_b.py"] >= 0.5, cpu
    assert cpu["seconds"] == pytest.approx(sum(cpu["by_file"].values()), abs=1), cpu
    assert 0 < parsed["suite_wall_seconds"] < 300
    # the cells' fixed costs, from the same ledgers: what their processes held, starting and first epochs
    # and by the test file that ran them: each test runs with its file as the ledger's tag
    assert parsed["cells"] == {"count": 2, "seconds": 16, "starting": 4, "first_epoch": 6,
                               "by_file": {"test_a.py": {"cells": 2, "held_seconds": 16.0}}}, parsed["cells"]
    assert parsed["environments"] == {"count": 3, "seconds": 27, "by_engine": {
        "docker": {"count": 1, "seconds": 20}, "venv": {"count": 2, "seconds": 7}}}
    assert parsed["machine"] == suite_timing.machine()  # the log names the machine it ran on
    assert parsed["workers"] == 2
    assert parsed["ci_wall_seconds"] == 121
    assert [p["seconds"] for p in parsed["phases"]] == [60, 35, 25, 1]
    assert parsed["phases"][1]["phase"] == "nox -s lint"
    assert parsed["cores_busy"] == {"percent": 97, "cores": 2}
    assert parsed["disk_gb"] == {"start": 52, "least": 7, "end": 30}


def test_the_slowest_test_phases_pytest_listed_are_kept_with_the_record(ci_log):
    """Where a cut would land, test by test: the phases pytest's --durations listed, from
    SLOWEST_KEPT seconds on, slowest first; a log without them keeps none."""
    listed = ("============ slowest durations ============\n"
              "9.99s setup    tests/test_x.py::test_quick\n"
              "12.50s call     tests/test_x.py::test_slow[a b]\n"
              "31.00s setup    tests/test_y.py::test_slower\n")
    parsed = suite_cost.parse(listed + ci_log)
    assert parsed["slowest"] == [{"seconds": 31.0, "phase": "setup", "test": "tests/test_y.py::test_slower"},
                                 {"seconds": 12.5, "phase": "call", "test": "tests/test_x.py::test_slow[a b]"}]
    assert "slowest" not in suite_cost.parse(ci_log)


def test_a_log_from_before_the_machine_line_says_whose_machine_it_records(ci_log):
    """An older log names no machine: the record takes the reader's and says so; xdist's status
    line still gives the workers."""
    older = "\n".join(line for line in ci_log.splitlines() if not line.startswith("machine: "))
    parsed = suite_cost.parse(older)
    assert parsed["machine"] is None and parsed["workers"] == 2
    rec = suite_cost.record(parsed, commit=None, date="2026-12-02")
    assert rec["machine"]["from"].startswith("the machine that read the log")
    assert rec["source"] == suite_cost.FROM_LOG
    assert "the machine that read the log" in suite_cost.table([rec])


def test_the_script_records_what_it_read(ci_log, tmp_path, capsys):
    log, out = tmp_path / "ci.log", tmp_path / "record.json"
    log.write_text(ci_log)
    assert suite_cost.main([str(log), "--record", str(out), "--commit", "nosuchrev", "--date", "2026-12-02"]) == 0
    rec = json.loads(out.read_text())
    assert rec["commit"] == "nosuchrev" and rec["date"] == "2026-12-02"  # a rev git does not know, as given
    assert rec["test_seconds"] == suite_cost.parse(ci_log)["test_seconds"]
    printed = capsys.readouterr().out
    assert "test-min" in printed and "5 passed" in printed and "1 failed" in printed


def test_every_slow_file_says_what_its_time_buys_and_the_page_shows_it_with_the_records_seconds():
    """Each file past SLOW_SECONDS in the newest record has its promises in bench/suite_promises.py
    (what it keeps, the run that proves it, the least that would), each entry names a file that is
    there, and the page's table of them is what `--write-docs` makes of the records."""
    from bench.suite_promises import PROMISES, SLOW_SECONDS
    rec = suite_cost.newest_with_files(suite_cost.load_records())
    assert rec is not None
    said = {e["file"] for e in PROMISES}
    unsaid = sorted(f for f, seconds in rec["files"].items() if seconds > SLOW_SECONDS and f not in said)
    assert not unsaid, f"past {SLOW_SECONDS} s in {rec['commit'][:7]}, no entry in bench/suite_promises.py: {unsaid}"
    assert all((ROOT / f).is_file() for f in said), sorted(f for f in said if not (ROOT / f).is_file())
    assert all(e.get(k) for e in PROMISES for k in ("keeps", "run", "least"))
    made = suite_cost.promise_table(suite_cost.load_records())
    # the page holds what the records make (tests/test_figures.py audits every block of every page)
    assert f"<!-- figures:suite-promises -->\n{made}\n<!-- /figures:suite-promises -->" in suite_cost.DOC.read_text()
    assert f"{rec['files']['tests/test_wrappers.py']:,.0f} (" in made   # the record's figure, not a typed one


def test_every_record_names_its_commit_date_source_and_figure():
    records = sorted(suite_cost.RECORDS.glob("*.json"))
    assert records
    for path in records:
        rec = json.loads(path.read_text())
        assert rec["source"] in (suite_cost.FROM_LOG, "stated in the project's notes, no log kept"), path
        assert path.stem.split("-")[:4] == [*rec["date"].split("-"), rec["commit"][:7]], path
        assert isinstance(rec["test_seconds"], int | float) and rec["test_seconds"] > 0, path
        assert "machine" in rec and "results" in rec, path
        assert isinstance(rec["from_nothing"], bool) and rec["tier"] in ("everything", "quick"), path


def test_two_runs_of_one_day_are_ordered_by_when_they_were_recorded_not_by_their_commits_hash(tmp_path):
    """A later run of the day is the newest whatever its commit's hash; a record from before
    `recorded_at` comes before those that carry it."""
    for name, at in (("2026-12-03-fff0000", "2026-12-03T10:00:00Z"), ("2026-12-03-0000aaa", "2026-12-03T14:00:00Z"),
                     ("2026-12-03-9999999", None)):
        rec = {"commit": name[-7:], "date": "2026-12-03", "test_seconds": 60.0, "from_nothing": True,
               "machine": {"cpu": "X", "avx512": False, "cores": 2}, **({"recorded_at": at} if at else {})}
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    records = suite_cost.load_records(tmp_path)
    assert [r["commit"] for r in records] == ["9999999", "fff0000", "0000aaa"]
    assert suite_cost._latest(records)["commit"] == "0000aaa"
