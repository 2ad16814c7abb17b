"""The two sides of a bump: a project's pins at two git revisions (a pull request's base and
head), or two pin files, and what moved between them.

A pin file is read at a revision from git's own objects (`git show REV:PATH`), never from a
checkout, so the working tree -- the head a CI job checked out -- is left as it is, and a base
that is only a commit away costs no second checkout. The file is the one `upgrade` would read
in that folder (`project.FILES`, the first found at that revision), or the one named; each side
is written under the verdict's folder, so that every command the report gives names a file
that exists."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from harness.errors import UserError
from harness.upgrade import project

BASE, HEAD = "base", "head"


@dataclass
class Side:
    """One side of the bump: where its pins came from (a revision and its path, or a file)."""
    name: str                 # BASE or HEAD
    pins: project.Pins
    revision: str | None = None   # the commit the revision named, resolved
    asked: str | None = None      # the revision as the user gave it (a branch, a tag, HEAD~1)
    path: str | None = None       # the pin file's path in the repository

    def describe(self) -> str:
        if self.revision:
            return f"{self.path} at {self.asked} ({self.revision[:12]})"
        return str(self.pins.source)


@dataclass
class Moves:
    """What the bump changes in the pins: canonical name -> (old, new)."""
    up: dict[str, tuple[str, str]] = field(default_factory=dict)
    down: dict[str, tuple[str, str]] = field(default_factory=dict)
    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)

    @property
    def moved(self) -> dict[str, tuple[str, str]]:
        return {**self.up, **self.down}

    def as_dict(self) -> dict:
        return {"up": {n: list(v) for n, v in self.up.items()}, "down": {n: list(v) for n, v in self.down.items()},
                "added": self.added, "removed": self.removed}


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise UserError("git is not on PATH: the revisions of a project are read with git") from None


def repository(folder: Path) -> tuple[Path, PurePosixPath]:
    """The repository holding `folder`, and the folder's path inside it."""
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (the project whose bump is judged)")
    got = _git(folder, "rev-parse", "--show-toplevel")
    if got.returncode != 0:
        raise UserError(f"{folder}: not inside a git repository; give the two sides as pin files "
                        "(--base-pins FILE --head-pins FILE)")
    top = Path(got.stdout.strip())
    return top, PurePosixPath(folder.resolve().relative_to(top.resolve()).as_posix())


def commit(top: Path, asked: str, option: str) -> str:
    got = _git(top, "rev-parse", "--verify", "--quiet", f"{asked}^{{commit}}")
    if got.returncode != 0 or not got.stdout.strip():
        raise UserError(f"{option} {asked}: not a revision of the repository at {top} "
                        "(a CI checkout may be shallow: fetch the base, e.g. fetch-depth: 0)")
    return got.stdout.strip()


def pin_file(top: Path, inside: PurePosixPath, rev: str, asked: str, named: str | None) -> PurePosixPath:
    """The pin file at `rev`: the one named (relative to the project), else the first of
    `project.FILES` that the project's folder holds at that revision."""
    listed = _git(top, "ls-tree", "--name-only", rev, f"{inside}/" if str(inside) != "." else ".")
    present = {PurePosixPath(line).name for line in listed.stdout.splitlines()}
    if named:
        path = inside / named if str(inside) != "." else PurePosixPath(named)
        if _git(top, "cat-file", "-e", f"{rev}:{path}").returncode != 0:
            raise UserError(f"--requirements {named}: no such file at {asked}")
        return path
    for name in project.FILES:
        if name in present:
            return inside / name if str(inside) != "." else PurePosixPath(name)
    raise UserError(f"{inside} at {asked}: no requirements.txt, pyproject.toml or lock (uv.lock, poetry.lock); "
                    "name one with --requirements")


def at_revision(folder: Path, asked: str, side: str, named: str | None, out: Path) -> Side:
    """One side's pins, read at a revision and written under `out/pins/SIDE/`."""
    top, inside = repository(folder)
    rev = commit(top, asked, f"--{side}")
    path = pin_file(top, inside, rev, asked, named)
    text = _git(top, "show", f"{rev}:{path}")
    if text.returncode != 0:
        raise UserError(f"{path} at {asked}: git cannot show it ({text.stderr.strip()[:200]})")
    written = out / "pins" / side / path.name
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(text.stdout)
    return Side(side, project.read(written), rev, asked, str(path))


def from_file(path: str, side: str) -> Side:
    return Side(side, project.read(project.find(Path("."), path)))


def moves(base: Side, head: Side) -> Moves:
    """What the head changes of the base's pins, by canonical name."""
    got = Moves()
    for name, old in base.pins.pins.items():
        new = head.pins.pins.get(name)
        if new is None:
            got.removed[name] = old
        elif new != old:
            try:
                up = Version(new) > Version(old)
            except InvalidVersion:
                raise UserError(f"{head.describe()}: {name}=={new} is not a version (PEP 440)") from None
            (got.up if up else got.down)[name] = (old, new)
    got.added = {n: v for n, v in head.pins.pins.items() if n not in base.pins.pins}
    return got
