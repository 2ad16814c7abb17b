"""Folders a command writes (a report, a bundle): never a results folder, and
only ever cleared of what the harness wrote there itself.

``report --out`` used to empty ``cells/`` and ``plots/`` below the folder it
was given. Pointed at (or next to) a results folder, that deleted runs that
happened to be named ``cells`` or ``plots``; pointed at a folder of the
user's, it deleted the user's files. Two rules replace that:

1. An output folder that is, contains or lies inside a results folder is
   refused before anything is written (``check_output_folder``).
2. What a command writes is listed in a manifest in the folder; the next run
   removes the files the manifest lists -- inside the folder, regular files
   only -- and nothing else (``Manifest``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.errors import UserError
from harness.terminal import visible
from harness.workloads.protocol import RESULT_FILE

# What marks a run folder of a results folder (the store's locks and staged workloads).
RUN_MARKERS = (".locks", ".workloads")
MANIFEST = ".harness-written.json"
MAX_WALK = 200_000  # entries looked at below an output folder before it is called too big to be one


def _is_run_or_results(folder: Path) -> bool:
    """True for a run folder (it has the store's markers or a result.json) or a results
    folder (one of its folders is a run folder)."""
    try:
        if any((folder / m).is_dir() for m in RUN_MARKERS) or (folder / RESULT_FILE).is_file():
            return True
        return any(child.is_dir() and any((child / m).is_dir() for m in RUN_MARKERS)
                   for child in folder.iterdir())
    except OSError:
        return False


def _holds_results(folder: Path) -> Path | None:
    """A results folder (or a result) somewhere below `folder`, or None. A bundle's own
    attempts (a folder with spec.json beside attempts/) are the bundle's, not a user's run."""
    seen = 0
    for top, dirs, files in os.walk(folder):
        seen += len(dirs) + len(files)
        if seen > MAX_WALK:
            raise UserError(f"{visible(folder)} holds more than {MAX_WALK} files: not an output folder of the "
                            "harness; choose a new or an earlier output folder")
        if RESULT_FILE in files or any(m in dirs for m in RUN_MARKERS):
            return Path(top)
        if "spec.json" in files and "attempts" in dirs:
            dirs.remove("attempts")
    return None


def check_apart(out: Path, what: str, results: list[Path]) -> Path:
    """`out`, once it is known to be none of `results`, neither inside one nor holding one. A
    command that keeps cells of its own there (`diverge`) asks only this."""
    out = Path(out)
    resolved = out.resolve()
    for root in results:
        r = Path(root).resolve()
        if resolved == r or r in resolved.parents or resolved in r.parents:
            relation = "is" if resolved == r else ("lies inside" if r in resolved.parents else "contains")
            raise UserError(f"{what} {visible(out)} {relation} the results folder {visible(root)}: "
                            "write it somewhere else")
    return out


def check_output_folder(out: Path, what: str, results: list[Path] = ()) -> Path:
    """`out`, once it is known to be no results folder, not inside one and holding none
    (`results`: the folders the command reads, checked whether or not they exist yet)."""
    out = check_apart(out, what, results)
    resolved = out.resolve()
    for folder in (resolved, *resolved.parents):
        if folder.is_dir() and _is_run_or_results(folder):
            raise UserError(f"{what} {visible(out)}: {visible(folder)} is a results folder; write it somewhere else")
    if resolved.is_dir():
        found = _holds_results(resolved)
        if found is not None:
            raise UserError(f"{what} {visible(out)} holds results ({visible(found)}); write it somewhere else")
    return out


class Manifest:
    """The files one command wrote into `folder`, kept in `folder/MANIFEST`, so the next
    run clears exactly those. A manifest that does not read as a list of relative file
    names (edited, forged, from a future version) lists nothing: nothing is removed."""

    def __init__(self, folder: Path, legacy=None):
        """`legacy()`: what a version without manifests wrote here (relative names), asked
        only when there is no manifest, so its pages do not linger forever."""
        self.folder = Path(folder)
        self.path = self.folder / MANIFEST
        self.files: list[str] = []
        self.notes: list[str] = []
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            data = {"files": legacy() if legacy else []}
        except (OSError, ValueError) as exc:
            data = None
            self.notes.append(f"{visible(self.path)}: not read ({visible(exc)}); nothing of an earlier run removed")
        listed = data.get("files") if isinstance(data, dict) else None
        if not (isinstance(listed, list) and all(isinstance(f, str) for f in listed)):
            if data is not None:
                self.notes.append(f"{visible(self.path)}: not a list of files; nothing of an earlier run removed")
            listed = []
        self.earlier = listed

    def clear_earlier(self) -> int:
        """Remove the files the earlier run listed (regular files inside the folder only), and
        the folders they leave empty; returns how many files went."""
        removed, parents = 0, set()
        root = self.folder.resolve()
        for name in self.earlier:
            path = self.folder / name
            try:
                real = path.resolve()
                if root not in real.parents or path.is_symlink() or not path.is_file():
                    continue
                path.unlink()
                removed += 1
                parents.update(p for p in real.parents if root in p.parents)
            except (OSError, ValueError):  # ValueError: a NUL byte in a forged name (found by the fuzz test)
                continue
        for folder in sorted(parents, key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()  # only when empty: a user's file beside ours keeps it
            except OSError:
                pass
        return removed

    def add(self, path: Path) -> Path:
        self.files.append(os.path.relpath(path, self.folder))
        return path

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"written_by": "tfkeras-harness", "files": sorted(set(self.files))}, indent=1))
        os.replace(tmp, self.path)
