"""`run` and `report` give the same verdict for the same folder: an edited
`expect:` is re-judged by `run` without re-running the cell, and the new
verdict is what the stored result (and so the report) says."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT, harness

pytestmark = pytest.mark.tf


def test_an_edited_expectation_is_rejudged_and_stored(tmp_path):
    matrix = tmp_path / "faults.yaml"
    text = (ROOT / "matrices/faults.yaml").read_text()
    matrix.write_text(text)
    first = harness("run", str(matrix), "--engine", "venv", "--only", "*fault-exception*",
                    "--results", str(tmp_path / "r"))
    assert first.returncode == 0, first.stdout[-2000:]
    stored = tmp_path / "r/faults/tf2.15/fault-exception/none-c1/b1/r0/result.json"
    before = json.loads(stored.read_text())
    assert before["expectation"]["met"] is True

    matrix.write_text(text.replace("status: error, signature: RuntimeError", "status: crash, signature: SIGBUS"))
    second = harness("run", str(matrix), "--engine", "venv", "--only", "*fault-exception*",
                     "--results", str(tmp_path / "r"))
    assert second.returncode == 1, second.stdout[-2000:]           # run says: not as expected
    assert "1 of 1 cells already have results" in second.stdout     # and did not run it again
    after = json.loads(stored.read_text())
    assert after["expectation"]["met"] is False and after["expectation"]["status"] == "crash"
    assert after["finished"] == before["finished"]

    site = tmp_path / "site"
    report = harness("report", str(tmp_path / "r"), "--out", str(site))
    assert report.returncode == 0, report.stderr[-2000:]
    drifted = (site / "report.md").read_text().split("rifted", 1)[1]   # the drifted-controls table
    assert "fault-exception" in drifted and "SIGBUS" in drifted        # the report reads the same verdict
