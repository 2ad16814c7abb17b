"""`harness reduce` shrinks a user's script while both sides hold (tests/reduce_planted.py: a
planted package whose 2.0 dropped an API). A 150-line training script with one line that breaks on
2.0 comes out at most 15 lines long, still failing on 2.0 with the same error and still passing on
1.0, its candidates forked from warm launchers; what cannot be reduced says so in one line, exit
2, the user's file untouched. Two real virtualenvs, real processes."""

from __future__ import annotations

import pytest

from .conftest import harness
from .reduce_planted import MATRIX, TRAIN, code_lines, planted_case, record, reduce

planted = pytest.fixture(scope="module", name="planted")(planted_case)


@pytest.mark.slow
def test_a_150_line_script_is_reduced_to_at_most_15_lines_that_still_break_on_the_new_release(planted):
    root, env = planted
    assert len(TRAIN.splitlines()) >= 150
    proc = reduce(root, env, "train")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = record(root, "train")
    reduced = (found["folder"] / "reduced" / "train.py").read_text()
    assert len(code_lines(reduced)) <= 15, reduced
    assert "legacy_total" in reduced
    assert found["family"].startswith("error") and "AttributeError" in found["family"]
    assert found["bad_status"].startswith("error") and found["good_status"] == "ok"   # checked fresh at the end
    assert found["candidates"]["tried"] > found["candidates"]["kept"] > 0
    assert found["candidates"]["forked_cell_runs"] > 0                       # candidates forked warm
    assert found["alone"] and found["needs"] == []                           # no file of the folder travels
    for side in ("good", "bad"):                                             # replayable without the harness
        assert (found["folder"] / side / "run.sh").is_file()
    issue = (found["folder"] / "ISSUE.md").read_text()
    assert "plantedlib" in issue and "1.0" in issue and "2.0" in issue and reduced.strip() in issue
    assert (root / "code" / "train.py").read_text() == TRAIN                  # the original is never written



@pytest.mark.slow
def test_what_cannot_be_reduced_is_one_line_and_exit_2(planted):
    root, env = planted
    proc = reduce(root, env, "same")                        # the same on both sides: nothing to reduce
    assert proc.returncode == 2 and "new/same/" in proc.stderr and "does not fail" in proc.stderr, proc.stderr
    proc = harness("reduce", str(root / "m.yaml"), "new/train/", "old/train/", "--engine", "venv",
                   "--out", str(root / "out2"), "--results", str(root / "results"), env=env, timeout=600)
    assert proc.returncode == 2 and "good side" in proc.stderr   # the good side fails too
    (root / "code" / "broken.py").write_text("def f(:\n")
    (root / "m2.yaml").write_text(MATRIX.replace("code/same.py", "code/broken.py"))
    proc = harness("reduce", str(root / "m2.yaml"), "old/same/", "new/same/", "--engine", "venv",
                   "--out", str(root / "out3"), "--results", str(root / "results"), env=env, timeout=600)
    assert proc.returncode == 2 and "broken.py:1" in proc.stderr, proc.stderr   # the reducer cannot parse it
