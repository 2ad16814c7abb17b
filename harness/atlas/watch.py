"""`harness atlas watch`: one pass that keeps the atlas current -- what `harness watch` does for
one matrix, for the whole atlas. A daily timer (cron, a CI schedule) runs it:

1. the index is asked for new releases: a new minor is a new row, as `releases: {every: minor}`
   expands (an open range takes it in, or the matrix's comments say where a new line goes);
2. every cell without a result runs (`atlas run`: only the new rows' environments are built,
   then removed);
3. the atlas is published; the changes the last publication did not have are the new ones;
4. each new change is explained (`atlas explain`: a break, mend or speed shift bisected, a
   two-device finding followed with `diverge`) and the atlas published again, so the pages
   and the feed link the evidence the day the release appears.

Exit statuses are `harness watch`'s: 0 nothing new changed (new rows may have run); 1 new
changes (each named); 2 bad input; 3 another atlas watch holds this results folder's lock
(``--wait`` waits instead); 130 interrupted (finished cells kept; the next pass resumes).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.atlas import drive, explain, publish, records
from harness.terminal import shown
from harness.watch import history

LOCK_FOLDER = ".atlas-watch"   # under the results folder: one watch of an atlas at a time


def command(args, console: Console) -> int:
    results, out = Path(args.results), Path(args.out)
    try:
        with history.locked(results / LOCK_FOLDER, wait=args.wait):
            return once(args, console, results, out)
    except history.Busy as busy:
        console.print(f"another atlas watch of {shown(str(results))} is running (pid {shown(str(busy))}); "
                      f"nothing done. Exit {exits.BUSY}; --wait waits for it.", highlight=False)
        return exits.BUSY


def once(args, console: Console, results: Path, out: Path) -> int:
    had_rows, had_changes = _rows(out / publish.DATA), _change_ids(out / publish.CHANGES)
    drive.run(Path(args.matrices), results, console, refresh=not args.offline, jobs=args.jobs,
              executor=args.executor, data=out / publish.DATA)
    publish.from_results(results, out, console)
    new = [c for c in _changes(out / publish.CHANGES) if c["id"] not in had_changes]
    if new and not args.no_explain:
        explained = explain.explain(out / publish.DATA, out / publish.EVIDENCE, Path(args.explain_results),
                                    console, only=[c["id"] for c in new], nightly=not args.no_nightly,
                                    out=Path(args.explain_out))
        if explained:  # publish again: the new changes link their evidence
            recs, about = records.read(out / publish.DATA)
            publish.publish(recs, about, out)
            new = [c for c in _changes(out / publish.CHANGES) if c["id"] not in had_changes]
    for row in sorted(_rows(out / publish.DATA) - had_rows):
        console.print(f"new row: {shown(row)}", highlight=False)
    for c in new:
        linked = next((e["what"] for e in c["evidence"] if e.get("link")), "not explained yet")
        console.print(f"new change: {shown(c['kind'])} {shown(c['column'])} at {shown(c['after'])}: "
                      f"{shown(c['detail'])} -- {shown(linked)}", highlight=False)
    console.print(f"atlas watch: {len(new)} new change(s). Exit {exits.CHANGED if new else exits.OK}.",
                  highlight=False)
    return exits.CHANGED if new else exits.OK


def _changes(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def _change_ids(path: Path) -> set[str]:
    return {c["id"] for c in _changes(path)}


def _rows(path: Path) -> set[str]:
    """The rows (matrix/environment) a publication holds; none before the first."""
    if not path.exists():
        return set()
    recs, _ = records.read(path)
    return {f"{r['matrix']}/{r['environment']}" for r in recs}
