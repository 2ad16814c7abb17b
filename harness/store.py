"""The results folder: one folder per cell run, written atomically.

A cell runs in ``<cell>.partial-<pid>`` and is renamed to ``<cell>`` only once
result.json is complete, so an interrupted matrix leaves either a whole result
or none, and the next run resumes from the finished ones.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .cells import Cell
from .paths import inside

RESULT = "result.json"
SPEC = "spec.json"
PARTIAL = ".partial-"
# An unavailable environment may become available (a network came back, an
# interpreter was installed): such cells are always tried again.
RETRIED_ALWAYS = frozenset({"unavailable"})


def write_json(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class ResultStore:
    def __init__(self, root: Path, run: str):
        self.root = Path(root)
        self.run_dir = inside(self.root, self.root / run)

    def final_dir(self, cell: Cell) -> Path:
        return inside(self.run_dir, self.run_dir / cell.id)

    def existing(self, cell: Cell) -> dict | None:
        return read_json(self.final_dir(cell) / RESULT)

    def needs_run(self, cell: Cell, rerun: frozenset[str] = frozenset()) -> bool:
        result = self.existing(cell)
        if result is None:
            return True
        status = result.get("status")
        return status in RETRIED_ALWAYS or status in rerun or "all" in rerun or self.is_stale(cell)

    def is_stale(self, cell: Cell) -> bool:
        """True when the stored result answers a different question than the cell
        asks now (a pin, a model size, a limit changed under the same id). The
        expected answer is left out: changing it does not change the run."""
        stored = read_json(self.final_dir(cell) / SPEC)
        if stored is None:
            return True
        now = json.loads(json.dumps(cell.spec()))
        stored.pop("expect", None)
        now.pop("expect", None)
        return stored != now

    def begin(self, cell: Cell) -> Path:
        final = self.final_dir(cell)
        work = final.with_name(final.name + f"{PARTIAL}{os.getpid()}")
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        return work

    def commit(self, work: Path, cell: Cell) -> Path:
        final = self.final_dir(cell)
        if final.exists():
            old = final.with_name(final.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(final, old)
            os.replace(work, final)
            shutil.rmtree(old)
        else:
            os.replace(work, final)
        return final

    def clean_partials(self) -> int:
        """Remove half-written cell folders left by a run that was killed."""
        removed = 0
        if not self.run_dir.exists():
            return 0
        for path in self.run_dir.rglob(f"*{PARTIAL}*"):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
        return removed


def iter_results(*roots: Path) -> Iterator[tuple[Path, dict]]:
    """Every result.json below the given folders (a checker finds them by name)."""
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob(RESULT))
        for path in files:
            if PARTIAL in str(path):
                continue
            data = read_json(path)
            if isinstance(data, dict) and "status" in data:
                yield path.parent, data
