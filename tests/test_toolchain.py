"""The project's own toolchain: lock.txt is what the sessions install (a fresh session gets
exactly its part, a reused one is brought back to it), `nox -s lock` makes the same lock for
the same date either way pip applies a cut-off and `--check` names what the index now resolves
otherwise, a broken lock is one clear line, and `nox -s tests-latest` names the upstream
release that broke a test -- found with the harness's own `bisect` on a planted break (a test
that needs PyYAML < 6.0.4, whose libyaml stops deep nesting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from harness.environments import installer
from harness.index import cutoff, releases
from harness.toolchain import lockfile, resolve
from harness.toolchain.lockfile import GROUPS, Lock, LockError, Pin

from .conftest import ROOT

PYTHON = lockfile.this_python()


def installed(python: str | Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-I", "-c", lockfile.INSTALLED], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_lock_pins_every_requirement_of_pyproject_on_every_python():
    """Each group's requirements in pyproject.toml are met by that group's pins, on each Python the
    lock was made for, and every pin is exact and hash-checked: a range edited in pyproject.toml
    without `nox -s lock` fails here, not on a user's machine."""
    lock = lockfile.read()
    assert PYTHON in lock.pythons and set(lock.pythons) >= {"3.10", "3.11", "3.12", "3.13"}
    for python in lock.pythons:
        env = {"python_version": python, "extra": ""}
        for group, texts in resolve.roots().items():
            pins = {p.name: p for p in lock.select([group], python)}
            assert pins, (group, python)
            for text in texts:
                req = Requirement(text)
                if req.marker and not req.marker.evaluate(env):
                    continue
                pin = pins.get(lockfile.canonical(req.name))
                assert pin is not None, f"{group} on {python}: no pin for {text}"
                assert req.specifier.contains(pin.version, prereleases=True), (text, pin.version)
    for pin in lock.pins:
        assert pin.hashes and all(len(h) == 64 for h in pin.hashes), pin.name
        Version(pin.version)


HEAD = "# cut-off: x\n# pythons: 3.11\n# platform: p\n# index: i\n"
HASH = "    --hash=sha256:" + "0" * 64 + "\n"
BROKEN = {
    # case: (what is written in place of a good lock, what the one-line error must name)
    "no-hash": (HEAD + "six==1.16.0\n    # groups: test\n", ":5: six has no --hash"),
    "a-range": (HEAD + "six>=1.16\n", ":5: expected 'name==version'"),
    "bad-hash": (HEAD + "six==1.16.0 \\\n    --hash=md5:00\n", ":6: expected '--hash=sha256:"),
    "unknown-group": (HEAD + "six==1.16.0 \\\n" + HASH + "    # groups: manual\n", ":7: unknown group manual"),
    "no-header": ("six==1.16.0 \\\n" + HASH + "    # groups: test\n", "no '# cut-off:' line"),
    "twice": (HEAD + "".join(f"six=={v} \\\n" + HASH + "    # groups: test\n" for v in ("1.16.0", "1.17.0")),
              "six is pinned twice for Python 3.11"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_lock_is_one_clear_error_naming_its_line(tmp_path, case):
    path = tmp_path / "lock.txt"
    path.write_text(BROKEN[case][0])
    with pytest.raises(LockError) as info:
        lockfile.read(path)
    assert str(info.value).startswith(str(path)) and BROKEN[case][1] in str(info.value)
    assert "\n" not in str(info.value)
    # the same through the command CI runs: exit 2, the file named, no traceback
    proc = subprocess.run([sys.executable, "-m", "harness.toolchain.lockfile", "requirements", "nox", "--lock",
                           str(path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and str(path) in proc.stderr and "Traceback" not in proc.stderr


def test_a_python_the_lock_was_not_made_for_is_refused_with_the_remedy():
    lock = lockfile.read()
    with pytest.raises(LockError) as info:
        lock.select(["runtime"], "3.99")
    assert "nox -s lock -- --python 3.99" in str(info.value)


def test_the_suite_runs_on_exactly_the_lock():
    """This very process: `nox -s tests` installed the lock's runtime, test, docs and build pins for this
    Python and nothing else (pip is the virtualenv's own; the harness is the checkout)."""
    if os.environ.get("NOX_CURRENT_SESSION") != "tests":
        pytest.skip("run through `nox -s tests`, which installs the lock")
    pins = lockfile.read().select(["runtime", "test", "docs", "build"], PYTHON)
    assert lockfile.differences(pins, installed(sys.executable)) == ([], [], [])


def test_a_session_installs_its_part_of_the_lock_and_brings_a_reused_one_back(tmp_path):
    """`nox -s lint` in a new folder of virtualenvs holds exactly the lint pins; then, with a
    package the lock does not list and another at a version it does not pin, the same session
    reused removes the one and puts the other back."""
    envdir = tmp_path / "envs"
    nox = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir), "-s", "lint",
           "--install-only"]
    proc = subprocess.run(nox, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [python] = envdir.glob("*/bin/python")  # nox names it for the session, or a hash of a long path
    pins = lockfile.read().select(["lint"], PYTHON)
    assert lockfile.differences(pins, installed(python)) == ([], [], [])
    vermin = next(p for p in pins if p.name == "vermin")
    older = [str(v) for v in sorted(releases.project("vermin").releases()) if v < Version(vermin.version)][-1]
    subprocess.run([installer.uv(), "pip", "install", "--quiet", "--no-deps", "--python", str(python),
                    f"vermin=={older}", "iniconfig"], check=True, capture_output=True, timeout=600,
                   env=installer.variables())
    assert lockfile.differences(pins, installed(python)) == ([], [f"vermin {older} (lock: {vermin.version})"],
                                                             ["iniconfig"])
    proc = subprocess.run(nox, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert lockfile.differences(pins, installed(python)) == ([], [], [])


@pytest.fixture(scope="module")
def made_both_ways(tmp_path_factory):
    """The lock for lock.txt's own cut-off, made now by a pip that has --uploaded-prior-to and by one
    that has not (the pip this Python bundles, older than 26.0: it reads the harness's index of
    files uploaded before the cut-off). Made once: the check below starts from the same answer."""
    lock = lockfile.read()
    tmp_path = tmp_path_factory.mktemp("pips")
    older, newer = tmp_path / "older-pip", tmp_path / "newer-pip"
    venv.create(older, with_pip=True)  # the pip this Python bundles: older than 26.0
    venv.create(newer, with_pip=True)  # and the newest pip, which has --uploaded-prior-to
    subprocess.run([str(newer / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip>=26"],
                   check=True, capture_output=True, timeout=600)
    pythons = {"own": str(newer / "bin" / "python"), "bundled": str(older / "bin" / "python")}
    with_option = {k: cutoff.pip_has_cutoff(cutoff.pip_version_of(v)) for k, v in pythons.items()}
    return lock, with_option, {k: resolve.make({PYTHON: v}, lock.cutoff, log=lambda _: None)
                               for k, v in pythons.items()}


def test_the_lock_session_makes_the_same_lock_for_the_same_date_either_way_pip_applies_it(made_both_ways):
    """`nox -s lock -- --as-of <date>` with a pip that has --uploaded-prior-to and with one that has
    not (it reads the harness's index of files uploaded before the cut-off) makes the same file:
    the same releases, groups and hashes. Both ask the index as it is now; whether lock.txt is still
    what its date resolves to is `--check`'s to say (the index's past can grow: the next test)."""
    lock, with_option, made = made_both_ways
    assert with_option == {"own": True, "bundled": False}, with_option
    assert made["own"].text() == made["bundled"].text()
    assert made["own"].select(GROUPS, PYTHON) and made["own"].cutoff == lock.cutoff


def test_the_lock_check_names_each_package_the_index_now_resolves_otherwise(made_both_ways, tmp_path, capsys):
    """`nox -s lock -- --check` makes the lock again for its own cut-off: a lock made now passes
    but for the one pin set back to an older release, which it names with the release the index
    gives instead and that release's upload time; exit 1, and lock.txt is not written."""
    _, _, made = made_both_ways
    fresh = made["own"]   # the lock as the index gives it now (made once, above)
    pin = next(p for p in fresh.pins if p.name == "packaging" and PYTHON in p.pythons)
    proj = releases.project("packaging", refresh=True)
    back = max(v for v in proj.releases() if v < Version(pin.version) and not v.is_prerelease)
    pins = tuple(p if p != pin else Pin(p.name, str(back), p.pythons, p.groups,
                                        tuple(sorted(f.sha256 for f in proj.releases()[back])))
                 for p in fresh.pins)
    path = tmp_path / "lock.txt"
    path.write_text(Lock(fresh.cutoff, fresh.pythons, fresh.platform, fresh.index, pins).text())
    before = path.read_text()
    capsys.readouterr()
    assert resolve.main(["--check", "--out", str(path), "--python", PYTHON]) == 1
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"Python {PYTHON}: ")]
    assert said == [f"Python {PYTHON}: packaging: the lock has {back}; the index now gives {pin.version}, "
                    f"uploaded {proj.uploaded(pin.version)}"]
    assert path.read_text() == before


PLANTED_TEST = '''import yaml


def test_deep_nesting_loads():
    doc = "x: " + "[" * 1500 + "]" * 1500
    assert yaml.load(doc, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) is not None


def test_broken_whatever_the_releases():
    assert yaml.safe_load("answer: 41")["answer"] == 42
'''


@pytest.mark.slow
def test_tests_latest_names_the_release_that_broke_a_test(tmp_path):
    """A project whose lock pins PyYAML 6.0.3 and whose newest PyYAML is 6.0.4, with a test that
    loads 1,500 nested lists (libyaml 0.2.6, in PyYAML 6.0.4, stops at 1,000): tests-latest runs
    the suite, finds the failure, mends it by putting PyYAML back, and bisects with a real
    `harness bisect` (two plain virtualenvs) to 6.0.4, leaving the bundle of the failing cell. A
    second test fails whatever the releases: it is the project's own, and said so."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_planted.py").write_text(PLANTED_TEST)
    lock = lockfile.read()
    keep = {"pytest", "pluggy", "iniconfig", "packaging", "pygments", "exceptiongroup", "tomli"}
    pins = [Pin(p.name, p.version, (PYTHON,), p.groups, p.hashes) for p in lock.select(["test"], PYTHON)
            if p.name in keep]
    files = releases.project("pyyaml").releases()[Version("6.0.3")]
    pins.append(Pin("pyyaml", "6.0.3", (PYTHON,), ("runtime",), tuple(sorted(f.sha256 for f in files))))
    (project / "lock.txt").write_text(Lock(lock.cutoff, (PYTHON,), lock.platform, lock.index, tuple(pins)).text())

    # the session's virtualenv: the harness's own lock (it runs the search), then the newest PyYAML
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(lock.requirements(["runtime", "test"], PYTHON))
    for args in (["--require-hashes", "-r", str(requirements)], ["pyyaml==6.0.4"]):
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", *args],
                       check=True, capture_output=True, timeout=900)
    site = next((env / "lib").glob("python*/site-packages"))
    (site / "harness-checkout.pth").write_text(str(ROOT) + "\n")

    out = tmp_path / "out"
    proc = subprocess.run([str(python), "-m", "harness.toolchain.latest", "--root", str(project), "--lock",
                           str(project / "lock.txt"), "--out", str(out), "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 1 and (out / "summary.json").is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["moved"] == [{"name": "pyyaml", "locked": "6.0.3", "newest": "6.0.4"}]
    cause, own = sorted(summary["failing"], key=lambda c: c["verdict"] != "release")
    assert (cause["test"], cause["verdict"], cause["package"], cause["first_bad"], cause["last_good"]) == (
        "tests/test_planted.py::test_deep_nesting_loads", "release", "pyyaml", "6.0.4", "6.0.3"), (
        json.dumps(cause) + "\n" + proc.stdout[-4000:])
    assert (own["test"], own["verdict"]) == ("tests/test_planted.py::test_broken_whatever_the_releases", "lock-too")
    bundle = Path(cause["bundle"])
    assert (bundle / "run.sh").is_file() and (bundle / "attempts" / "1" / "result.json").is_file()
    result = json.loads((bundle / "attempts" / "1" / "result.json").read_text())
    assert result["status"] == "error" and "test_deep_nesting_loads" in json.dumps(result)
    assert "tests/test_planted.py::test_deep_nesting_loads: pyyaml 6.0.4 (last good 6.0.3)" in proc.stdout
    # without the search it names the package and the range it moved over, and no release it did not find
    proc = subprocess.run([str(python), "-m", "harness.toolchain.latest", "--root", str(project), "--lock",
                           str(project / "lock.txt"), "--out", str(tmp_path / "quick"), "--no-bisect", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    quick = json.loads((tmp_path / "quick" / "summary.json").read_text())
    cause = next(c for c in quick["failing"] if c["verdict"] == "release")
    assert (cause["package"], cause["first_bad"], cause["last_good"], cause["bundle"]) == ("pyyaml", None, None, None)
    assert proc.returncode == 1 and "6.0.3" in cause["note"] and "6.0.4" in cause["note"]
    assert f"test_deep_nesting_loads: {cause['note']}" in proc.stdout
