"""A bisect finds where a break was mended as it finds where one came in: the ends' outcomes say
which way to search. A planted package whose releases break and then mend (1.0 has the API a
user's script calls, 2.0 and 2.1 lack it, 2.2 and 3.0 have it again) and its planted nightly
distribution, on a loopback index; the user's script; real virtualenvs, a few seconds each.
Then the same for the watch, which bisects a mend it finds."""

from __future__ import annotations

import json

import pytest

from .conftest import harness
from .planted_index import PlantedIndex

# the searches are in the quick tier (nox -s tests -- -m quick): a planted release's virtualenv takes
# seconds to build; the watch, which runs two watches besides its bisects, is not
QUICK = pytest.mark.quick

API = "def legacy_total(xs):\n    return sum(xs)\n"
RELEASES = {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-03-01T00:00:00Z", "2.1": "2024-04-01T00:00:00Z",
            "2.2": "2024-06-01T00:00:00Z", "3.0": "2024-08-01T00:00:00Z"}
NIGHTS = {  # build -> upload time; from the night of 2024-05-15 on, the API is back
    "2.1.dev20240320": "2024-03-20T03:00:00Z", "2.2.dev20240410": "2024-04-10T03:00:00Z",
    "2.2.dev20240501": "2024-05-01T03:00:00Z", "2.2.dev20240515": "2024-05-15T03:00:00Z",
    "2.2.dev20240525": "2024-05-25T03:00:00Z", "2.3.dev20240605": "2024-06-05T03:00:00Z",
}
BODIES = {**{("plantedmend", v): API for v in ("1.0", "2.2", "3.0")},
          **{("plantedmend-nightly", v): API for v in NIGHTS if v >= "2.2.dev20240515"}}
MATRIX = """\
name: mend
environments:
  - {name: stuck, python: "3.11", packages: ["plantedmend==2.0"]}
workloads:
  - {name: legacy, script: code/legacy.py, path: code}
timeouts: {wall: 120, progress: 100}
"""
WATCHED = """\
name: mend-watch
environments:
  - {python: "3.11", packages: [{plantedmend: ">=1.0"}]}
workloads:
  - {name: legacy, script: code/legacy.py, path: code}
timeouts: {wall: 120, progress: 100}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("mend")
    (root / "code").mkdir()
    (root / "code" / "legacy.py").write_text("import plantedmend\nprint(plantedmend.legacy_total([1, 2]))\n")
    (root / "m.yaml").write_text(MATRIX)
    (root / "w.yaml").write_text(WATCHED)
    with PlantedIndex({"plantedmend": RELEASES, "plantedmend-nightly": NIGHTS},
                      modules={"plantedmend-nightly": "plantedmend"}, bodies=BODIES) as served:
        yield root, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def bisect(root, env, *ends: str):
    return harness("bisect", str(root / "m.yaml"), "--package", "plantedmend", *ends, "--engine", "venv",
                   "--results", str(root / "r"), "--out", str(root / "b"), env=env, timeout=1200)


def record(root, old: str, new: str) -> dict:
    return json.loads((root / "r" / "mend" / ".bisect" / f"plantedmend-{old}-{new}.json").read_text())


@QUICK
def test_a_broken_stack_is_bisected_to_the_release_that_mends_it(planted):
    """`--bad 2.0 --good 3.0`: the good release is the newer one, so the question is the mend.
    Each end is labelled by what it does, the answer is the first good release, and the bundle
    holds that release's working cell: the environment to move to, pinned."""
    root, env = planted
    proc = bisect(root, env, "--bad", "2.0", "--good", "3.0")
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "plantedmend 2.0: bad" in out and "plantedmend 3.0: good" in out
    assert "first good: plantedmend 2.2   last bad: plantedmend 2.1" in out, out[-3000:]
    assert "has no attribute 'legacy_total'" in out              # the evidence of the last bad release
    assert "other way round" not in out
    found = record(root, "2.0", "3.0")
    assert (found["direction"], found["first_good"], found["last_bad"]) == ("mended", "2.2", "2.1")
    assert found["first_bad"] is None and found["tested"]["2.0"]["verdict"] == "bad"
    [bundle] = [p for p in (root / "b").iterdir() if p.is_dir()]
    assert "plantedmend2.2" in bundle.name and f"bundle of the first good cell: {bundle}" in out
    assert json.loads((bundle / "attempts" / "1" / "result.json").read_text())["status"] == "ok"


@QUICK
def test_ends_named_the_wrong_way_round_still_find_the_mend_and_its_night(planted):
    """A user who believes the older release good and the newer bad (`--good 2.1 --bad 2.2`)
    gets what the ends show -- the mend, said to be the other way round -- and `--nightly` goes
    on below it to the first good night."""
    root, env = planted
    proc = bisect(root, env, "--good", "2.1", "--bad", "2.2", "--nightly", "plantedmend-nightly")
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "first good: plantedmend 2.2   last bad: plantedmend 2.1" in out, out[-3000:]
    assert "--good 2.1 and --bad 2.2 are the other way round" in out
    assert "first good night: plantedmend-nightly 2.2.dev20240515" in out, out[-3000:]
    night = record(root, "2.1", "2.2")["nightly"]
    assert (night["direction"], night["last_bad"], night["first_good"]) == ("mended", "2.2.dev20240501",
                                                                            "2.2.dev20240515")
    assert night["window"] == list(NIGHTS) and night["first_bad"] is None


@QUICK
def test_ends_that_do_the_same_give_no_answer_and_say_so(planted):
    """1.0 and 3.0 both work: whatever happened between them, the ends do not show a change."""
    root, env = planted
    proc = bisect(root, env, "--old", "1.0", "--new", "3.0")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no answer" in proc.stdout and "both good" in proc.stdout


@QUICK
@pytest.mark.parametrize("ends, message", [
    (["--old", "3.0", "--new", "2.0"], "--old 3.0 must be older than --new 2.0"),
    (["--good", "2.0", "--old", "1.0"], "name the ends one way"),
    (["--good", "2.0", "--bad", "2.0"], "the same release"),
    (["--old", "1.0"], "--old and --new"),
    (["--range", ">=1", "--new", "3.0"], "either --range or"),
    (["--new", "3.0", "--old", "one"], "--old 'one' is not a version"),
])
def test_ends_named_wrongly_are_one_line_and_exit_2(planted, ends, message):
    root, env = planted
    proc = harness("bisect", str(root / "m.yaml"), "--package", "plantedmend", *ends,
                   "--results", str(root / "bad-args"), env=env, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_watch_bisects_a_mend_it_finds(planted):
    """A watch that sees a release work again records the mend, bisected to its first good release."""
    root, env = planted

    def watch(as_of: str):
        return harness("watch", str(root / "w.yaml"), "--engine", "venv", "--results", str(root / "rw"),
                       "--site", str(root / "site"), "--bundles", str(root / "wb"), "--as-of", as_of,
                       env=env, timeout=1200)

    assert watch("2024-03-15").returncode == 1            # 1.0 works, 2.0 does not: a break
    mended = watch("2024-06-15")
    assert mended.returncode == 1, mended.stdout[-3000:] + mended.stderr[-3000:]
    assert "first good: plantedmend 2.2   last bad: plantedmend 2.1" in mended.stdout, mended.stdout[-3000:]
    changes = [json.loads(line)["change"]
               for line in (root / "rw" / "mend-watch" / ".watch" / "changes.jsonl").read_text().splitlines()]
    mends = [c for c in changes if c["kind"] == "mended"]
    assert len(mends) == 1 and (mends[0]["before"], mends[0]["after"], mends[0]["bisected_to"]) == ("2.1", "2.2", "2.2")
    assert "bisected to 2.2" in mends[0]["summary"]
