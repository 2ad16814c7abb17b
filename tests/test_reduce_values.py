"""`harness reduce` on a value and on a hang (tests/reduce_planted.py): a value that drifts on 2.0 is
reduced as a break is, and a candidate that hangs is rejected at its time budget and costs no more."""

from __future__ import annotations

import time

import pytest

from .conftest import harness
from .reduce_planted import LOOP, code_lines, planted_case, record, reduce

planted = pytest.fixture(scope="module", name="planted")(planted_case)


@pytest.mark.slow
def test_a_value_drift_is_reduced_the_same_way(planted):
    root, env = planted
    proc = reduce(root, env, "value")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = record(root, "value")
    reduced = (found["folder"] / "reduced" / "value.py").read_text()
    assert found["family"] == "drifted: scaled"
    assert "scale" in reduced and "prepare" not in reduced and len(code_lines(reduced)) <= 4, reduced


@pytest.mark.slow
def test_a_hanging_candidate_costs_only_its_budget(planted):
    """Named as a bisect names the break (one cell, the package, the two releases): removing the
    loop's counter or its break makes candidates that never end; each is rejected at its budget."""
    root, env = planted
    started = time.monotonic()
    proc = harness("reduce", str(root / "m.yaml"), "old/loop/", "--package", "plantedlib", "--good", "1.0",
                   "--bad", "2.0", "--engine", "venv", "--budget", "1", "--out", str(root / "out"),
                   "--results", str(root / "results"), env=env, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = record(root, "loop")
    timed_out = found["candidates"]["rejected"].get("over its time budget", 0)
    assert timed_out >= 1, found["candidates"]
    assert found["stacks"]["good"]["plantedlib"] == "1.0" and found["stacks"]["bad"]["plantedlib"] == "2.0"
    reduced = (found["folder"] / "reduced" / "loop.py").read_text()
    assert "legacy_total" in reduced and len(code_lines(reduced)) < len(code_lines(LOOP))
    # the hangs cost their budget (1 s a side) and the rest its own: nowhere near an unbounded wait
    assert time.monotonic() - started < 60 + 3 * timed_out, (time.monotonic() - started, timed_out)
