"""`harness atlas explain`: each break, mend, changed failure, slow-down or accuracy drop between
neighbouring rows, narrowed with the harness's own bisect -- to the first bad (or first good)
release between the two rows' minors and, where the package has nightlies, to the night -- and kept
as evidence the pages link.

The atlas measures the newest patch of each minor; a change between two rows therefore lies
somewhere among the releases between them. The bisect runs the after-row's cell with each release
of the package that differs between the rows (TensorFlow on the Keras 2 line, Keras on the Keras 3
lines, unless only the other moved), in the after-row's environment, each release resolved as of
its own day, and writes its record; that record is copied to ``EVIDENCE/<change id>.json`` with the
command that made it, so the next `publish` links it and anyone can run the command again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from ..errors import UserError
from ..terminal import shown
from . import changes, records, rows

STATUS_KINDS = ("broke", "mended", "family-changed")
# A shift is bisected as a drop from the older row: past the bisect's criterion, the release is bad
CRITERIA = {"slower": ["--speed-drop", "20"], "accuracy": ["--accuracy-drop", "0.02"]}
EXPLAINED = STATUS_KINDS + tuple(CRITERIA)
EVIDENCE = "docs/atlas/evidence"


def plan(change: changes.Change, by_key: dict[str, rows.Row], *, nightly: bool) -> list[str] | None:
    """The bisect's arguments for a change between two rows, None when it has no two sides."""
    before, after = by_key.get(change.before or ""), by_key.get(change.after)
    if before is None or after is None:
        return None
    order = ("keras", "tensorflow") if after.line.startswith("keras3") else ("tensorflow", "keras")
    moved = [p for p in order if before.stack.get(p) and after.stack.get(p)
             and before.stack[p] != after.stack[p] and not after.stack[p].endswith("-tf")]
    if not moved:
        return None
    package = moved[0]
    workload, parallelism = change.column.split(" ", 1)
    cell = f"{after.environment}/{workload}/{parallelism}/*"
    matrix = after.matrix_file
    if change.kind == "accuracy" and (change.size or 1) >= 1:
        return None  # an accuracy gain: nothing dropped to bisect for
    return ["bisect", matrix, "--cell", cell, "--package", package, "--old", before.stack[package],
            "--new", after.stack[package], *CRITERIA.get(change.kind, []), *(["--nightly"] if nightly else [])]


def command(args, console: Console) -> int:
    recs, _ = records.read(Path(args.data))
    table = rows.build(recs)
    by_key = {r.key: r for r in table}
    wanted = [c for c in changes.find(table) if c.kind in EXPLAINED
              and (not args.change or c.id in args.change)]
    if args.change and not wanted:
        raise UserError(f"--change {' '.join(args.change)}: no break, mend or changed failure has that id "
                        f"(they are in {Path(args.data).parent / 'changes.json'})")
    evidence = Path(args.evidence)
    evidence.mkdir(parents=True, exist_ok=True)
    results = Path(args.results)
    explained = 0
    for group in changes.grouped(wanted):
        change = group[0]
        targets = [evidence / f"{c.id}.json" for c in group]
        if all(t.exists() for t in targets) and not args.again:
            continue
        argv = plan(change, by_key, nightly=not args.no_nightly)
        if argv is None:
            continue
        # the bisect's bundle (the changed release's cell) beside its results, never among them
        argv += ["--engine", "venv", "--results", str(results), "--out", f"{results}-bundles"]
        console.print(shown(f"{change.kind} {change.column} at {change.after}: harness {' '.join(argv)}"),
                      highlight=False)
        started = time.time()
        rc = subprocess.run([sys.executable, "-m", "harness", *argv]).returncode
        if rc in (130, -2):
            raise KeyboardInterrupt
        record = _newest_record(results, started)
        if record is None:  # it could not search (exit 2: said above); no evidence, the next explain tries again
            console.print(f"[red]no bisect record[/] for {shown(change.id)} (exit {rc})", highlight=False)
            continue
        data = json.loads(record.read_text())
        kept = {"change": change.to_dict(), "command": "python -m harness " + " ".join(argv[:argv.index("--engine")]),
                "exit": rc, **{k: data.get(k) for k in ("package", "versions", "direction", "first_bad", "last_good",
                                                        "first_good", "last_bad", "candidates", "problem",
                                                        "warnings", "nightly", "tested")}}
        for c, target in zip(group, targets, strict=True):  # one event in several columns: one bisect, each told
            target.write_text(json.dumps({**kept, "change": c.to_dict()}, indent=1, sort_keys=True, default=str) + "\n")
        explained += 1
    console.print(f"atlas explain: {explained} change(s) bisected; evidence under {evidence}", highlight=False)
    return 0


def _newest_record(results: Path, since: float) -> Path | None:
    found = [p for p in results.glob("*/.bisect/*.json") if p.stat().st_mtime >= since - 1]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def attach(found: list[changes.Change], evidence: Path, link_prefix: str) -> None:
    """Each change's bisect evidence, when `explain` left one: its answer in words and a link."""
    for change in found:
        path = evidence / f"{change.id}.json"
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        change.evidence.append({"what": _answer(data), "link": f"{link_prefix}/{path.name}"})
        if change.confirmed is not None:  # a speed shift: the bisect ran both ends side by side
            change.confirmed = bool(data.get("direction")) and not data.get("problem")


def _answer(data: dict) -> str:
    package = data.get("package") or "?"
    if data.get("problem"):
        return f"bisect of {package}: no answer ({data['problem'][:120]})"
    night = data.get("nightly") or {}
    words = {"first_bad": "first bad", "first_good": "first good"}
    for key, word in words.items():
        if data.get(key):
            text = f"bisect: {word} {package} {data[key]}"
            if isinstance(night, dict):
                found_night = night.get("first_bad") or night.get("first_good")
                if found_night:
                    text += f", night {found_night}"
                elif night.get("problem"):  # said, not hidden: why the nights do not narrow it
                    text += f"; its nights: {night['problem'].split(' -- ')[-1][:160]}"
            return text
    return f"bisect of {package}: {data.get('direction') or 'no change found'}"
