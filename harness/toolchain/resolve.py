"""``nox -s lock``: resolve the project's own dependencies as of a moment and write lock.txt.

For each Python the harness supports, that Python's own pip resolves every group's
requirements at once (``pip install --dry-run --report``, wheels only, so nothing is built
with floating build tools) under the release-date cut-off the harness applies to its cells'
environments (``harness.index.cutoff.pip_arguments``): the lock of a given ``--as-of`` is the same
file whenever it is made. The report says which release each requirement resolved to and
what each release requires, so each pin's groups are found by walking from that group's
requirements. Each pin carries the sha256 of every file of its release that the index held
before the cut-off (from the index's JSON API, ``harness.index.releases``), so the lock installs on
any platform's wheel of that release, and the file pip picked is checked to be among them.

Both read the index as it is now, never the harness's cached lists: an index's record of
a past day can still grow (a mirror catching up, a release published late under an earlier
upload time), and ``nox -s lock -- --check`` says where it has since lock.txt was made --
the lock is the same for the same date only while the index's past stays as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from harness import exits
from harness.environments import interpreters
from harness.index import releases
from harness.index.cutoff import pip_arguments
from harness.toolchain.lockfile import GROUPS, LOCK, ROOT, Lock, LockError, Pin, canonical
from harness.toolchain.lockfile import read as read_lock

try:
    import tomllib
except ImportError:  # Python 3.10: pip carries the same parser
    from pip._vendor import tomli as tomllib

SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
TIMEOUT = 900  # seconds for one resolution


class ResolveError(Exception):
    """The lock cannot be made; the message says why and what to do."""


def roots(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, list[str]]:
    """Each group's own requirements, as pyproject.toml states them."""
    data = tomllib.loads(pyproject.read_text())
    extras = data["project"].get("optional-dependencies", {})
    out = {"runtime": list(data["project"].get("dependencies", [])),
           "test": list(extras.get("test", [])), "lint": list(extras.get("lint", [])),
           "docs": list(extras.get("docs", [])),
           "build": list(data["build-system"]["requires"])}
    out["nox"] = [r for r in out["test"] if canonical(Requirement(r).name) == "nox"]
    if not out["nox"]:
        raise ResolveError(f"{pyproject}: the test extra names no nox, which CI installs from the lock")
    assert set(out) == set(GROUPS)
    return out


def cutoff_of(as_of: str | None) -> str:
    """'2026-11-24' -> '2026-11-24T00:00:00Z'; no date: the start of today (UTC), so a lock
    made twice in one day is the same file."""
    if not as_of:
        return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT00:00:00Z")
    try:
        return releases.utc_text(as_of)
    except ValueError:
        raise ResolveError(f"--as-of {as_of!r}: expected a date (2026-11-24) or a UTC time "
                           "(2026-11-24T12:00:00Z)") from None


def report_of(python: str, requirements: list[str], cutoff: str) -> dict:
    """What `python`'s pip would install for `requirements` as of `cutoff` (pip's JSON report)."""
    with (tempfile.TemporaryDirectory(prefix="harness-lock-") as tmp,
          pip_arguments(cutoff, python, refresh=True) as (args, _)):
        out = Path(tmp) / "report.json"
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
               "--quiet", "--report", str(out), *args, *requirements]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        if proc.returncode != 0 or not out.is_file():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise ResolveError(f"pip of {python} could not resolve the requirements as of {cutoff}:\n{tail}")
        return json.loads(out.read_text())


def groups_of(report: dict, group_roots: dict[str, list[str]]) -> dict[str, set[str]]:
    """Canonical name -> the groups whose requirements reach it, for the interpreter the report
    was made on (its marker environment, extras followed)."""
    environment = report["environment"]
    meta = {canonical(item["metadata"]["name"]): item["metadata"] for item in report["install"]}
    member: dict[str, set[str]] = {name: set() for name in meta}

    def applies(req: Requirement, extras: set[str]) -> bool:
        return req.marker is None or any(req.marker.evaluate({**environment, "extra": e}) for e in extras)

    for group, texts in group_roots.items():
        seen: set[tuple[str, frozenset]] = set()
        todo = [(Requirement(t), {""}) for t in texts]
        while todo:
            req, context = todo.pop()
            if not applies(req, context):
                continue
            name = canonical(req.name)
            if name not in meta:
                raise ResolveError(f"{req} is required but pip's report has no {name}")
            key = (name, frozenset(req.extras))
            if key in seen:
                continue
            seen.add(key)
            member[name].add(group)
            todo.extend((Requirement(d), {"", *req.extras}) for d in meta[name].get("requires_dist") or [])
    return member


def hashes_of(name: str, version: str, cutoff: str, picked: set[str]) -> tuple[str, ...]:
    """sha256 of every file of the release the index held before the cut-off; the files pip
    picked must be among them (else the index and pip disagree, and the lock says so)."""
    files = releases.project(name, refresh=True).releases().get(Version(version), [])
    found = sorted({f.sha256 for f in files if f.sha256 and not f.yanked and f.uploaded and f.uploaded < cutoff})
    strange = picked - set(found)
    if strange:
        raise ResolveError(f"{name} {version}: a file pip chose (sha256 {min(strange)[:12]}...) is not among the "
                           f"index's files uploaded before {cutoff}")
    if not found:
        raise ResolveError(f"{name} {version}: the index lists no file with a sha256 before {cutoff}")
    return tuple(found)


def make(pythons: dict[str, str], cutoff: str, log=print) -> Lock:
    """Resolve on each (version -> interpreter) and merge into one Lock: one pin per release,
    marked with the Pythons it is for where that is not all of them."""
    group_roots = roots()
    every = [r for texts in group_roots.values() for r in texts]
    per_python: dict[str, dict[str, tuple[str, set[str], str | None]]] = {}
    for version, exe in pythons.items():
        exe = with_pip(exe)
        log(f"resolving for Python {version} ({exe}) as of {cutoff}")
        report = report_of(exe, every, cutoff)
        member = groups_of(report, group_roots)
        resolved = {}
        for item in report["install"]:
            name = canonical(item["metadata"]["name"])
            picked = (item.get("download_info", {}).get("archive_info", {}).get("hashes") or {}).get("sha256")
            if member.get(name):
                resolved[name] = (item["metadata"]["version"], member[name], picked)
        per_python[version] = resolved
    pins = []
    names = sorted({n for resolved in per_python.values() for n in resolved})
    for name in names:
        by_version: dict[str, list[str]] = {}
        for py, resolved in per_python.items():
            if name in resolved:
                by_version.setdefault(resolved[name][0], []).append(py)
        for version, pys in by_version.items():
            groups = set().union(*(per_python[p][name][1] for p in pys))
            hashes = hashes_of(name, version, cutoff, {per_python[p][name][2] for p in pys} - {None})
            pins.append(Pin(name, version, tuple(sorted(pys, key=Version)),
                            tuple(g for g in GROUPS if g in groups), hashes))
    return Lock(cutoff=cutoff, pythons=tuple(sorted(pythons, key=Version)),
                platform=f"{sys.platform} {platform.machine()}", index=releases.pip_settings().index,
                pins=tuple(pins))


def differences(locked: Lock, fresh: Lock, python: str) -> list[str]:
    """How `fresh` (made now for the same cut-off) differs from `locked` on `python`, one line per
    package, with the index's upload time of a release the lock did not take."""
    old = {p.name: p for p in locked.select(GROUPS, python)}
    new = {p.name: p for p in fresh.select(GROUPS, python)}
    lines = []
    for name in sorted(old.keys() | new.keys()):
        was, now = old.get(name), new.get(name)
        if was is None:
            lines.append(f"{name} {now.version}: not in the lock; needed now ({', '.join(now.groups)})")
        elif now is None:
            lines.append(f"{name} {was.version}: in the lock, no longer needed")
        elif was.version != now.version:
            when = releases.project(name, refresh=True).uploaded(now.version) or "at an unknown time"
            lines.append(f"{name}: the lock has {was.version}; the index now gives {now.version}, uploaded {when}")
        elif was.hashes != now.hashes:
            more, fewer = len(set(now.hashes) - set(was.hashes)), len(set(was.hashes) - set(now.hashes))
            lines.append(f"{name} {was.version}: the index now lists {more} file(s) the lock lacks and lacks "
                         f"{fewer} it has")
        elif was.groups != now.groups:
            lines.append(f"{name} {was.version}: groups {', '.join(was.groups)} in the lock, "
                         f"{', '.join(now.groups)} now")
    return lines


def check(lock: Lock, pythons: dict[str, str], log=print) -> int:
    """`nox -s lock -- --check`: make the lock again for its own cut-off and say how it differs
    (0: the same; 1: it differs, each package named)."""
    fresh = make(pythons, lock.cutoff, log=log)
    found = {py: differences(lock, fresh, py) for py in pythons}
    if not any(found.values()):
        log(f"{lock.path}: the index as of {lock.cutoff} still resolves to it, file for file")
        return exits.OK
    for py, lines in found.items():
        for line in lines:
            log(f"Python {py}: {line}")
    log(f"{lock.path} is not what its cut-off resolves to now: the index's record before {lock.cutoff} has changed "
        f"since it was made (or pyproject.toml has); `nox -s lock -- --as-of {lock.cutoff[:10]}` takes that in")
    return exits.CHANGED


_HAS_PIP = "import importlib.util, sys; sys.exit(importlib.util.find_spec('pip') is None)"
_BASE = "import sys; print(getattr(sys, '_base_executable', None) or sys.executable)"


def with_pip(python: str) -> str:
    """`python`, or where it holds no pip -- a virtualenv made by uv, as nox's sessions are -- the
    interpreter it was made from: the lock's resolution needs pip's report (the only pip it
    runs), and the same Python resolves the same markers."""
    if subprocess.run([python, "-I", "-c", _HAS_PIP], capture_output=True).returncode == 0:
        return python
    base = subprocess.run([python, "-I", "-c", _BASE], capture_output=True, text=True).stdout.strip()
    return base or python


def interpreters_for(wanted: list[str]) -> dict[str, str]:
    found, missing = {}, []
    for version in wanted:
        hit = interpreters.find(version)
        if hit:
            found[version] = with_pip(hit[0])
        else:
            missing.append(version)
    if missing:
        raise ResolveError(f"no interpreter for Python {', '.join(missing)} (looked on PATH, in HARNESS_PYTHONS "
                           f"and pyenv's versions); install it, or lock for fewer with --python")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s lock --", description=(
        "Resolve the project's own dependencies (runtime, test, lint, docs, build, nox) as of a date and write "
        "the lock its sessions install from."))
    parser.add_argument("--as-of", metavar="DATE", help="resolve with the files uploaded before this date or UTC "
                        "time (default: the start of today, UTC)")
    parser.add_argument("--python", action="append", metavar="X.Y", choices=SUPPORTED_PYTHONS,
                        help=f"lock for these Pythons only (repeatable; default: {', '.join(SUPPORTED_PYTHONS)})")
    parser.add_argument("--out", type=Path, default=LOCK, help="where to write it (default: lock.txt)")
    parser.add_argument("--check", action="store_true", help="write nothing: make the lock in --out again for its "
                        "own cut-off and name what differs (exit 1 if anything does)")
    args = parser.parse_args(argv)
    if args.check:
        if args.as_of:
            parser.error("--check resolves as of the lock's own cut-off; --as-of does not go with it")
        try:
            lock = read_lock(args.out)
            return check(lock, interpreters_for(args.python or list(lock.pythons)))
        except (ResolveError, LockError, releases.ReleasesUnavailable) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exits.USER_ERROR
    try:
        cutoff = cutoff_of(args.as_of)
        lock = make(interpreters_for(args.python or list(SUPPORTED_PYTHONS)), cutoff)
    except (ResolveError, releases.ReleasesUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exits.USER_ERROR
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(lock.text())
    os.replace(tmp, args.out)
    print(f"{args.out}: {len({p.name for p in lock.pins})} packages for Python {', '.join(lock.pythons)}, "
          f"files uploaded before {cutoff}")
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
