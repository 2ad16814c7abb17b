"""`harness atlas publish`: from a results folder (or committed data) to the files the site serves.

Under ``--out`` (default docs/atlas/): ``atlas.json`` and ``atlas.csv`` (one record per cell,
`records.SCHEMA`), ``changes.json``, ``feed.xml`` (Atom: a new row, a new change), a page per
row (``rows/``) and the plots (``plots/``); beside it, the page a reader scans
(``docs/atlas.md``: the folder's name plus ``.md``). Publishing from ``--data`` re-renders
everything from the committed JSON, so the site builds without a results folder; publishing from
results first merges the committed records of cells the results do not hold (a slice run on
another day stays published).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.atlas import changes, drive, explain, feed, notes, pages, plots, records, rows
from harness.errors import UserError
from harness.results.store import holds_results
from harness.terminal import shown

DATA, CSV, CHANGES, FEED, EVIDENCE = "atlas.json", "atlas.csv", "changes.json", "feed.xml", "evidence"


def command(args, console: Console) -> int:
    out = Path(args.out)
    data = Path(args.data) if args.data else None
    if data is None and not holds_results(Path(args.results)) and (out / DATA).exists():
        # a fresh clone has the committed data and no results (none, or a run that owed nothing):
        # publishing that data is what it can do, and what it publishes is byte for byte what is committed
        data = out / DATA
        console.print(f"{shown(args.results)}: no atlas results; republishing the committed data, "
                      f"{shown(str(data))}", highlight=False)
    if data:
        recs, about = records.read(data)
        written, about = republish(data, out, told(console))
        _said(console, len(recs), about, written, out)
    else:
        from_results(Path(args.results), out, console)
    return exits.OK


def republish(data: Path, out: Path, say=lambda line: None) -> tuple[list[Path], dict]:
    """Everything under `out` (and its page beside it) rendered again from the committed data alone:
    what a clone with no results publishes, and what the audit of publications holds the committed
    files to (``harness.publications``)."""
    recs, about = records.read(data)
    return publish(recs, {**about, **describe(recs, [], previous=about)}, out, say)


def from_results(results: Path, out: Path, console: Console) -> dict:
    """Publish a results folder, merged with the committed records of cells it does not hold."""
    if not results.is_dir():
        raise UserError(f"{results}: no results folder (run `harness atlas run` first, or publish --data FILE)")
    recs = records.collect(results, notes=lambda line: console.print(shown(line), highlight=False))
    if not recs:
        raise UserError(f"{results}: holds no atlas results")
    old, previous = records.read(out / DATA) if (out / DATA).exists() else ([], {})
    recs, kept, moved = merged(recs, old)
    for fresh, was in kept:
        console.print(f"kept the committed {was['status']} of {shown(was['matrix'])}/{shown(was['cell'])}: this "
                      f"host left it unavailable ({shown(fresh.get('family') or '')[:160]})", highlight=False)
    if moved:
        console.print(f"{len(moved)} committed cells have another status now (the changes and the pages show them):",
                      highlight=False)
        for fresh, was in moved[:20]:
            console.print(f"  {shown(was['matrix'])}/{shown(was['cell'])}: {was['status']} -> {fresh['status']}",
                          highlight=False)
    written, about = publish(recs, describe(recs, drive.course(results), previous=previous), out, told(console))
    _said(console, len(recs), about, written, out)
    return about


def _said(console: Console, cells: int, about: dict, written: list[Path], out: Path) -> None:
    console.print(f"atlas: {cells} records in {about['rows']} rows, {about['changes']} changes; "
                  f"{len(written)} files under {out} and {pages.main_page(out)}", highlight=False)


def merged(fresh: list[dict], old: list[dict]) -> tuple[list[dict], list[tuple[dict, dict]], list[tuple[dict, dict]]]:
    """The fresh records, and the committed ones of cells the fresh ones do not hold; with the
    (fresh, committed) pairs where the committed record was kept -- a fresh `unavailable` says the
    host lacked something (an interpreter, a GPU), never what the stack does, so it does not
    replace a measured record -- and those whose status moved (said, never silent)."""
    committed = {(r["matrix"], r["cell"]): r for r in old}
    out, kept, moved = [], [], []
    for r in fresh:
        was = committed.pop((r["matrix"], r["cell"]), None)
        if was is not None and r["status"] == "unavailable" and was["status"] != "unavailable":
            out.append(was)
            kept.append((r, was))
            continue
        if was is not None and was["status"] != r["status"]:
            moved.append((r, was))
        out.append(r)
    out += committed.values()
    return sorted(out, key=lambda r: (r["matrix"], r["cell"])), kept, moved



def describe(recs: list[dict], course: list[dict], previous: dict | None = None) -> dict:
    """How the data was obtained, and what the run cost: engines, hosts, days, harness commits;
    environments and cells per hour, the whole run's time and its peak disk (from the run log;
    kept from the previous publication when this results folder has none)."""
    previous = previous or {}
    now = _cost(course)
    return {
        "cells": len(recs),  # records: a cell's repeats are records of it
        "distinct_cells": len({records.cell_of(r) for r in recs}),
        "statuses": dict(Counter(r["status"] for r in recs).most_common()),
        "engines": sorted({r["engine"] for r in recs if r["engine"]}),
        "hosts": sorted({r["host"] for r in recs if r["host"]}),
        "days": sorted({r["day"] for r in recs if r["day"]}),
        "harness_commits": sorted({r["harness_commit"] for r in recs if r["harness_commit"]}),
        "cost": now or previous.get("cost") or {},
        "runs": _runs(now, course, previous),
    }


def _runs(now: dict, course: list[dict], previous: dict) -> list[dict]:
    """Every run's cost, the newest last: the atlas grows by runs of a slice (a matrix added, rows
    measured again), so what one run cost is not what the atlas cost. A run is known by its first
    cell's start: publishing the same results folder again replaces its entry, never adds one. A
    publication from before this list had its last run's cost only: that entry has no start."""
    runs = list(previous.get("runs") or ([previous["cost"]] if previous.get("cost") else []))
    if now:
        started = min((e.get("started") or "" for e in course), default="")
        runs = [r for r in runs if not started or r.get("started") != started] + [{"started": started, **now}]
    return runs


def _cost(course: list[dict]) -> dict:
    """The run's figures from its log, every line of it: an environment run again to add cells
    (more repeats, a matrix grown) or to rerun some counts each run's time and cells -- what the
    atlas cost -- and once among the environments; its time is the sum of its runs."""
    if not course:
        return {}
    per: dict[tuple[str, str], float] = {}
    for e in course:
        key = (e["matrix"], e["environment"])
        per[key] = per.get(key, 0.0) + e["seconds"]
    seconds = sum(per.values())
    cells = sum(e["cells"] - e.get("left", 0) for e in course)
    builds = [e["build_seconds"] for e in course if isinstance(e.get("build_seconds"), (int, float))]
    hours = seconds / 3600 or 1e-9
    return {"environments": len(per), "cells": cells, "hours": round(seconds / 3600, 2),
            "environments_per_hour": round(len(per) / hours, 1), "cells_per_hour": round(cells / hours),
            "build_seconds_median": sorted(builds)[len(builds) // 2] if builds else None,
            "peak_disk_gb": round(max(e["disk_bytes"] for e in course) / 1e9, 2),
            "seconds_per_environment_median": sorted(per.values())[len(per) // 2]}


def publish(recs: list[dict], about: dict, out: Path, told=lambda line: None) -> tuple[list[Path], dict]:
    """Write every file; returns them and `about` with the rows and changes counted. The rows
    and changes are derived here from the records, never stored apart from them. `told` hears
    what was removed (an evidence file of a change the data no longer has)."""
    table = rows.build(recs)
    found = changes.find(table)
    explain.attach(found, out / EVIDENCE, f"{out.name}/{EVIDENCE}")
    unlinked(found, out / EVIDENCE, told)
    notes.reports(found)
    by_key = {r.key: r for r in table}
    for change in found:
        argv = explain.plan(change, by_key, nightly=True) if change.kind in explain.EXPLAINED else None
        if argv and not any(e.get("link") for e in change.evidence):
            change.evidence.append({"what": explain.WHAT[argv[0]], "command": explain.command_line(argv)})
    about = {**about, "rows": len(table), "changes": len(found)}
    out.mkdir(parents=True, exist_ok=True)
    written = [_write(out / DATA, records.to_json(recs, about)), _write(out / CSV, records.to_csv(recs)),
               _write(out / CHANGES, json.dumps([changes.to_dict(c) for c in found], indent=1) + "\n")]
    drawn = plots.draw(table, out / "plots")
    written += drawn
    written += pages.write(table, found, about, out, [p.name for p in drawn], notes.check(table))
    written.append(_write(out / FEED, feed.atom(table, found)))
    return written, about


def told(console: Console):
    """A console's line printer, for what `publish` says it did besides writing."""
    return lambda line: console.print(shown(line), highlight=False)


def unlinked(found: list[changes.Change], evidence: Path, told) -> list[Path]:
    """Remove the evidence files of changes the data no longer makes (a row measured again, a
    change's id moved with its rows): no page links them, and what they say of a change nobody can
    reach from the atlas is stale. A bisect's record is cheap to make again (`atlas explain`)."""
    ids = {c.id for c in found}
    gone = [p for p in sorted(evidence.glob("*.json")) if p.stem not in ids] if evidence.is_dir() else []
    for path in gone:
        path.unlink()
        told(f"removed {path}: no change of this atlas has that id (its evidence is no longer linked)")
    return gone


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
