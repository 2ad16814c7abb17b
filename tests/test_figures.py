"""The audit of the figures pages quote (bench/figures.py): every block holds what its records make
now, and each way a page can say what its records do not is named with the page, the line and the
records -- a figure typed over inside a block, a block no generator knows or left open, the suite's
cost typed outside a block. The committed pages pass it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from bench import figures, suite_cost
from tests.conftest import ROOT

pytestmark = pytest.mark.quick


def test_every_page_holds_what_its_records_make():
    findings = figures.audit()
    assert not findings, "\n".join(map(str, findings))
    # and the command says so by its exit status
    proc = subprocess.run([sys.executable, "bench/figures.py"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def planted(tmp_path):
    """A project's pages as they are, then each way of saying what the records do not, planted."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    readme = (tmp_path / "README.md").read_text()
    door = suite_cost.door_sentence(suite_cost.load_records())
    newest = max(suite_cost._runs_from_nothing(suite_cost.load_records()), key=lambda r: (r["date"], r["_file"]))
    said = f"{newest['test_seconds'] / 60:.1f} test-minutes"
    assert said in door   # the figure the plant types over is the record's own
    (tmp_path / "README.md").write_text(readme.replace(said, "29.0 test-minutes"))
    (tmp_path / "docs" / "page.md").write_text(
        "# A page\n\nThe suite takes 30-35 test-minutes now.\n\n"
        "<!-- figures:no-such-table -->\n| a |\n<!-- /figures:no-such-table -->\n\n"
        "<!-- figures:suite-machines -->\nleft open\n")
    return tmp_path, newest


def test_each_planted_case_is_named_with_its_page_line_and_records(planted):
    root, newest = planted
    found = {(f.page, f.block): f for f in figures.audit(root)}
    readme_line = next(i for i, line in enumerate((root / "README.md").read_text().splitlines(), 1)
                       if line == "<!-- figures:suite-door -->")
    typed_over = found[("README.md", "suite-door")]
    assert typed_over.line == readme_line and newest["_file"] in typed_over.what
    assert found[("docs/page.md", "")].line == 3 and "30-35 test-minutes" in found[("docs/page.md", "")].what
    assert found[("docs/page.md", "no-such-table")].line == 5
    assert found[("docs/page.md", "suite-machines")].line == 9
    assert len(found) == 4, "\n".join(map(str, found.values()))


def test_writing_mends_what_the_records_make_and_leaves_what_it_cannot(planted):
    root, _ = planted
    assert figures.write(root) == ["README.md"]
    left = figures.audit(root)
    assert {(f.page, f.block) for f in left} == {("docs/page.md", ""), ("docs/page.md", "no-such-table"),
                                                 ("docs/page.md", "suite-machines")}
    assert (root / "README.md").read_text() == (ROOT / "README.md").read_text()   # the committed page, again


def test_the_gpu_warm_figures_are_the_bench_records_own():
    """The README's warm figures on a GPU are the newest record's table row, quoted: each figure the
    quote states stands in the record as the bench printed it."""
    quote = figures.warm_gpu({})
    assert quote.records, quote.text
    record = (ROOT / quote.records[0]).read_text()
    stated = [m.strip("*") for m in quote.text.split() if m.startswith("**")]
    assert stated and all(s in record for s in stated), (stated, quote.records)


def test_the_gpu_warm_rounds_are_the_json_records_own():
    """The warm figures over more rounds are quoted from the bench's JSON record: each figure the
    quote states stands in the record as the bench wrote it, and the warm-up run's bound is not
    counted among the warm runs'."""
    import json
    quote = figures.warm_gpu_rounds({})
    assert quote.records and quote.records[0].endswith(".json"), quote.text
    text = (ROOT / quote.records[0]).read_text()
    record = json.loads(text)
    stated = [m.strip("*") for m in quote.text.split() if m.startswith("**")]
    assert stated and all(s in text for s in stated), (stated, quote.records)
    [arm] = record["matrices"][0]["arms"].values()
    warm_up = next(r["of_bound"] for r in arm["runs"] if r["run"] == "warm-up")
    assert f"{warm_up:.2f}" not in quote.text
