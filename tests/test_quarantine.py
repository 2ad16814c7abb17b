"""Results, specs and submissions written by someone else are data, not trust.

A result.json, spec.json or Slurm submission folder that parses as JSON but has
the wrong shape is quarantined with a one-line note naming the file -- by `run`
(the cell counts as missing and runs again), `status`, `report` and `repro` --
never a traceback, never a stuck folder. Real CLI processes on real folders;
the cells are planted faults that fire before TensorFlow is imported (seconds).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.results.result import SCHEMA, Quarantined, Result, load

from .conftest import harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

MATRIX = """name: quarantine
environments:
  - python: "3.11"
    tensorflow: "2.15.0"
    packages: ["numpy<2"]
workloads:
  - {model: fault, fault: exception}
batch_sizes: [1]
repeats: 2
timeouts: {wall: 120, progress: 30}
expect:
  - {workload: fault-exception, status: error, signature: RuntimeError}
"""

# parses as JSON, is not a result
BAD_RESULTS = {
    "a list": [],
    "a string": "ok",
    "no status": {"schema": SCHEMA, "cell": "e/w/p/b1/r0"},
    "a number for status": {"schema": SCHEMA, "cell": "e/w/p/b1/r0", "status": 3},
    "an unknown status": {"schema": SCHEMA, "cell": "e/w/p/b1/r0", "status": "fine"},
    "a list for metrics": {"schema": SCHEMA, "cell": "e/w/p/b1/r0", "status": "ok", "metrics": [1]},
    "a string for an epoch": {"schema": SCHEMA, "cell": "e/w/p/b1/r0", "status": "ok", "epochs": ["x"]},
    "a future schema": {"schema": SCHEMA + 1, "cell": "e/w/p/b1/r0", "status": "ok"},
    "a text schema": {"schema": "1", "cell": "e/w/p/b1/r0", "status": "ok"},
}


@pytest.mark.parametrize("why", sorted(BAD_RESULTS))
def test_a_wrong_shaped_result_is_quarantined_with_a_reason(tmp_path, why):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(BAD_RESULTS[why]))
    found = load(path)
    assert isinstance(found, Quarantined), why
    assert found.path == path and found.why and "\n" not in found.why
    assert str(path) in found.note()


def test_an_older_result_is_migrated_and_a_result_round_trips(tmp_path):
    old = {"cell": "e/w/p/b1/r0", "status": "ok", "seen": None, "metrics": None, "from_a_newer_tool": {"x": 1}}
    (tmp_path / "result.json").write_text(json.dumps(old))
    r = load(tmp_path / "result.json")
    assert isinstance(r, Result) and r.schema == SCHEMA and r.seen == {} and r.metrics == {}
    r["added_by_a_feature"] = [1, 2]  # a new key needs no change to the model
    r["status"] = "error"
    assert "added_by_a_feature" in r and r.status == "error" and r.get("nothing") is None
    r.save(tmp_path)  # unknown keys are kept as written
    again = json.loads((tmp_path / "result.json").read_text())
    assert again["from_a_newer_tool"] == {"x": 1} and again["schema"] == SCHEMA
    assert again["added_by_a_feature"] == [1, 2] and again["status"] == "error"


def test_nested_parts_are_read_through_views_that_tolerate_gaps_and_are_never_saved(tmp_path):
    written = {"cell": "e/w/p/b1/r0", "status": "error", "schema": SCHEMA,
               "seen": {"tensorflow": "2.15.0", "gpus": ["A100"], "gpu_devices": {"x": 1}},
               "provenance": {"harness_commit": "abc", "cutoff": {"uploaded_before": "2024-01-01T00:00:00Z"},
                              "host_resources": {"gpus": [{"name": "A100"}], "topology": {"0-1": "NV12"}}},
               "error": {"signature": "ValueError: x"}, "expectation": {"status": "ok", "values": [{"met": False}]},
               "warmth": {"launch": "warm", "compile_cache": {"hit": False}}, "code": "not an object",
               "releases": [["tensorflow", ">=2", "2.15.0"], "broken"]}
    (tmp_path / "result.json").write_text(json.dumps(written))
    r = load(tmp_path / "result.json")
    assert r.inside.tensorflow == "2.15.0" and r.inside.keras is None and r.inside.gpus == ("A100",)
    assert r.inside.has_versions and not Result(cell="c", status="ok").inside.has_versions
    assert r.origin.harness_commit == "abc" and r.origin.harness_version is None
    assert r.origin.uploaded_before.startswith("2024") and r.origin.gpu_links == ("NV12",)
    assert r.origin.gpus[0].name == "A100" and r.origin.gpus[0].driver is None
    assert r.failure.signature == "ValueError: x" and r.failure.traceback is None
    assert r.expected.status == "ok" and r.expected.values[0].met is False and r.expected.values[0].peer is None
    assert r.warmth.launch == "warm" and r.warmth.cache_hit is False
    assert r.code_kind is None and r.releases == []  # wrong-typed extras read as absent, never raise
    assert r["warmth"] == written["warmth"]  # dict-style access still answers the stored value
    r.save(tmp_path)  # the views are derived: every key written back as read, none added for them
    again = json.loads((tmp_path / "result.json").read_text())
    assert {k: again[k] for k in written} == written
    assert not {"inside", "origin", "failure", "expected", "code_kind"} & set(again)
    assert load(tmp_path / "result.json").to_dict() == again


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("quarantine")
    (root / "m.yaml").write_text(MATRIX)
    harness("run", str(root / "m.yaml"), "--engine", "venv", "--results", str(root / "results"), check=True)
    cells = harness("list", str(root / "m.yaml"), check=True).stdout.split()
    assert len(cells) == 2
    return root, cells


def _copy(finished, tmp_path) -> tuple[Path, Path, list[str]]:
    root, cells = finished
    shutil.copy(root / "m.yaml", tmp_path / "m.yaml")
    shutil.copytree(root / "results", tmp_path / "results")
    return tmp_path / "m.yaml", tmp_path / "results", cells


def _no_traceback(proc) -> None:
    """No traceback of the harness's own (a cell's stderr, shown live by repro as 'stderr | ...', may have one)."""
    lines = (proc.stdout + proc.stderr).splitlines()
    assert not [ln for ln in lines if ln.startswith("Traceback")], proc.stdout + proc.stderr


def test_run_quarantines_a_bad_result_and_a_bad_spec_and_runs_the_cells_again(finished, tmp_path):
    matrix, results, cells = _copy(finished, tmp_path)
    bad_result = results / "quarantine" / cells[0] / "result.json"
    bad_spec = results / "quarantine" / cells[1] / "spec.json"
    bad_result.write_text(json.dumps(BAD_RESULTS["a future schema"]))
    bad_spec.write_text(json.dumps(["not", "a", "spec"]))
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(results))
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.replace("\n", " ")
    assert f"quarantined {bad_result}: not a result: schema {SCHEMA + 1} is newer" in out, proc.stdout
    assert f"quarantined {bad_spec}: not a cell spec" in out, proc.stdout
    assert "already have results" not in out, "both cells ran again"
    for cell in cells:
        again = load(results / "quarantine" / cell / "result.json")
        assert isinstance(again, Result) and again.status == "error" and again.met is True
    assert not list((results / "quarantine").rglob("*.partial-*")), "no stuck folder"


def test_status_and_report_leave_bad_files_out_with_a_note(finished, tmp_path):
    matrix, results, cells = _copy(finished, tmp_path)
    run_dir = results / "quarantine"
    (run_dir / cells[0] / "result.json").write_text(json.dumps(BAD_RESULTS["a list"]))
    for i, why in enumerate(sorted(BAD_RESULTS)):  # more result.json files anywhere below: report reads them all
        (run_dir / "junk" / str(i)).mkdir(parents=True)
        (run_dir / "junk" / str(i) / "result.json").write_text(json.dumps(BAD_RESULTS[why]))
    subs = {"a list": [], "no arrays": {"submitted": "2026-01-01T00:00:00+00:00", "engine": "venv",
                                        "matrix_label": "m.yaml"},
            "arrays past cells.txt": {"submitted": "2026-01-01T00:00:00+00:00", "engine": "venv",
                                      "matrix_label": "m.yaml", "arrays": [{"index": 0, "offset": 0, "count": 9}]}}
    for i, meta in enumerate(subs.values()):
        sub = run_dir / ".slurm" / f"2026010{i}T000000-1"
        sub.mkdir(parents=True)
        (sub / "submission.json").write_text(json.dumps(meta))
        (sub / "cells.txt").write_text(cells[0] + "\n")

    proc = harness("status", str(matrix), "--results", str(results))
    _no_traceback(proc)
    out = proc.stdout.replace("\n", " ")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"quarantined {run_dir / cells[0] / 'result.json'}: not a result: expected a JSON object" in out, out
    for i in range(len(subs)):
        assert f"{run_dir / '.slurm' / f'2026010{i}T000000-1' / 'submission.json'}: not a submission" in out, out
    assert "finished 1 (error 1)" in out and "missing 1" in out, out

    proc = harness("report", str(results), "--out", str(tmp_path / "site"))
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.replace("\n", " ")
    assert out.count("quarantined ") == len(BAD_RESULTS) + 1, out
    assert "1 cells" in out
    rows = json.loads((tmp_path / "site" / "results.json").read_text())
    assert [r["cell"] for r in rows] == [cells[1]]

    proc = harness("report", "compare", str(results), str(finished[0] / "results"))
    _no_traceback(proc)
    assert "quarantined " in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr


def test_repro_quarantines_a_bad_attempt_and_runs_it(finished, tmp_path):
    matrix, _, cells = _copy(finished, tmp_path)
    argv = ("repro", cells[0], "--matrix", str(matrix), "--engine", "venv", "--out", str(tmp_path / "bundles"))
    harness(*argv, check=True)  # a bundle from an earlier repro, whose attempt someone then broke
    [attempt_result] = (tmp_path / "bundles").rglob("attempts/attempt-1/**/result.json")
    attempt = attempt_result.parent
    attempt_result.write_text(json.dumps(BAD_RESULTS["no status"]))
    (attempt / "spec.json").write_text("\"a string\"")
    proc = harness(*argv)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"quarantined {attempt / 'result.json'}: not a result: no 'status'" in proc.stdout.replace("\n", " ")
    again = load(attempt / "result.json")
    assert isinstance(again, Result) and again.status == "error"


def test_a_result_of_another_cell_in_a_cells_folder_counts_as_missing(tmp_path):
    from harness.cells import Cell, Environment, Parallelism, Workload
    from harness.results.store import ResultStore
    cell = Cell(Environment("e", "3.11", "2.15.0"), Workload("w", "idle"), Parallelism("none", 1, "cpu"), 1, 1, 0)
    store = ResultStore(tmp_path, "run")
    folder = store.final_dir(cell)
    folder.mkdir(parents=True)
    Result(cell="someone/else/none-c1/b1/r0", status="ok").save(folder)
    assert store.existing(cell) is None and store.needs_run(cell)
    [note] = store.take_notes()
    assert note == f"{folder / 'result.json'}: the result of another cell ('someone/else/none-c1/b1/r0'); " \
                   "the cell counts as missing"
    Result(cell=cell.id, status="ok").save(folder)
    assert store.existing(cell).status == "ok" and store.take_notes() == []
