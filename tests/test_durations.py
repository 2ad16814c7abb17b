"""The order cells start in: among cells of one size the longest first, by what an earlier run
measured (harness/launch/durations.py). Real runs of user scripts on the local engine, this interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.results.store import iter_results

from .conftest import harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick


def _results(folder: Path) -> dict[str, dict]:
    return {r["cell"]: r for _, r in iter_results(folder)}


def test_a_second_run_starts_the_longest_cells_first_by_what_the_first_measured(tmp_path):
    """One core, so cells start one after another: a first run keeps the matrix's order; the next
    run of those cells (another results folder, the same cache) starts them longest first by the
    first run's times, with a cell never measured before all of them. Real processes on the
    local engine (this interpreter, user scripts that sleep)."""
    (tmp_path / "nap.py").write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"

    def run(label: str, naps: dict[str, float]) -> list[str]:
        workloads = "".join(f"  - {{name: {n}, script: nap.py, args: [{s}]}}\n" for n, s in naps.items())
        (tmp_path / "m.yaml").write_text(f'name: naps\nenvironments: [{{python: "{this}"}}]\n'
                                         f"workloads:\n{workloads}timeouts: {{wall: 120, progress: 60}}\n")
        proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "local", "--python", f"{this}={sys.executable}",
                       "--jobs", "1", "--results", str(tmp_path / label),
                       env={"HARNESS_CACHE": str(tmp_path / "cache")}, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results = _results(tmp_path / label / "naps")
        assert all(r["status"] == "ok" for r in results.values()), results
        return [c.split("/")[1] for c in sorted(results, key=lambda c: results[c]["timing"]["window"][0])]

    # two seconds apart: more than a loaded machine's variation in a cell's start
    naps = {"short": 0.1, "long": 4.1, "middle": 2.1}
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "durations.json").write_text('{"cells": [')  # unreadable: counts as nothing known
    assert run("first", naps) == ["short", "long", "middle"]  # nothing measured yet: the matrix's order
    assert run("second", {**naps, "new": 0.1}) == ["new", "long", "middle", "short"]
    known = json.loads((tmp_path / "cache" / "durations.json").read_text())["cells"]
    assert {c.split("/")[1] for c in known} == {"short", "long", "middle", "new"}  # replaced whole, read back


def test_only_figures_are_read_back_and_a_run_keeps_what_others_wrote(tmp_path, monkeypatch):
    """The file lies in the user's cache, where other runs (and anything else) write: a word, NaN,
    infinity or a negative number is no duration, and a run adds its cells to what is there."""
    from harness.launch import durations

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    (tmp_path / "durations.json").write_text(
        '{"cells": {"inf": {"seconds": "inf"}, "nan": {"seconds": NaN}, "true": {"seconds": true},'
        ' "neg": {"seconds": -1}, "list": [1], "ok": {"seconds": 3}}}')
    assert durations.load().seconds == {"ok": 3.0}  # an entry that is not an object is no entry either
    durations.remember({"new": 1.5})
    assert durations.load().seconds == {"ok": 3.0, "new": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["durations.json"]  # no temporary file left
    (tmp_path / "durations.json").unlink()
    (tmp_path / "durations.json").symlink_to(tmp_path / "elsewhere.json")
    durations.remember({"new": 1.5})  # a link where the file belongs is neither followed nor replaced
    assert not (tmp_path / "elsewhere.json").exists() and durations.load().seconds == {}


def test_a_cell_whose_programs_a_warm_run_cached_may_prepare_them_ahead_next_time(tmp_path, monkeypatch):
    """The mark that lets a follower trace and compile its steps while it stands by
    (workloads/ahead.py): set by a run that left the cell's programs in the compile cache, kept by
    a run that did not (a fresh run leaves the cache alone), read only as written; the standby
    file carries it to the cell."""
    from harness.launch import durations
    from harness.launch.standby import Standby
    from harness.workloads.protocol import STANDBY_FILE, STANDBY_PROGRAMS

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    durations.remember({"warm": 2.0, "other": 1.0}, {"warm"})
    assert durations.load().programs == {"warm"}
    durations.remember({"warm": 2.5, "other": 1.5})  # a fresh run: nothing cached, nothing cleared
    assert durations.load().programs == {"warm"} and durations.load().seconds == {"warm": 2.5, "other": 1.5}
    (tmp_path / "durations.json").write_text('{"cells": {"a": {"seconds": 1, "programs": "true"},'
                                             ' "b": {"seconds": 1, "programs": 1}, "c": {"programs": true}}}')
    assert durations.load().programs == {"c"}  # true, and nothing that merely looks like it

    for allowed, content in ((True, STANDBY_PROGRAMS + "\n"), (False, "")):
        folder = tmp_path / f"cell-{allowed}"
        folder.mkdir()
        standby = Standby()
        standby.programs = allowed
        standby.attach(folder)
        assert (folder / STANDBY_FILE).read_text() == content
        assert standby.go() and not (folder / STANDBY_FILE).exists()
