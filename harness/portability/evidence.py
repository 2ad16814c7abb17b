"""The evidence `portability explain` leaves beside the published grid, and the groups it is kept
by: differing pairs that share a cause (the same model, format and way of loading, between the
same two lines of releases). `explain` writes ``OUT/evidence/<group>.json``; `publish` reads it
back and links it from the page, for the groups the grid still has. `portability bisect` keeps each
change it narrowed to a release the same way, by the change's id."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.portability import judge
from harness.portability.table import line

EVIDENCE = "evidence"   # beside the published page: OUT/evidence/<group>.json
CHANGES = f"{EVIDENCE}/changes"   # and each narrowed change's: OUT/evidence/changes/<change>.json


def as_run(path) -> str:
    """A folder as an evidence file's command names it: relative to where the command ran when it
    lies below it -- the evidence is published, and a checkout's own path means nothing elsewhere."""
    path = Path(path)
    try:
        path = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return shlex.quote(str(path))


@dataclass(frozen=True)
class Group:
    """Differing pairs that share a cause: model, format, the way that loaded, the two lines."""
    model: str
    format: str
    way: str
    writer_line: str
    reader_line: str

    @property
    def id(self) -> str:
        """Its name in a command (--group) and its evidence file's: letters, digits, dots and dashes."""
        return slug(f"{self.model}-{self.format}-{self.way}-{self.writer_line}-to-{self.reader_line}")

    def as_dict(self) -> dict:
        return {"id": self.id, "model": self.model, "format": self.format, "way": self.way,
                "writer_line": self.writer_line, "reader_line": self.reader_line}


def groups(records: list[dict], stacks: dict[str, dict], names: list[str]) -> dict[Group, list[dict]]:
    """Every differing record, by its group, in the grid's order (oldest writer, then reader)."""
    order = {n: i for i, n in enumerate(names)}
    out: dict[Group, list[dict]] = {}
    for r in sorted(records, key=lambda r: (order[r["writer"]], order[r["reader"]])):
        if r["verdict"] == judge.DIFFERS:
            key = Group(r["model"], r["format"], r["way"], line(stacks[r["writer"]]), line(stacks[r["reader"]]))
            out.setdefault(key, []).append(r)
    return out


def path_for(out: Path, group: Group) -> Path:
    return out / EVIDENCE / f"{group.id}.json"


def load(out: Path) -> dict[str, dict]:
    """Group id -> its evidence, as `explain` left it beside the page (none yet: empty)."""
    return _read(out, EVIDENCE, "group")

def slug(text: str) -> str:
    """A name for a command line and a file: the text in letters, digits, dots and dashes."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def change_file(change_id: str) -> str:
    """A change's evidence file name."""
    return slug(change_id) + ".json"


def load_changes(out: Path) -> dict[str, dict]:
    """Change id -> its narrowing's evidence, as `portability bisect` left it (none yet: empty)."""
    return _read(out, CHANGES, "change")


def _read(out: Path, folder: str, about: str) -> dict[str, dict]:
    """The evidence files of one folder beside the page, by the id of what each is about (its
    `about` entry's); with where it lies, as the page links it. A file that is not such evidence
    is passed over."""
    found = {}
    for path in sorted((out / folder).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get(about), dict):
            found[data[about].get("id")] = {**data, "file": f"{folder}/{path.name}"}
    return found
