"""`harness reduce` confines its candidates: a branch the user's script never takes -- here one
that deletes a file of the user's by its absolute path -- runs in a candidate as soon as the
reducer replaces the `if` with its body, and the file must come out of the reduction byte for
byte as it went in, while the data the script reads (outside its folder) stays readable. The
same reduction `--unconfined` deletes its own copy of the file: the branch does run, and it is
the confinement that keeps the file. Where the host offers no confinement, reduce says so in one
line, exit 2, before it builds or runs anything. Real virtualenvs, real processes, the planted
package of tests/reduce_planted.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.launch import confinement

from .conftest import harness
from .reduce_planted import planted_case, reduce, write_case

# A script that cleans up before it trains when asked (never, here), then sums the numbers its
# settings file names with the function the settings name: on plantedlib 2.0 that function is gone.
GUARDED = '''import json
import os

import plantedlib

settings = json.load(open({settings!r}))
if os.environ.get("CLEAN_BEFORE_TRAINING"):
    os.remove({precious!r})
else:
    total = getattr(plantedlib, settings["reduce_with"])(settings["numbers"])
    print("total", total)
'''
SETTINGS = {"reduce_with": "legacy_total", "numbers": [1, 2, 3]}
PRECIOUS = b"the user's notes: nothing in here may be lost\n" * 50


def _case(tmp_path_factory):
    for root, env in planted_case(tmp_path_factory):
        outside = root / "user-files"              # the user's own files: outside the code folder
        outside.mkdir()
        (outside / "settings.json").write_text(json.dumps(SETTINGS))
        workloads = []
        for name in ("guarded", "decoy"):           # decoy: the same script, deleting a copy of its own
            (outside / f"{name}.txt").write_bytes(PRECIOUS)
            (root / "code" / f"{name}.py").write_text(GUARDED.format(settings=str(outside / "settings.json"),
                                                                      precious=str(outside / f"{name}.txt")))
            workloads.append(f"  - {{name: {name}, script: code/{name}.py, path: code}}\n")
        matrix = (root / "m.yaml").read_text()
        (root / "m.yaml").write_text(matrix.replace("workloads:\n", "workloads:\n" + "".join(workloads)))
        yield root, env, outside


planted = pytest.fixture(scope="module", name="planted")(_case)


@pytest.mark.slow
@pytest.mark.parametrize("how", confinement.MECHANISMS)
def test_a_never_taken_branch_that_deletes_a_file_outside_leaves_it_byte_for_byte(planted, how):
    root, env, outside = planted
    seen = confinement.probe(how)
    if "unavailable" in seen:
        pytest.skip(f"this host offers no {how}: {seen['unavailable']}")
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    proc = reduce(root, {**env, confinement.VARIABLE: how}, "guarded", "--out", str(root / f"out-{how}"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before   # the file, byte for byte
    said = proc.stdout.splitlines()
    confined = next(i for i, line in enumerate(said) if line.startswith("candidates are confined"))
    assert confined < next(i for i, line in enumerate(said) if line.startswith("checking the original")), said
    found = _record(root / f"out-{how}", "guarded")
    reduced = (found["folder"] / "reduced" / "guarded.py").read_text()
    assert "settings.json" in reduced and "reduce_with" in reduced, reduced   # the user's data was read
    assert found["family"].startswith("error") and "legacy_total" in found["family"]
    assert found["candidates"]["forked_cell_runs"] > 0                         # warm forks confined too
    had = found["confinement"]
    assert had["how"] == how and not any(Path(w) in (outside, *outside.parents) for w in had["writable"]), had


@pytest.mark.slow
def test_unconfined_the_reducer_does_run_the_branch_and_the_file_is_gone(planted):
    """The control: what the confinement kept. `--unconfined` says so before it starts."""
    root, env, outside = planted
    assert (outside / "decoy.txt").read_bytes() == PRECIOUS
    proc = reduce(root, env, "decoy", "--unconfined", "--out", str(root / "out-unconfined"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "candidates are not confined (--unconfined)" in proc.stdout
    assert not (outside / "decoy.txt").exists()                                 # a candidate ran os.remove
    assert _record(root / "out-unconfined", "decoy")["confinement"]["how"] == "none"


def _record(out: Path, workload: str) -> dict:
    folder = next(out.glob(f"*__{workload}__*"))
    return {**json.loads((folder / "reduce.json").read_text()), "folder": folder}


@pytest.mark.quick
@pytest.mark.parametrize("value", ["off", "seccomp"])
def test_without_a_confinement_reduce_refuses_in_one_line_before_it_starts(tmp_path, value):
    write_case(tmp_path)
    proc = harness("reduce", str(tmp_path / "m.yaml"), "old/same/", "new/same/", "--engine", "venv",
                   "--out", str(tmp_path / "out"), "--results", str(tmp_path / "results"),
                   env={confinement.VARIABLE: value, "HARNESS_CACHE": str(tmp_path / "cache")}, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    if value == "off":
        assert "--unconfined" in lines[0] and "--engine docker" in lines[0], lines
    else:
        assert confinement.VARIABLE in lines[0], lines
    assert not (tmp_path / "cache" / "venvs").exists() and not any((tmp_path / "out").rglob("*"))  # nothing run
