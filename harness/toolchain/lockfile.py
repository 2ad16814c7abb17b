"""``lock.txt``: every package the project's own sessions install, pinned, with its hashes.

The harness's runtime dependencies, its test and lint tools, nox itself and the build
backend, each pinned to one release with the sha256 of every file of that release the
index held at the lock's cut-off -- so ``pip install --require-hashes`` installs exactly
what was tested last, on any Python the lock was resolved for, and a file that changed
on the index is refused instead of installed. (A user who ``pip install``-s the harness
gets the ranges in ``pyproject.toml`` instead; the README says which is which.)

It is a pip requirements file: every pip reads it, hash checking included, where pip's
``pylock.toml`` installs are still experimental. Beyond pip's syntax it carries, in
comments, what the sessions need to pick their part: the cut-off, the Pythons it was
resolved for, and each pin's groups (``runtime``: ``[project] dependencies``; ``test``,
``lint``, ``docs``: the extras; ``build``: ``[build-system] requires``; ``nox``: nox and what it
needs, for CI's own nox). A pin needed on some Pythons only has a ``python_version``
marker, as pip expects.

This module is read by the noxfile and by ``.ci/run`` before anything is installed, so
it uses the standard library only. ``harness.toolchain.resolve`` writes the file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import exits  # the exit statuses' names: a module of plain numbers, no dependency

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "lock.txt"
GROUPS = ("runtime", "test", "lint", "docs", "build", "nox")
PROJECT = "tfkeras-harness"
# never a difference from the lock: what a virtualenv brings itself (pip installs the lock), and the
# harness, which is the checkout
NOT_LOCKED = ("pip", PROJECT)
INSTALLED = ("import importlib.metadata as m, json; "
             "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
"""A one-line program printing its interpreter's distributions as JSON (name -> version): run with
``python -I -c`` in an environment this process is not (a nox session's, a test's)."""
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)(?:\s*;\s*(.+?))?\s*$")
_MARKER_PYTHON = re.compile(r'python_version\s*==\s*"([0-9]+\.[0-9]+)"')
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
HEADER_KEYS = ("cut-off", "pythons", "platform", "index")


class LockError(Exception):
    """lock.txt cannot be used as it is; the message names the file, the line and what to do."""


def canonical(name: str) -> str:
    """PEP 503's normal form: 'PyYAML' and 'pyyaml', 'typing_extensions' and 'typing-extensions' meet."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    name: str                   # canonical
    version: str
    pythons: tuple[str, ...]    # the Pythons ("3.11") it is for
    groups: tuple[str, ...]
    hashes: tuple[str, ...]     # sha256, hex

    def line(self, all_pythons: tuple[str, ...]) -> str:
        """The pin as lock.txt writes it: the requirement, its hashes, its groups."""
        marker = "" if set(self.pythons) == set(all_pythons) else " ; " + " or ".join(
            f'python_version == "{p}"' for p in self.pythons)
        hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in self.hashes)
        return f"{self.name}=={self.version}{marker}{hashes}\n    # groups: {', '.join(self.groups)}\n"


@dataclass(frozen=True)
class Lock:
    cutoff: str                 # files uploaded before this moment (ISO 8601, UTC)
    pythons: tuple[str, ...]
    platform: str
    index: str
    pins: tuple[Pin, ...]
    path: Path = LOCK

    def select(self, groups: list[str] | tuple[str, ...], python: str) -> list[Pin]:
        """The pins a session of `groups` installs on Python `python` ("3.11")."""
        unknown = sorted(set(groups) - set(GROUPS))
        if unknown:
            raise LockError(f"{self.path}: no group {', '.join(unknown)} (groups: {', '.join(GROUPS)})")
        if python not in self.pythons:
            raise LockError(f"{self.path} was resolved for Python {', '.join(self.pythons)}, not {python}: "
                            f"run `nox -s lock -- --python {python}` with the others, or use one of those")
        return [p for p in self.pins if python in p.pythons and set(p.groups) & set(groups)]

    def requirements(self, groups: list[str] | tuple[str, ...], python: str) -> str:
        """A requirements file of exactly those pins, for `pip install --require-hashes --no-deps -r`."""
        return "".join(p.line(tuple(p.pythons)) for p in self.select(groups, python))

    def text(self) -> str:
        head = [
            "# The project's own toolchain: what its nox sessions and CI install (pip install",
            "# --require-hashes --no-deps). Made by `nox -s lock`; do not edit by hand. Users who",
            "# `pip install` the harness get the ranges in pyproject.toml instead.",
            f"# cut-off: {self.cutoff}",
            f"# pythons: {' '.join(self.pythons)}",
            f"# platform: {self.platform}",
            f"# index: {self.index}",
            f"# groups: {' '.join(GROUPS)}",
            "",
        ]
        return "\n".join(head) + "".join(p.line(self.pythons) for p in sorted(self.pins, key=_order))


def _order(pin: Pin) -> tuple:
    return pin.name, pin.pythons


def installed() -> dict[str, str]:
    """This interpreter's distributions, canonical name -> version (``INSTALLED`` for another's)."""
    return {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


@dataclass(frozen=True)
class Comparison:
    """An environment against the pins it should hold: the one comparison, which the sessions
    (``differences``) and ``tests-latest`` each put in their own words."""
    moved: list[tuple[str, str, str]]   # (name, locked, installed)
    gone: dict[str, str]                # locked, not installed: name -> locked version
    new: dict[str, str]                 # installed, not locked: name -> installed version


def compare(expected: list[Pin], installed: dict[str, str], ignore=NOT_LOCKED) -> Comparison:
    """`installed` (name -> version, any spelling) against `expected`; names in `ignore` are never new."""
    want = {p.name: p.version for p in expected}
    have = {canonical(k): v for k, v in installed.items()}
    return Comparison(moved=[(n, v, have[n]) for n, v in sorted(want.items()) if n in have and have[n] != v],
                      gone={n: v for n, v in sorted(want.items()) if n not in have},
                      new={n: v for n, v in sorted(have.items()) if n not in want and n not in ignore})


def differences(expected: list[Pin], installed: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(missing, other versions, extra) between the pins a session should hold and what its
    environment holds: what a session removes, and what it names in its error."""
    c = compare(expected, installed)
    return ([f"{n}=={v}" for n, v in c.gone.items()], [f"{n} {have} (lock: {v})" for n, v, have in c.moved],
            list(c.new))


def parse(text: str, path: Path = LOCK) -> Lock:
    """Read lock.txt; a LockError names the line of anything this reader did not write."""
    header: dict[str, str] = {}
    pins: list[Pin] = []
    current: dict | None = None

    def finish():
        if current is None:
            return
        if not current["hashes"]:
            raise LockError(f"{path}:{current['at']}: {current['name']} has no --hash (run `nox -s lock`)")
        if not current["groups"]:
            raise LockError(f"{path}:{current['at']}: {current['name']} has no '# groups:' line (run `nox -s lock`)")
        pins.append(Pin(current["name"], current["version"], current["pythons"], tuple(current["groups"]),
                        tuple(current["hashes"])))

    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(":")
            if current is not None and key == "groups" and sep:
                current["groups"] = [g.strip() for g in value.split(",") if g.strip()]
                bad = [g for g in current["groups"] if g not in GROUPS]
                if bad:
                    raise LockError(f"{path}:{number}: unknown group {', '.join(bad)}")
            elif current is None and key in HEADER_KEYS and sep:
                header[key] = value.strip()
            continue
        if line.startswith("--hash="):
            found = _HASH.fullmatch(line.rstrip("\\").strip())
            if current is None or not found:
                raise LockError(f"{path}:{number}: expected '--hash=sha256:<64 hex digits>' after a pin")
            current["hashes"].append(found.group(1))
            continue
        finish()
        match = _PIN.fullmatch(line.rstrip("\\").strip())
        if not match:
            raise LockError(f"{path}:{number}: expected 'name==version' (run `nox -s lock` to remake the file)")
        name, version, marker = match.groups()
        if marker:
            pythons = tuple(_MARKER_PYTHON.findall(marker))
            if not pythons:
                raise LockError(f"{path}:{number}: a marker here names Python versions only")
        else:
            pythons = ()
        current = {"name": canonical(name), "version": version, "pythons": pythons, "hashes": [], "groups": [],
                   "at": number}
    finish()
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise LockError(f"{path}: no '# {missing[0]}:' line in its header (run `nox -s lock`)")
    every = tuple(header["pythons"].split())
    pins = [p if p.pythons else Pin(p.name, p.version, every, p.groups, p.hashes) for p in pins]
    seen: dict[tuple[str, str], str] = {}
    for pin in pins:
        for py in pin.pythons:
            if (pin.name, py) in seen:
                raise LockError(f"{path}: {pin.name} is pinned twice for Python {py}")
            seen[(pin.name, py)] = pin.version
    return Lock(cutoff=header["cut-off"], pythons=every, platform=header["platform"], index=header["index"],
                pins=tuple(pins), path=path)


def read(path: Path = LOCK) -> Lock:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockError(f"{path} does not exist: run `nox -s lock` to make it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{path} cannot be read: {exc}") from None
    return parse(text, Path(path))


def this_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.toolchain.lockfile requirements GROUP...`: the pins of those groups for
    this Python, as a requirements file on stdout (how CI installs its own nox)."""
    parser = argparse.ArgumentParser(prog="python -m harness.toolchain.lockfile")
    parser.add_argument("command", choices=["requirements"])
    parser.add_argument("groups", nargs="+", choices=GROUPS, metavar="GROUP")
    parser.add_argument("--python", default=this_python(), help="for this Python (default: the one running)")
    parser.add_argument("--lock", type=Path, default=LOCK)
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(read(args.lock).requirements(args.groups, args.python))
    except LockError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exits.USER_ERROR
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
