"""`harness reduce` shrinks a user's script while both sides hold (tests/reduce_planted.py: a
planted package whose 2.0 dropped an API). A 150-line training script with one line that breaks on
2.0 comes out at most 15 lines long, still failing on 2.0 with the same error and still passing on
1.0, its candidates forked from warm launchers; what cannot be reduced says so in one line, exit
2, the user's file untouched. Run as a user runs it -- in the script's own folder, every option
its default, so the harness's output lies inside the code folder -- it neither nests its output
nor says of the environments more than their records do (issue 54). Two real virtualenvs, real
processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.files.outputroots import MARKER

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


OWN_FOLDER = """\
name: mine
environments:
{environments}
workloads:
  - {{name: total, script: total.py, path: .}}
timeouts: {{wall: 120, progress: 120}}
"""
PINNED = """\
  - {name: old, python: "3.11", packages: ["plantedlib==1.0"]}
  - {name: new, python: "3.11", packages: ["plantedlib==2.0"]}"""
RANGED = """  - {name: lib, python: "3.11", packages: [{plantedlib: ">=1.0"}]}"""
TOTAL = "import plantedlib\n\nvalues = [1, 2, 3]\nprint(plantedlib.scale(2), plantedlib.legacy_total(values))\n"


def _reduce_in_own_folder(folder: Path, env: dict, environments: str, good: str, bad: str) -> tuple[Path, str]:
    """`reduce` in the folder of the matrix and the script (`path: .`), every option its default: the
    issue's command, which ended at once in a traceback (its output copied into each candidate)."""
    folder.mkdir()
    (folder / "m.yaml").write_text(OWN_FOLDER.format(environments=environments))
    (folder / "total.py").write_text(TOTAL)
    proc = harness("reduce", "m.yaml", good, bad, "--engine", "venv", cwd=folder, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [out] = (folder / "reduced").glob("*__total__*")
    assert not [p for p in out.rglob("*") if "reduced" in p.relative_to(out).parts[1:]]   # nothing nested
    assert (folder / "reduced" / MARKER).is_file() and (folder / "total.py").read_text() == TOTAL
    assert "legacy_total" in (out / "reduced" / "total.py").read_text()
    issue = (out / "ISSUE.md").read_text()
    assert "each resolved as of its release's day" not in issue
    [sentence] = [line for line in issue.splitlines() if line.startswith("The packages no pin fixed were resolved")]
    return out, sentence


def _provenance(out: Path, side: str) -> dict:
    return json.loads((out / side / "provenance.json").read_text())


@pytest.mark.slow
def test_a_draft_from_exact_pins_says_they_resolved_without_a_cut_off(planted, tmp_path):
    root, env = planted
    out, sentence = _reduce_in_own_folder(tmp_path / "mine", env, PINNED, "old/", "new/")
    for side in ("good", "bad"):
        record = _provenance(out, side)
        assert "cutoff" not in record                                       # what the records say
        assert f"as of {record['resolved_at'][:10]}, the day its environment was built, no cut-off" in sentence


@pytest.mark.slow
def test_a_draft_from_a_range_gives_each_sides_cut_off_as_its_record_has_it(planted, tmp_path):
    root, env = planted
    out, sentence = _reduce_in_own_folder(tmp_path / "ranged", env, RANGED, "lib-plantedlib1.0/",
                                          "lib-plantedlib2.0/")
    good, bad = (_provenance(out, side)["cutoff"]["uploaded_before"][:10] for side in ("good", "bad"))
    assert good < bad   # 1.0's upload, then 2.0's (tests/reduce_planted.py)
    assert f"for the first versions, as of {good} (a cut-off" in sentence, sentence
    assert f"for the second, as of {bad} (a cut-off" in sentence, sentence


@pytest.mark.quick
def test_a_float_is_shrunk_through_round_values_only_and_a_string_is_kept_or_dropped_whole():
    """pysource-minimize halves a float towards 0 while the break holds; a candidate that only moves
    a float to an unround value (more than two significant digits) is refused without a run, so a
    dropout rate the break does not need costs a handful of runs, not a thousand halvings. A string
    cut short (a path, an activation's name) is refused likewise; one gone whole ("") is tried. Any
    other difference -- an int, a name, a line gone -- is a candidate like any other."""
    from harness.investigate.reduce_source import not_worth_a_run

    def unround_float(current, candidate):
        return not_worth_a_run(current, candidate) is not None
    script = "import keras\nlayer = keras.layers.Dropout(0.2)\nmodel.fit(x, epochs=3)\n"
    assert not unround_float(script, script.replace("0.2", "0.1"))
    assert not unround_float(script.replace("0.2", "0.05"), script.replace("0.2", "0.025"))
    assert unround_float(script.replace("0.2", "0.025"), script.replace("0.2", "0.0125"))
    assert not unround_float(script, script.replace("0.2", "0.0125").replace("epochs=3", "epochs=1"))
    assert not unround_float(script, "import keras\nlayer = keras.layers.Dropout(0.0125)\n")
    # pysource-minimize's float search (a bisection towards 0), with a break that holds at any value:
    # only the candidates this lets through cost a run
    current, low, high, runs = script, 0.0, 0.2, 0
    while low != high:
        mid = (low + high) / 2
        candidate = script.replace("0.2", repr(mid))
        held = not unround_float(current, candidate)
        runs += held
        if held:
            if high == mid:
                break
            high, current = mid, candidate
        else:
            if low == mid:
                break
            low = mid
    assert runs <= 5 and high == 0.025, (runs, high)
    # strings: cut short, refused without a run; gone whole, or beside another change, a candidate
    script = 'import json\nsettings = json.load(open("/home/me/run/settings.json"))\nact = "relu"\n'
    assert not_worth_a_run(script, script.replace("settings.json", "settings.js"))
    assert not_worth_a_run(script, script.replace('"relu"', '"re"'))
    assert not not_worth_a_run(script, script.replace('"relu"', '""'))
    assert not not_worth_a_run(script, script.replace('"relu"', '"re"').replace("import json\n", ""))
    assert not not_worth_a_run(script, script.replace('"relu"', "1"))
