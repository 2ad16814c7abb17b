"""What was submitted, read back from the shared results folder.

A submission folder is written by a harness on the submit side, but by the
time `status` or the next `run` reads it, anything may have happened to it
(an older harness, an edit by hand, a disk that filled up half-way). It is
data, not trust: a folder whose ``submission.json`` or ``cells.txt`` does not
have the shape written here is quarantined -- left out with a one-line note
naming the file -- and its cells count as never submitted (they run on the
next submission). A ``jobs.jsonl`` line that is not a job entry is skipped,
as a line cut by a kill is.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.options.slurm import text_problem
from harness.results.store import ResultStore, read_json

SLURM_DIR = ".slurm"
DERIVED = "derived.json"  # cells that are not the matrix's own, and how a task rebuilds each
_JOB_ID = re.compile(r"[0-9]+")


@dataclass
class Submission:
    path: Path
    meta: dict
    cells: list[str]
    jobs: dict[int, str]  # array index -> job id
    refused: dict[int, str] = field(default_factory=dict)  # array index -> sbatch's error
    submitted: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))

    @property
    def engine(self) -> str:
        return self.meta["engine"]

    @property
    def matrix_label(self) -> str:
        return self.meta["matrix_label"]

    def tasks(self) -> Iterator[tuple[int, str, str | None]]:
        """(line, cell id, 'JOB_i' or None when the array never got a job id). Cells of arrays that
        sbatch refused were never submitted: they are not listed, so an earlier submission still speaks."""
        for arr in self.meta["arrays"]:
            if arr["index"] in self.refused:
                continue
            job = self.jobs.get(arr["index"])
            for i in range(arr["count"]):
                line = arr["offset"] + i
                yield line, self.cells[line], f"{job}_{i}" if job else None


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def shape_problem(meta, cells: list[str]) -> str | None:
    """Why a parsed submission.json (with its cells.txt) is not one this harness wrote, or None."""
    if not isinstance(meta, dict):
        return "not a JSON object"
    for key in ("submitted", "engine", "matrix_label"):
        if not isinstance(meta.get(key), str):
            return f"'{key}' is missing or not a string"
    try:
        dt.datetime.fromisoformat(meta["submitted"])
    except ValueError:
        return "'submitted' is not a time"
    arrays = meta.get("arrays")
    if not isinstance(arrays, list):
        return "'arrays' is missing or not a list"
    for i, arr in enumerate(arrays):
        if not isinstance(arr, dict) or not all(_count(arr.get(k)) for k in ("index", "offset", "count")):
            return f"'arrays[{i}]' has no whole-number index, offset and count"
        if arr["offset"] + arr["count"] > len(cells):
            return f"'arrays[{i}]' runs past the end of cells.txt ({len(cells)} lines)"
    return None


def _jobs(path: Path) -> tuple[dict[int, str], dict[int, str]]:
    jobs: dict[int, str] = {}
    refused: dict[int, str] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return jobs, refused
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill: that array's state is then unknown, its results still count
        if not isinstance(entry, dict) or not _count(entry.get("array")):
            continue
        if "refused" in entry:
            refused[entry["array"]] = str(entry["refused"])
        elif isinstance(entry.get("job"), (str, int)) and _JOB_ID.fullmatch(str(entry["job"])):
            jobs[entry["array"]] = str(entry["job"])
    return jobs, refused


def submissions(store: ResultStore) -> list[Submission]:
    """The run's submissions, oldest first; each folder that is not one is told to `store.note`."""
    root = store.run_dir / SLURM_DIR
    out = []
    for meta_path in sorted(root.glob("*/submission.json")) if root.exists() else []:
        meta = read_json(meta_path)
        try:
            cells = (meta_path.parent / "cells.txt").read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            cells = None
        why = "its cells.txt cannot be read" if cells is None else shape_problem(meta, cells)
        if why:
            store.note(f"{meta_path}: not a submission ({why}); left out, its cells run on the next submission")
            continue
        jobs, refused = _jobs(meta_path.parent / "jobs.jsonl")
        out.append(Submission(meta_path.parent, meta, cells, jobs, refused,
                              submitted=dt.datetime.fromisoformat(meta["submitted"])))
    return out


def derivation_problem(entry) -> str | None:
    """Why an entry of derived.json is not one this harness wrote (release_cells.derivation), or None."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    for key in ("base", "package", "version"):
        if not isinstance(entry.get(key), str) or not entry[key] or text_problem(entry[key]):
            return f"'{key}' is missing or not a plain string"
    if entry.get("cutoff") is not None:
        if not isinstance(entry["cutoff"], str):
            return "'cutoff' is not a time"
        try:
            dt.datetime.fromisoformat(entry["cutoff"].replace("Z", "+00:00"))
        except ValueError:
            return "'cutoff' is not a time"
    if not _count(entry.get("repeat")):
        return "'repeat' is not a whole number"
    return None
