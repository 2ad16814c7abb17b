"""`portability bisect`: a change along a line of readers, narrowed to the release that made it.

The grid's resolution is its stacks -- the newest patch of each minor -- so a change between two
neighbouring readers (`changes.find`: a file one reader loads the same and the next refuses, or
the reverse) lies somewhere among the releases between them. `harness bisect` finds it, as the
atlas's `explain` does for its rows: it runs the newer reader's cell for one of the change's files
with each release of the stack's package in between (TensorFlow on the Keras 2 lines, Keras on
the Keras 3 lines: `atlas.rows.released_package`), each resolved as of its own upload, the writer's
files handed to it from the grid's results as to any pair. A release is judged by the grid's own
rule (`judge.judge`, against the pair's floor): the verdict the change went from, or the one it
went to; another verdict, or a reader that did not run, is skipped. What the bisect found -- the
first release that judges the file as the newer reader does, the last that judges it as the older
-- is kept as ``OUT/evidence/changes/<change>.json`` (`evidence.CHANGES`) with the command, and `publish` adds it to the
change's line.

A change along a line of writers (the files of a newer writer judged otherwise by the same reader)
is narrowed the same way from the other end: the newer writer's cell runs with each release in
between, and each release's files are then read by the change's reader -- its grid cell, handed
that release's files (`reader_of`) -- and judged by the same rule. Those writers and readers run
in a results folder of their own (`writers_folder`): a writer in the grid's results would be a
stack of the grid."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness import chains, status
from harness.atlas.rows import released_package
from harness.claims import Change
from harness.environments import removal
from harness.errors import UserError
from harness.files.paths import cache_dir
from harness.investigate.bisect_judge import evidence
from harness.investigate.bisect_search import BAD, BROKE, GOOD, MENDED, SKIP, Verdict
from harness.matrix.release_cells import derived_cell
from harness.portability import grid, judge
from harness.portability.changes import READER, WRITER, as_dict
from harness.portability.evidence import slug
from harness.portability.publish import LOADS
from harness.workloads.protocol import OUTPUT_DIR, SPEC_FILE


def own_disk(name: str):
    """A bisect within a disk bound: the releases it installs come through a uv cache of its own,
    and the virtualenvs built from it go with it once it is done (environments.removal.own_cache).
    A bisect of TensorFlow builds one environment per release it tests, about 1.5 GB each; what
    they measured stays in the results."""
    return removal.own_cache(cache_dir() / "portability-uv" / name)


def plan(change: Change, stacks: dict[str, dict], records: list[dict], cells: list) -> dict | None:
    """What narrows a change: the cell the bisect runs with each release -- the newer reader's for
    the change's first file, or the newer writer's, whose files the change's reader then reads
    (`reader`: that pair's grid cell) -- the package whose releases lie between the two ends, the
    ends and the pair's floor; None for what this does not narrow (a verdict decided without
    launching, no package that moved)."""
    if judge.UNKNOWN in (change.where["was"], change.where["now"]):
        return None
    before, after = stacks[change.before], stacks[change.after]
    package = released_package(change.where["line"], before, after)
    if package is None:
        return None
    # the other of TensorFlow and Keras, where it moved too: searched when the first one's ends agree
    # (standalone Keras 2.2.2 -> 2.2.4 moved with TF 1.10.0 -> 1.10.1, and the change is Keras's)
    also = [q for q in ("tensorflow", "keras") if q != package and before.get(q) and after.get(q)
            and before[q] != after[q] and not str(after[q]).endswith("-tf")]
    other, model, fmt = change.evidence[0]
    writer, reader = (other, change.after) if change.kind == READER else (change.after, other)
    read = next((c for c in cells if c.environment.name == reader
                 and c.workload.name == grid.reader_workload(writer)), None)
    cell = read if change.kind == READER else next(
        (c for c in cells if c.environment.name == writer and c.workload.name == grid.WRITER), None)
    record = next((r for r in records if (r["writer"], r["reader"], r["model"], r["format"])
                   == (writer, reader, model, fmt)), None)
    if cell is None or read is None or record is None:
        return None
    return {"change": change, "cell": cell, "reader": read, "package": package, "old": before[package],
            "new": after[package], "writer": writer, "model": model, "format": fmt, "floor": record["floor"],
            "also": [(q, before[q], after[q]) for q in also],
            "pythons": tuple(".".join(str(s.get("python") or "").split(".")[:2]) for s in (before, after))}


def writers_folder(results: Path) -> Path:
    """Where a writers' change is bisected: beside the grid's results, never in them."""
    return results.with_name(results.name + "-writers")


def reader_of(template, writer: str, spec: dict):
    """The change's reader cell (`template`, the grid's) handed the files of the writer cell
    `writer` (a release's; `spec`, its spec.json): the cell a grid of that release would have,
    named and linked as the grid's are."""
    name = writer.split("/")[0]
    workload = dataclasses.replace(template.workload, name=grid.reader_workload(name), params={
        **template.workload.params, "needs": [{"workload": grid.WRITER, "environment": name, "as": name}]})
    need = {"cell": writer, "as": name, "spec_sha256": chains.spec_sha256_of(spec)}
    return dataclasses.replace(template, workload=workload, needs=(need,))


def the_ends_agree(found) -> bool:
    """A search that found no change between its ends: the change is another package's."""
    return bool(found.problem) and found.problem.startswith("the ends do not differ")


def good_and_bad(change: Change) -> tuple[str, str]:
    """The change's two verdicts as the bisect names them: good is the better end's (`same`, where
    one end is), bad the other's."""
    was, now = change.where["was"], change.where["now"]
    good = judge.SAME if judge.SAME in (was, now) else was
    return good, now if good == was else was


def verdicts(run_dir: Path, p: dict, read=None):
    """A release's verdict for the bisect: the grid's judgement of the change's file on that
    release, good when it is the better end's (`same`, where one end is), bad when the other's.
    A readers' change judges the release's reader cell; a writers' change (`read`: runs the
    change's reader on a writer cell's files, `reader_of`, and returns its result) the reader of
    the release's files -- a writer that wrote nothing is skipped, as a reader that did not run."""
    change = p["change"]
    good, bad = good_and_bad(change)

    def verdict(version: str, results: list) -> Verdict:
        ev = evidence(results)
        ran = [r for r in results if r.status == status.OK]
        writer = p["writer"]
        if ran and change.kind == WRITER:
            writer = ran[0].cell.split("/")[0]
            ran = [r for r in [read(ran[0].cell)] if r is not None and r.status == status.OK]
            if not ran:
                return Verdict(SKIP, f"the reader of {writer}'s files did not run", evidence=ev)
        if not ran:
            r = results[0] if results else None
            why = f"{r.status}: {r.reason or r.failure_text}" if r else "no result"
            return Verdict(SKIP, why[:300], evidence=ev)
        try:
            loads = json.loads((run_dir / ran[0].cell / OUTPUT_DIR / LOADS).read_text())
            entry = loads["writers"][writer]["models"][p["model"]][p["format"]]
        except (OSError, ValueError, KeyError) as exc:
            return Verdict(SKIP, f"the reader left no observation of the file ({type(exc).__name__})", evidence=ev)
        judged = judge.judge(entry, p["floor"])
        said = judged["verdict"] + (f" by {judged['way']}" if judged.get("way") else "")
        if judged["verdict"] == judge.REFUSES:
            said += ": " + "; ".join(f"{w}: {(e or '')[:80]}" for w, e in judged["errors"].items())[:200]
        kind = GOOD if judged["verdict"] == good else BAD if judged["verdict"] == bad else SKIP
        return Verdict(kind, said, evidence={**ev, "portability": judged})
    return verdict


def kept(found, p: dict, command: str) -> dict:
    """The change's evidence: what the bisect found, each release's verdict, the command."""
    return {"change": as_dict(p["change"]), "package": p["package"], "versions": found.versions,
            "file": _file(p), "cell": p["cell"].id, **found.answer(), "candidates": found.candidates,
            **({"pinned": p["pinned"]} if p.get("pinned") else {}),
            "problem": found.problem, "warnings": found.warnings,
            "tested": {v: {"verdict": t.kind, "why": t.why} for v, t in found.tested.items()}, "command": command}


def _file(p: dict) -> dict:
    """The file a change is bisected on: its writer, reader, model and format."""
    return {"writer": p["writer"], "reader": p["reader"].environment.name, "model": p["model"], "format": p["format"]}


def narrow(p: dict, m, engine, results: Path, console, *, jobs: int, bundles: Path, command: str) -> dict:
    """Bisect the change `p` plans -- a readers' change in the grid's results (where the writer's
    files are handed from), a writers' change in `writers_folder` -- its package first, then the
    other of TensorFlow and Keras where it moved too and the first one's ends agree. Returns its
    evidence, with its sentence."""
    # the bisect, its ends, the index and the runner: imported when a change is narrowed
    from harness.index import releases
    from harness.investigate.bisect import run as bisect_run
    from harness.investigate.bisect_ends import bounds
    from harness.run.runner import Runner

    resolver = releases.Resolver()
    change = p["change"]
    if change.kind == WRITER:
        results = writers_folder(results)

        def read(writer: str):
            spec = json.loads((results / m.name / writer / SPEC_FILE).read_text())
            cell = reader_of(p["reader"], writer, spec)
            return next(iter(Runner(m, engine, results, console, jobs=1).complete([cell])), None)
    else:
        read = None
    crossed = len(set(p["pythons"])) > 1
    searches, ev = [(p["package"], p["old"], p["new"], {})], {}
    while searches:
        package, old, new, pinned = searches.pop(0)
        q = {**p, "package": package, "old": old, "new": new, "pinned": pinned}
        try:
            versions = bounds(package, p["cell"].environment.python, good=old, bad=new, spec=None, pre=False,
                              resolver=resolver)
        except UserError as exc:   # no releases between the two, or none listed for this Python: said
            ev = {"change": as_dict(change), "package": package, "problem": str(exc), "command": command}
            searches = then(None, q, p, crossed)
            continue
        if crossed:   # the old end is on its own stack's Python, where the releases after it may not install
            versions = versions[1:]
            if len(versions) < 2:   # nothing between: the grid's two stacks are the evidence
                ev = across(None, q, versions, command)
                break
        base = p["cell"]
        for other, version in pinned.items():
            base = derived_cell(base, other, version, None, base.repeat)
        with own_disk(slug(change.id)):
            found, _ = bisect_run(m=m, base_cells=[base], package=package, versions=versions, engine=engine,
                                  results_root=results, console=console, jobs=jobs, bundles=bundles,
                                  resolver=resolver, verdicts=verdicts(results / m.name, q, read))
        ev = across(found, q, versions, command) if crossed and the_ends_agree(found) else kept(found, q, command)
        if ev.get("across_python"):
            break
        searches = then(found, q, p, crossed)
    return {**ev, "sentence": sentence(ev)}


def then(found, q: dict, p: dict, crossed: bool) -> list[tuple[str, str, str, dict]]:
    """What is searched after the search `q` found `found` (None: it could not start), where
    TensorFlow and Keras both moved: (package, old end, new end, the other held at). The first
    search holds the other package at the newer stack's release. When its ends agree, the change
    is the other package's, searched with the first at its old end -- both of that search's ends
    are then measured already: the older stack, and the first search's old end. When its old end
    cannot be installed beside the other's newer release (TF 2.21 requires Keras 3.12, so Keras
    3.11 cannot be tried beside it), it is searched again with the other at its old end. Across
    two Pythons nothing is held at an old end: that end's releases may not install on the newer
    stack's Python."""
    if q["pinned"] or not p["also"]:
        return []
    other, o_old, o_new = p["also"][0]
    if found is None:   # no releases of the first to search: the other's, beside the newer stack
        return [(other, o_old, o_new, {})]
    if the_ends_agree(found):
        return [(other, o_old, o_new, {} if crossed else {q["package"]: q["old"]})]
    old_end = found.tested.get(found.versions[0])
    if old_end is not None and old_end.kind == SKIP and not crossed:
        return [(q["package"], q["old"], q["new"], {other: o_old})]
    return []


def across(found, p: dict, versions: list[str], command: str) -> dict:
    """A change whose two stacks are on two Pythons (the grid gives each release range its own):
    the releases after the old end are searched on the newer stack's Python, without the old end,
    which the grid measured on its own. When every one of them judges the file as the newer stack
    does (or there is only the newer one), the change is at the first of them."""
    change = p["change"]
    now = GOOD if change.where["now"] == good_and_bad(change)[0] else BAD
    ev = kept(found, p, command) if found is not None else {
        "change": as_dict(change), "package": p["package"], "versions": versions, "cell": p["cell"].id,
        "file": _file(p), "tested": {}, "command": command, "warnings": [], "candidates": []}
    if found is not None and any(t.kind != now for t in found.tested.values()):
        return ev   # the ends agree, but not as the newer stack: said as the search said it
    first, last = ("first_good", "last_bad") if now == GOOD else ("first_bad", "last_good")
    return {**ev, "problem": None, "direction": MENDED if now == GOOD else BROKE, first: versions[0],
            last: p["old"], "across_python": (f"the old end, {p['package']} {p['old']}, is the grid's own stack on "
                                              f"Python {p['pythons'][0]}; the releases after it ran on "
                                              f"Python {p['pythons'][1]}, the newer stack's")}


def sentence(ev: dict) -> str:
    """The evidence in a few words, for the change's line on the page."""
    if ev.get("problem"):
        return f"not narrowed: {ev['problem'][:200]}"
    package, f = ev["package"], ev.get("file") or {}
    first = ev.get("first_bad") or ev.get("first_good")
    last = ev.get("last_good") or ev.get("last_bad")
    if not f:
        on = ""
    elif ev["change"]["moved"] == WRITER:
        on = f" (bisected on each release's {f.get('model')} {f.get('format')}, read by `{f.get('reader')}`)"
    else:
        on = f" (bisected on `{f.get('writer')}`'s {f.get('model')} {f.get('format')})"
    if ev.get("across_python"):
        on += "; the old end as its own stack measured it, on another Python"
    if ev.get("pinned"):
        on += "; with " + ", ".join(f"{k} {v}" for k, v in ev["pinned"].items()) + " held, the older stack's"
    if first:
        return f"first at {package} {first}, as before at {last}{on}"
    return f"first at one of {package} {', '.join(ev.get('candidates') or [])}, as before at {last}{on}"


def check_wanted(only: list[str] | None, plans: list[dict], found: list[Change]) -> None:
    if only and not plans:
        raise UserError(f"--change {' '.join(only)}: no change that can be narrowed has that id (the changes "
                        f"are in changes.json; {len(found)} in this grid)")
