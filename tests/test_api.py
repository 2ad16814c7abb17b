"""The in-process API (harness.api): a matrix built in code is checked by a file's rules and
written as the file it is; bad input is a UserError naming what is wrong, never a traceback from
deep inside; results read back typed; and the how-to page's two uses -- a notebook's run and a
pytest fixture on two stacks -- run exactly as the page shows them, against real TensorFlow."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import api
from harness.results.result import Result

from .conftest import ROOT

QUICK = pytest.mark.quick
PAGE = ROOT / "docs" / "how-to" / "python-api.md"
SMALL = {
    "name": "small",
    "environments": [{"python": "3.11", "tensorflow": "2.15.0"}],
    "workloads": [{"model": "rnn", "cell": "gru", "layers": 1, "units": 8}],
    "parallelism": [{"wrapper": "none", "devices": 1}],
    "batch_sizes": [32],
}


@QUICK
def test_a_matrix_built_in_code_is_written_as_the_yaml_it_is_and_loads_as_that_file(tmp_path):
    m = api.matrix_from_dict(SMALL, tmp_path / "m.yaml", results=tmp_path / "results")
    assert yaml.safe_load((tmp_path / "m.yaml").read_text()) == SMALL
    again = api.load_matrix(tmp_path / "m.yaml", results=tmp_path / "results")
    assert [c.id for c in m.cells] == [c.id for c in again.cells] == ["tf2.15/gru-1x8/none-c1/b32/r0"]
    assert m.sha256 == again.sha256 and m.path == tmp_path / "m.yaml"


@QUICK
def test_a_matrix_validated_in_code_is_expanded_by_the_files_rules_and_nothing_is_written(tmp_path):
    """What the portability grid needs before it can name its readers: the expanded stacks."""
    m = api.validate_matrix(SMALL, tmp_path / "m.yaml", results=None)
    assert [e.name for e in m.environments] == ["tf2.15"] and not (tmp_path / "m.yaml").exists()
    with pytest.raises(api.MatrixError) as caught:
        api.validate_matrix({**SMALL, "repeats": "two"}, tmp_path / "m.yaml", results=None)
    assert any(p.startswith("repeats") for p in caught.value.problems), caught.value.problems


@QUICK
def test_a_whole_cell_id_names_its_cell_where_it_begins_another_and_a_prefix_of_two_is_refused(tmp_path):
    """`diverge` and `reduce` name one cell each: the repeat r1's id begins r10's, and is still r1."""
    from harness.api.operations import one
    m = api.matrix_from_dict({**SMALL, "repeats": 11}, tmp_path / "m.yaml", results=tmp_path / "results")
    assert one(m, "tf2.15/gru-1x8/none-c1/b32/r1", "CELL_A").id == "tf2.15/gru-1x8/none-c1/b32/r1"
    with pytest.raises(api.UserError, match=r"CELL_A 'tf2.15/gru-1x8/none-c1/b32/r1\*' matches 2 cells"):
        one(m, "tf2.15/gru-1x8/none-c1/b32/r1*", "CELL_A")


@QUICK
def test_a_bad_matrix_in_code_names_the_file_and_the_key_and_writes_nothing(tmp_path):
    bad = {**SMALL, "workloads": [{"model": "rnn", "cell": "gru", "unitz": 8}]}
    with pytest.raises(api.MatrixError) as caught:
        api.matrix_from_dict(bad, tmp_path / "m.yaml")
    assert caught.value.path == str(tmp_path / "m.yaml")
    assert any(p.startswith("workloads[0].unitz") for p in caught.value.problems), caught.value.problems
    assert not (tmp_path / "m.yaml").exists()
    with pytest.raises(api.MatrixError, match="expected a mapping"):
        api.matrix_from_dict(["environments"], tmp_path / "m.yaml")


@QUICK
@pytest.mark.parametrize(("call", "words"), [
    (lambda m, t: api.run(m, results=t / "r", engine="dockr"), "engine 'dockr' is not one of auto, docker"),
    (lambda m, t: api.run(m, results=t / "r", only=["tf9*"]), "matches only tf9*"),
    (lambda m, t: api.run(m, results=t / "r", rerun=["crashed"]), "rerun 'crashed'"),
    (lambda m, t: api.repro(m, "tf2.15/gru-1x8/none-c1/b32/r0", repeat=0, out=t / "b"), "repeat expects"),
    (lambda m, t: api.bisect(m, package="tensorflow", good="2.15.0", bad="2.15.0", results=t / "r",
                             out=t / "b"), "are the same release"),
    (lambda m, t: api.bisect(m, package="tensor flow", old="2.14.0", new="2.15.0", results=t / "r",
                             out=t / "b", offline=True), "is not a package name"),
    (lambda m, t: api.diverge(m, "tf2.15/*", "tf9*", out=t / "d"), "CELL_B"),
])
def test_bad_input_is_a_user_error_in_the_command_lines_words(tmp_path, call, words):
    m = api.matrix_from_dict(SMALL, tmp_path / "m.yaml", results=tmp_path / "r")
    with pytest.raises(api.UserError, match=re.escape(words)):
        call(m, tmp_path)
    assert not (tmp_path / "r" / "small").exists() or not any((tmp_path / "r" / "small").rglob("result.json"))


@QUICK
def test_results_read_back_typed_and_a_file_that_is_no_result_is_told_not_raised(tmp_path):
    run = tmp_path / "results" / "small"
    for cell, status in (("a/x/none-c1/b32/r0", "ok"), ("b/x/none-c1/b32/r0", "crash")):
        (run / cell).mkdir(parents=True)
        Result(cell=cell, status=status, metrics={"val_accuracy": 0.5}).save(run / cell)
    (run / "c").mkdir()
    (run / "c" / "result.json").write_text(json.dumps({"status": "fine"}))
    told: list[str] = []
    found = api.read_results(tmp_path / "results", "small", notes=told.append)
    assert [(r.cell, r.status, r.metric("val_accuracy")) for r in found] == [
        ("a/x/none-c1/b32/r0", "ok", 0.5), ("b/x/none-c1/b32/r0", "crash", 0.5)]
    assert len(told) == 1 and "result.json" in told[0]
    with pytest.raises(api.UserError, match="no results of that matrix"):
        api.read_results(tmp_path / "results", "other")


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


@QUICK
def test_the_how_to_page_shows_the_two_uses():
    notebook, fixture = python_blocks(PAGE)
    assert "api.run(" in notebook and "api.matrix_from_dict(" in fixture and "@pytest.fixture" in fixture


@pytest.mark.tf
def test_the_how_to_pages_python_runs_as_written(tmp_path):
    """The notebook's block in a fresh interpreter, from a project folder holding the smoke
    matrix; the fixture's block as a user's test file, under pytest."""
    notebook, fixture = python_blocks(PAGE)
    (tmp_path / "matrices").mkdir()
    shutil.copy(ROOT / "matrices" / "smoke.yaml", tmp_path / "matrices" / "smoke.yaml")
    ran = subprocess.run([sys.executable, "-c", notebook], cwd=tmp_path, capture_output=True, text=True,
                         timeout=1800)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert re.search(r"^tf2\.15/gru-2x32/none-c1/b128/r0 ok 0\.\d+ \d", ran.stdout, flags=re.M), ran.stdout
    assert len(api.read_results(tmp_path / "results", "smoke")) == 1

    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "test_two_stacks.py").write_text(fixture)
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_two_stacks.py"],
                            cwd=tmp_path / "user", capture_output=True, text=True, timeout=3000)
    assert tested.returncode == 0, tested.stdout[-5000:] + tested.stderr[-3000:]
    assert re.search(r"^2 passed", tested.stdout, flags=re.M), tested.stdout
