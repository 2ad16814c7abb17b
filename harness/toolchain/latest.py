"""``nox -s tests-latest``: the suite against the newest releases, and which release broke what.

The session's virtualenv holds the newest release of every dependency that pyproject.toml's
ranges allow (not lock.txt). This module

1. compares it with the lock: the packages that moved, and to what;
2. runs the suite (pytest's arguments passed through), noting each failing test's id;
3. runs each failing test again as it is (one that passes now is flaky, not broken), then once
   with each moved package back at its locked release: a package whose return mends the test
   is what broke it (none: several moved together, or the test fails with the lock too);
4. finds the release with the harness's own ``bisect``: the failing tests become a ``script:``
   cell in a plain environment of the lock's other pins and a copy of this source, and the
   search runs over that package's releases from the locked one (good) to the newest (bad),
   leaving the first bad cell's bundle;
5. prints one line per failing test and writes ``summary.json``.

Exit status: 0 when every test passes with the newest releases, 1 when some fail (each named
with its cause), 2 when the harness itself could not do the above.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.toolchain.failures import VARIABLE
from harness.toolchain.failures import read as read_failures
from harness.toolchain.lockfile import LOCK, NOT_LOCKED, ROOT, LockError, Pin, installed, read, this_python
from harness.toolchain.lockfile import compare as compare_with_lock

GROUPS = ("runtime", "test", "docs")  # what the tests session installs (the build group is not imported)
NOT_COMPARED = (*NOT_LOCKED, "setuptools", "wheel")  # and the build tools the tests session does not select
CELL_SCRIPT = Path(__file__).with_name("pytest_cell.py")
CELL_NAME = "_harness_pytest_cell.py"
SKIPPED = shutil.ignore_patterns(".*", "__pycache__", "*.egg-info", "results", "bundles", "site", "venv")
CELL_SECONDS = 3600.0


@dataclass(frozen=True)
class Moved:
    name: str
    locked: str
    newest: str


@dataclass
class Cause:
    """Why one test fails with the newest releases."""
    test: str
    verdict: str                 # flaky | release | several | lock-too | no-answer
    package: str | None = None
    first_bad: str | None = None
    last_good: str | None = None
    bundle: str | None = None
    note: str = ""

    def line(self) -> str:
        if self.verdict == "release" and self.first_bad:  # found by bisect; without it, the note says the range
            return (f"{self.test}: {self.package} {self.first_bad} (last good {self.last_good})"
                    + (f"; bundle {self.bundle}" if self.bundle else ""))
        return f"{self.test}: {self.note}"


def compare(pins: list[Pin], have: dict[str, str]) -> tuple[list[Moved], list[str], list[str]]:
    """(moved, new, gone): what the newest releases change against the lock's pins."""
    c = compare_with_lock(pins, have, ignore=NOT_COMPARED)
    return ([Moved(*m) for m in c.moved], [f"{n} {v}" for n, v in c.new.items()],
            [f"{n} {v}" for n, v in c.gone.items()])


def pytest(args: list[str], failures: Path, root: Path) -> int:
    """Run pytest on `root` in this interpreter; the failing ids land in `failures`."""
    failures.unlink(missing_ok=True)
    env = {**os.environ, VARIABLE: str(failures)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.toolchain.failures", "--rootdir", str(root),
                           *args], cwd=root, env=env).returncode


def pip_install(pin: Pin | str) -> None:
    """One release into this virtualenv, without its dependencies (hash-checked when locked), by uv:
    the session's virtualenv, made by uv, holds no pip."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        if isinstance(pin, Pin):
            req.write(f"{pin.name}=={pin.version} " + " ".join(f"--hash=sha256:{h}" for h in pin.hashes) + "\n")
        else:
            req.write(pin + "\n")
    try:
        from uv import find_uv_bin  # the lock's uv, installed beside the harness
        subprocess.run([find_uv_bin(), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
                        "-r", req.name], check=True)
    finally:
        os.unlink(req.name)


def _with_locked(moved: list[Moved], pins: dict[str, Pin], tests: list[str], failures: Path, root: Path) -> list[str]:
    """Which of `tests` still fail with the `moved` packages back at their locked releases; they
    go forward to the newest again, whatever happens."""
    try:
        for m in moved:
            pip_install(pins[m.name])
        pytest(tests, failures, root)
        return [t for t in tests if t in read_failures(failures)]
    finally:
        for m in moved:
            pip_install(f"{m.name}=={m.newest}")


def suspects(failing: list[str], moved: list[Moved], pins: dict[str, Pin], work: Path, root: Path,
             log=print) -> tuple[dict[str, list[str]], list[str], list[str], list[str]]:
    """(package -> the failing tests its locked release mends, flaky tests, tests only all the
    locked releases together mend, tests that fail with the lock too). Each moved package goes
    back to its locked release for one run of the failing tests; what none mends alone runs once
    more with all of them back."""
    failures = work / "failures.txt"
    pytest(failing, failures, root)
    still = read_failures(failures)
    flaky = [t for t in failing if t not in still]
    mended: dict[str, list[str]] = {}
    for m in moved if still else []:
        log(f"== {m.name} back at {m.locked} (newest {m.newest}): the failing tests again")
        fixed = [t for t in still if t not in _with_locked([m], pins, still, failures, root)]
        if fixed:
            mended[m.name] = fixed
    alone = [t for t in still if not any(t in tests for tests in mended.values())]
    lock_too = []
    if alone and moved:
        log(f"== every moved package back at its locked release: {len(alone)} test(s) again")
        lock_too = _with_locked(moved, pins, alone, failures, root)
    elif alone:
        lock_too = alone
    return mended, flaky, [t for t in alone if t not in lock_too], lock_too


def stage_source(root: Path, dest: Path) -> Path:
    """The source under test as the suite sees it (git's files, tracked or not ignored), and the cell
    script: copied, so the search runs the tests as they are now, whatever the checkout does next."""
    shutil.rmtree(dest, ignore_errors=True)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True)
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve() and listed.returncode == 0:
        for rel in filter(None, listed.stdout.decode().split("\0")):
            src = root / rel
            if src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
    else:  # not a git checkout: the tree, less what is never code
        shutil.copytree(root, dest, ignore=SKIPPED)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(CELL_SCRIPT, dest / CELL_NAME)
    return dest


def search_matrix(folder: Path, package: str, moved: Moved, tests: list[str], pins: list[Pin],
                  python: str) -> dict:
    """The matrix of one search: the lock's pins but `package`, which ranges from its locked
    release to the newest; one script cell running `tests` on the staged source (in `folder`)."""
    packages = [f"{p.name}=={p.version}" for p in pins if p.name != package]
    packages.append({package: f">={moved.locked},<={moved.newest}"})
    return {"name": f"tests-latest-{package}",
            "description": f"which {package} release breaks {len(tests)} test(s) of this project's suite",
            "environments": [{"python": python, "packages": packages}],
            "workloads": [{"name": "failing-tests", "script": f"source/{CELL_NAME}", "path": "source",
                           "args": tests}],
            "releases": {"cutoff": False},  # every other package is pinned: its locked release, not a contemporary
            "timeouts": {"wall": CELL_SECONDS, "progress": CELL_SECONDS}}


def bisect(package: str, moved: Moved, tests: list[str], pins: list[Pin], python: str, work: Path, root: Path,
           log=print) -> Cause:
    """The harness's bisect over `package`'s releases (through its API, as a user's script would
    call it), on a matrix written beside the staged source; its answer says the release."""
    # deferred, both: the API loads the runner (and rich), and the lock's own commands import this
    # module on the standard library and PyYAML alone
    from rich.console import Console  # deferred: see above

    from harness import api  # deferred: see above

    folder = work / "bisect" / package
    folder.mkdir(parents=True, exist_ok=True)
    stage_source(root, folder / "source")
    results, bundles = work / "results", work / "bundles"
    log(f"== harness bisect {folder / 'matrix.yaml'} --package {package} --good {moved.locked} --bad {moved.newest}")
    try:
        m = api.matrix_from_dict(search_matrix(folder, package, moved, tests, pins, python), folder / "matrix.yaml",
                                 results=results)
        done = api.bisect(m, package=package, good=moved.locked, bad=moved.newest, engine="venv", cutoff=False,
                          pythons={python: getattr(sys, "_base_executable", sys.executable)},
                          results=results, out=bundles, console=Console(soft_wrap=True))
    except api.UserError as exc:
        return Cause(tests[0], "no-answer", package, note=f"{package}: the search could not run: {exc}")
    found = done.found
    if found.problem or not found.first_bad:
        why = found.problem or f"first bad is one of {', '.join(found.candidates or [])}"
        return Cause(tests[0], "no-answer", package, note=f"{package} {moved.locked} -> {moved.newest}: {why}")
    return Cause(tests[0], "release", package, found.first_bad, found.last_good,
                 str(done.bundle) if done.bundle else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s tests-latest --", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests-latest",
                        help="where the summary, the searches' results and bundles go (default: tests-latest/)")
    parser.add_argument("--no-bisect", action="store_true", help="name the package, not its release")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project whose suite runs (default: this one)")
    parser.add_argument("--lock", type=Path, default=LOCK, help="its lock (default: lock.txt)")
    args, pytest_args = parser.parse_known_args(argv)
    python = this_python()
    root = args.root.resolve()
    try:
        lock = read(args.lock)
        pins = lock.select(GROUPS, python)
    except LockError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    work = args.out.resolve()
    work.mkdir(parents=True, exist_ok=True)
    moved, new, gone = compare(pins, installed())
    print(f"== newest releases against {lock.path.name} (files before {lock.cutoff}): {len(moved)} moved"
          + (f", new: {', '.join(new)}" if new else "") + (f", gone: {', '.join(gone)}" if gone else ""))
    for m in moved:
        print(f"   {m.name} {m.locked} -> {m.newest}")
    code = pytest(pytest_args, work / "failures.txt", root)
    failing = read_failures(work / "failures.txt")
    causes: list[Cause] = []
    if code not in (0, 1) and not failing:
        print(f"error: pytest exited {code} (interrupted, or a usage error): nothing to attribute", file=sys.stderr)
        return 2
    if failing:
        by_name = {p.name: p for p in pins}
        mended, flaky, several, lock_too = suspects(failing, moved, by_name, work, root)
        causes += [Cause(t, "flaky", note="passed when run again with the same releases (flaky)") for t in flaky]
        for package, tests in mended.items():
            m = next(x for x in moved if x.name == package)
            if args.no_bisect:
                found = Cause(tests[0], "release", package, note=f"{package}: a release after {m.locked}, "
                              f"up to {m.newest} (--no-bisect: the first bad one not searched for)")
            else:
                found = bisect(package, m, tests, pins, python, work, root)
            causes += [Cause(t, found.verdict, found.package, found.first_bad, found.last_good, found.bundle,
                             found.note) for t in tests]
        causes += [Cause(t, "several", note="the moved packages together break it; no single one does: "
                         + ", ".join(f"{m.name} {m.newest}" for m in moved)) for t in several]
        causes += [Cause(t, "lock-too", note="it fails with the lock's releases too: not an upstream change "
                         "(`nox -s tests` shows it)") for t in lock_too]
    summary = {"lock": {"path": lock.path.name, "cutoff": lock.cutoff}, "python": python,
               "moved": [asdict(m) for m in moved], "new": new, "gone": gone, "pytest_exit": code,
               "failing": [asdict(c) for c in causes]}
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"== {len(moved)} package(s) other than the lock's; "
          + ("every test passes with them" if not failing else f"{len(failing)} test(s) fail:"))
    for cause in causes:
        print(f"   {cause.line()}")
    print(f"summary: {work / 'summary.json'}")
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())
