"""`bisect --nightly` goes on below the releases: after the first bad release, the builds of the
package's nightly distribution uploaded between the last good and the first bad release are
searched, as of the same cut-off, for the first bad night. A planted package and its planted
nightly distribution (which installs the same module) on a loopback index, a user's script, real
virtualenvs; and a nightly distribution with no build between the two releases says so."""

from __future__ import annotations

import json

import pytest

from .conftest import harness
from .planted_index import PlantedIndex

OLD = "def legacy_total(xs):\n    return sum(xs)\n"
NIGHTS = {  # build -> upload time; from the night of 2024-03-01 on, the API is gone
    "1.1.dev20231215": "2023-12-15T03:00:00Z", "1.1.dev20240201": "2024-02-01T03:00:00Z",
    "1.1.dev20240301": "2024-03-01T03:00:00Z", "1.1.dev20240401": "2024-04-01T03:00:00Z",
    "1.1.dev20240501": "2024-05-01T03:00:00Z", "2.1.dev20240610": "2024-06-10T03:00:00Z",
}
RELEASES = {"plantedlib": {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-06-01T00:00:00Z"},
            "plantedlib-nightly": NIGHTS,
            "plantedlib-sparse": {"0.9.dev20231201": "2023-12-01T03:00:00Z"}}
BODIES = {("plantedlib", "1.0"): OLD, **{("plantedlib-nightly", v): OLD for v in NIGHTS if v < "1.1.dev20240301"}}
MODULES = {"plantedlib-nightly": "plantedlib", "plantedlib-sparse": "plantedlib"}
MATRIX = """\
name: nightly
environments:
  - {name: old, python: "3.11", packages: ["plantedlib==1.0"]}
workloads:
  - {name: legacy, script: code/legacy.py, path: code}
timeouts: {wall: 120, progress: 100}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    (root / "code").mkdir()
    (root / "code" / "legacy.py").write_text("import plantedlib\nprint(plantedlib.legacy_total([1, 2]))\n")
    (root / "m.yaml").write_text(MATRIX)
    with PlantedIndex(RELEASES, modules=MODULES, bodies=BODIES) as served:
        yield root, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def bisect(root, env, nightly: str):
    return harness("bisect", str(root / "m.yaml"), "--package", "plantedlib", "--good", "1.0", "--bad", "2.0",
                   "--nightly", nightly, "--engine", "venv", "--results", str(root / "r"),
                   "--out", str(root / "b"), env=env, timeout=1200)


@pytest.mark.slow
def test_the_first_bad_night_between_two_releases(planted):
    root, env = planted
    proc = bisect(root, env, "plantedlib-nightly")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first bad: plantedlib 2.0" in proc.stdout
    assert "first bad night: plantedlib-nightly 1.1.dev20240301" in proc.stdout, proc.stdout[-3000:]
    record = json.loads(next((root / "r" / "nightly" / ".bisect").glob("plantedlib-*.json")).read_text())
    night = record["nightly"]
    assert (night["last_good"], night["first_bad"]) == ("1.1.dev20240201", "1.1.dev20240301")
    # the window: every build between the releases' uploads, and the nearest one on each side
    assert night["window"] == list(NIGHTS)
    assert night["problem"] == ""


@pytest.mark.slow
def test_a_nightly_distribution_without_a_build_in_the_window_says_so(planted):
    root, env = planted
    proc = bisect(root, env, "plantedlib-sparse")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]   # the release answer stands
    assert "first bad: plantedlib 2.0" in proc.stdout
    assert "no build of plantedlib-sparse" in proc.stdout, proc.stdout[-3000:]


WATCHED = """\
name: nightly-watch
environments:
  - {python: "3.11", packages: [{plantedlib: ">=1.0"}]}
workloads:
  - {name: legacy, script: code/legacy.py, path: code}
watch: {nightly: plantedlib-nightly}
timeouts: {wall: 120, progress: 100}
"""


@pytest.mark.slow
def test_a_watch_asked_for_nightlies_bisects_a_break_to_its_night(planted):
    """`watch: {nightly: ...}` in the matrix: a watch that finds a break bisects it below the
    releases too, and the history records the first bad release; the night is in the bisect's
    record, found as a bisect --nightly finds it."""
    root, env = planted
    (root / "w.yaml").write_text(WATCHED)

    def watch(as_of: str):
        return harness("watch", str(root / "w.yaml"), "--engine", "venv", "--results", str(root / "rw"),
                       "--site", str(root / "site"), "--bundles", str(root / "wb"), "--as-of", as_of,
                       env=env, timeout=1200)

    first = watch("2024-01-15")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = watch("2024-06-15")
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]   # a break: exit 1
    assert "first bad night: plantedlib-nightly 1.1.dev20240301" in second.stdout, second.stdout[-3000:]
    record = json.loads(next((root / "rw" / "nightly-watch" / ".bisect").glob("plantedlib-*.json")).read_text())
    assert (record["nightly"]["last_good"], record["nightly"]["first_bad"]) == ("1.1.dev20240201", "1.1.dev20240301")
