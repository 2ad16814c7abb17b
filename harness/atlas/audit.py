"""`harness atlas audit`: the published atlas held against itself and against what the projects say.

A page is only as true as its least checked sentence. The audit reads what `publish` wrote -- the
records (``atlas.json``), the changes (``changes.json``) with their evidence, and the page -- and
names every contradiction it finds, one line each, with the file and the place:

- **counts**: every number in the page's header is the data's, in the unit it names;
- **devices**: a record published `ok` trained on as many devices as it asked for;
- **duplicates**: one stack (the same pins) is one row, not one per matrix that measured it;
- **verdicts**: a change agrees with its own evidence (a bisect that found the other direction);
- **like for like**: a change between neighbours names every package that moved besides the release
  it is published as, and a change across a release that changed the model's defaults says so;
- **claims**: a sentence about the whole atlas holds for every row it speaks of;
- **side by side**: a speed change's standing agrees with its bisect's own two ends run in one
  session (refuted only where their medians did not move as claimed past the bisect's threshold);
- **evidence**: every evidence file published beside the data is linked from a page;
- **cut-offs**: neighbouring rows resolved as of days out of release order are named on the page;
- **few runs**: a median (and its range) is said of three runs or more: the table states each value
  of an entry that rests on fewer, and every value it states is one of the entry's runs;
- **owed**: every cell the atlas matrices name (their ranges expanded as `atlas run` expands them)
  has a record, or the page names it: a cell the matrices owe and the page leaves out makes the
  atlas look complete where it is not (and a fresh clone's `atlas run` would run it);
- **facts**: the records agree with `facts.yaml` -- release-note truths kept with their sources
  (a version a stack reports, a wrapper removed or available, a release's branch) -- and a wrapper a
  release removed is a change of that release where rows on both sides hold it.

Exit 0 when nothing contradicts, 1 when something does (each named), 2 for data it cannot read.
The audit never mends: a finding is mended where it was made (a fact with a new source, or the
atlas run and published again)."""

from __future__ import annotations

import html
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from rich.console import Console

from harness import status
from harness.atlas import records, rows
from harness.atlas.changes import OTHER_WAY_SAID, from_dict, host_limited, past_threshold, side_by_side, standing
from harness.atlas.facts import FACTS, defaults_crossed, load_facts
from harness.atlas.pages import MEDIAN_FROM  # the page's own rule, that the audit holds it to
from harness.claims.findings import Finding, tell
from harness.errors import UserError

STATUS_DIRECTION = {"broke": "broke", "mended": "mended", "slower": "broke", "faster": "mended"}
_HEADER = re.compile(r"\*\*(\d+) stacks, (\d+) cells\*\* \(([^)]*)\); "
                     r"\*\*(\d+) changes\*\* between neighbouring releases")
# The header publish writes: cells and records apart, changes between rows apart from findings within one
_UNITS = re.compile(r"\*\*(\d+) stacks?, (\d+) cells?, (\d+) records?\*\* \(([^:)]*)[:)][^;]*; "
                    r"\*\*(\d+) changes?\*\* between neighbouring releases, \*\*(\d+) findings?\*\* within one row")
_NUMPY1_CLAIM = "Every stack whose own week resolved NumPy 2"   # the sentence before it was counted
_NUMPY1_COUNT = re.compile(r"(\d+) of the (\d+) stacks whose own week resolved NumPy 2")


class _Atlas:
    """What `publish` wrote, read once: records by stack, the changes, their evidence, the page."""

    def __init__(self, data: Path, page: Path | None):
        self.data = Path(data)
        self.records, self.about = records.read(self.data)
        changes = self.data.with_name("changes.json")
        try:
            self.changes = json.loads(changes.read_text()) if changes.is_file() else []
        except ValueError:
            raise UserError(f"{changes}: not readable JSON") from None
        self.page = page.read_text() if page is not None and page.is_file() else ""
        self.page_name = str(page) if page is not None else ""
        self.stacks: dict[str, list[dict]] = defaultdict(list)  # "matrix/environment" -> its records
        for r in self.records:
            self.stacks[f"{r['matrix']}/{r['environment']}"].append(r)
        # a stack is its pins: two matrices that measured one are one stack (a row without versions, alone)
        self._pins = {s: self._read_pins(s) for s in self.stacks}
        # one stack however many matrices measured it (a row without versions, alone): its names, all its records
        merged: dict[tuple, list[str]] = defaultdict(list)
        for s, p in self._pins.items():
            merged[tuple(p.items()) if p.get("tensorflow") or p.get("keras") else (s,)].append(s)
        self.merged = {tuple(sorted(names)): [r for n in names for r in self.stacks[n]] for names in merged.values()}
        self.stack_count = len(self.merged)

    def evidence(self, change: dict) -> dict:
        path = self.data.parent / "evidence" / f"{change.get('id')}.json"
        try:
            return json.loads(path.read_text()) if path.is_file() else {}
        except ValueError:
            return {}

    def pins(self, stack: str) -> dict:
        """The stack's pins as its records saw them (read once)."""
        return self._pins.get(stack, {})

    def _read_pins(self, stack: str) -> dict:
        recs = self.stacks.get(stack) or []  # a cell decided before launch records none: the others say
        return {k: next((r[k] for r in recs if r.get(k) not in ("", None)), "") for k in rows.PINS} if recs else {}

    def pinned(self, stack: str, column: str) -> dict:
        """The layer arguments the cells of `column` pinned on that stack -- in whichever matrix measured
        the column (two matrices that measured one stack are one row)."""
        recs = next((recs for names, recs in self.merged.items() if stack in names), [])
        return next((records.layer_args(r) for r in recs if rows.column(r) == column), {})


def _counts(a: _Atlas) -> list[Finding]:
    out = []
    where = str(a.data)
    statuses = Counter(r["status"] for r in a.records)
    if a.about.get("cells") not in (None, len(a.records)):
        out.append(Finding("counts", f"{where}: about.cells", f"says {a.about['cells']}; it holds {len(a.records)} "
                                                               "records"))
    if a.about.get("statuses") not in (None, dict(statuses)):
        out.append(Finding("counts", f"{where}: about.statuses", f"says {a.about['statuses']}; the records give "
                                                                  f"{dict(statuses)}"))
    if a.about.get("rows") not in (None, a.stack_count):
        out.append(Finding("counts", f"{where}: about.rows", f"says {a.about['rows']}; the records hold "
                                                              f"{a.stack_count} stacks"))
    cell_ids = {records.cell_of(r) for r in a.records}
    place = f"{a.page_name}: its header"
    units = _UNITS.search(a.page)
    if units:
        return out + _header_in_units(a, place, units, cell_ids, statuses)
    header = _HEADER.search(a.page)
    if not header:
        return out
    stacks, cells, said, changes = int(header[1]), int(header[2]), header[3], int(header[4])
    if stacks != a.stack_count:
        out.append(Finding("counts", place, f"says {stacks} stacks; the data holds {a.stack_count}"))
    if cells != len(a.records):
        out.append(Finding("counts", place, f"says {cells} cells; the data holds {len(a.records)} records"))
    elif len(cell_ids) != len(a.records):
        out.append(Finding("counts", place, f"counts {cells} 'cells' that are records, repeats included: "
                                            f"{len(cell_ids)} cells ran (a repeat is not another cell)"))
    for n, word in re.findall(r"(\d+) (\w+)", said):
        if int(n) != statuses.get(word, 0):
            out.append(Finding("counts", place, f"says {n} {word}; the records hold {statuses.get(word, 0)}"))
    within = [c for c in a.changes if not c.get("before")]
    if changes != len(a.changes):
        out.append(Finding("counts", place, f"says {changes} changes; changes.json holds {len(a.changes)}"))
    elif within:
        out.append(Finding("counts", place, f"says {changes} changes between neighbouring releases; {len(within)} "
                                            f"of them are findings within one row ({within[0].get('kind')}: no "
                                            "neighbour)"))
    return out


def _header_in_units(a: _Atlas, place: str, m, cell_ids: set, statuses: Counter) -> list[Finding]:
    """The header as publish writes it: each count against the data, in the unit it names."""
    stacks, cells, recs, said, between, within = int(m[1]), int(m[2]), int(m[3]), m[4], int(m[5]), int(m[6])
    truth = {"stacks": (stacks, a.stack_count), "cells": (cells, len(cell_ids)), "records": (recs, len(a.records)),
             "changes between neighbouring releases": (between, sum(1 for c in a.changes if c.get("before"))),
             "findings within one row": (within, sum(1 for c in a.changes if not c.get("before")))}
    out = [Finding("counts", place, f"says {n} {unit}; the data holds {held}")
           for unit, (n, held) in truth.items() if n != held]
    for n, word in re.findall(r"(\d+) (\w+)", said):
        if int(n) != statuses.get(word, 0):
            out.append(Finding("counts", place, f"says {n} {word} records; the records hold {statuses.get(word, 0)}"))
    return out


def _devices(a: _Atlas) -> list[Finding]:
    out = []
    for r in a.records:
        trained = r.get("devices_trained")
        if r["status"] == status.OK and trained not in ("", None) and trained != r["devices"]:
            out.append(Finding("devices", f"{a.data}: {r['matrix']}/{r['cell']}",
                               f"published ok on {r['devices']} devices; it trained on {trained}"))
    return out


def _duplicates(a: _Atlas) -> list[Finding]:
    """Two row pages for one stack. A stack that two matrices measured has its page under one
    matrix only (`rows.build`); without a rows folder beside the data, every stack would be a row."""
    pages = {p.stem for p in (a.data.parent / "rows").glob("*.md")}
    by_pins: dict[tuple, list[str]] = defaultdict(list)
    for stack in a.stacks:
        if not pages or rows.slug(*stack.split("/", 1)) in pages:
            by_pins[tuple(a.pins(stack).items())].append(stack)
    return [Finding("duplicates", f"{a.data}: {', '.join(sorted(same))}",
                    f"one stack ({', '.join(f'{k} {v}' for k, v in pins if v)}) is {len(same)} rows")
            for pins, same in by_pins.items() if len(same) > 1]


def _verdicts(a: _Atlas) -> list[Finding]:
    out = []
    for c in a.changes:
        found = a.evidence(c)
        want = STATUS_DIRECTION.get(c.get("kind"))
        got = found.get("direction")
        if not want or not got or found.get("problem"):
            continue
        said = OTHER_WAY_SAID in (c.get("detail") or "") and c.get("confirmed") is False
        if got != want and not said:  # a refuted speed change that names the direction found agrees with it
            first = found.get("first_good") if got == "mended" else found.get("first_bad")
            out.append(Finding("verdicts", f"changes.json: {c['id']} ({c.get('kind')} {c.get('column')}, "
                                           f"{c.get('before')} -> {c.get('after')})",
                               f"published as {c.get('kind')}; its own bisect found the other way ({got} at "
                               f"{found.get('package')} {first})"))
    return out


def _like_for_like(a: _Atlas, facts: list[dict]) -> list[Finding]:
    out = []
    for c in a.changes:
        before, after = a.pins(c.get("before") or ""), a.pins(c.get("after") or "")
        if not before or not after or c.get("kind") not in ("faster", "slower", "accuracy", "broke", "mended"):
            continue
        where = f"changes.json: {c['id']} ({c.get('kind')} {c.get('column')}, {c['before']} -> {c['after']})"
        detail = (c.get("detail") or "").lower()
        unsaid = [(k, x, y) for k, x, y in rows.moved_besides(c.get("line") or "", before, after) if k not in detail]
        if unsaid:
            out.append(Finding("like-for-like", where, "published as one release's change; "
                               + ", ".join(f"{k} moved too ({x or '-'} -> {y or '-'})" for k, x, y in unsaid)
                               + " and the change does not say so"))
        model = (c.get("column") or "").split("-")[0]
        pinned = (a.pinned(c["before"], c.get("column") or ""), a.pinned(c["after"], c.get("column") or ""))
        for fact in defaults_crossed(facts, {k: (before.get(k), after.get(k)) for k in before}, model, pinned):
            if not any(name in detail for name in fact.get("names", ())):
                out.append(Finding("like-for-like", where, f"across {fact['package']} {fact['release']}, which "
                                   f"changed the {model.upper()}'s defaults ({', '.join(fact.get('names', ()))}): "
                                   f"another model, not the release alone [{fact['id']}]"))
    return out


def _claims(a: _Atlas) -> list[Finding]:
    """The NumPy 1 boundary's sentence: the old one said every stack on NumPy 2 has a NumPy 1 twin;
    the one publish writes counts them ("N of the M stacks ..."): both held against the rows."""
    twins = {tuple((k, v) for k, v in a.pins(s).items() if k not in ("numpy", "jax", "python"))
             for s in a.stacks if s.startswith("atlas-numpy1/")}
    on_numpy2, untwinned, missing = set(), set(), []  # stacks by their pins (one, however many matrices)
    for stack in a.stacks:
        pins = a.pins(stack)
        numpy = rows.parse_version(pins.get("numpy"))
        if stack.startswith("atlas-numpy1/") or numpy is None or numpy.major < 2:
            continue
        on_numpy2.add(tuple(pins.items()))
        if tuple((k, v) for k, v in pins.items() if k not in ("numpy", "jax", "python")) not in twins:
            untwinned.add(tuple(pins.items()))
            missing.append(stack)
    counted = _NUMPY1_COUNT.search(a.page)
    if counted:
        said, held = (int(counted[1]), int(counted[2])), (len(on_numpy2) - len(untwinned), len(on_numpy2))
        return [] if said == held else [Finding("claims", f"{a.page_name}: '{counted[0]}'",
                                                f"the rows give {held[0]} of {held[1]}")]
    if _NUMPY1_CLAIM not in a.page or not missing:
        return []
    return [Finding("claims", f"{a.page_name}: '{_NUMPY1_CLAIM} ...'",
                    f"{len(missing)} stacks that resolved NumPy 2 have no NumPy 1 twin: {', '.join(missing[:6])}"
                    + (" ..." if len(missing) > 6 else ""))]


def _in(fact: dict, pins: dict) -> bool:
    """Whether a stack is one the fact speaks of: its package's release in the fact's range (or from
    its release on), and its Keras API the fact's."""
    version = rows.parse_version(pins.get(fact["package"]))
    if version is None or (fact.get("api") and pins.get("keras_api") != fact["api"]):
        return False
    if fact.get("releases"):
        return SpecifierSet(str(fact["releases"])).contains(version, prereleases=True)
    return version >= Version(str(fact["release"]))


def _facts(a: _Atlas, facts: list[dict]) -> list[Finding]:
    out = []
    for fact in facts:
        tag = f"[{fact['id']}: {fact['source']}]"
        if fact["kind"] == "reports":
            wrong = sorted({(r["matrix"], r["environment"], r.get(fact["field"])) for r in a.records
                            if _in(fact, r) and r.get(fact["field"]) not in ("", fact["value"])})
            out += [Finding("facts", f"{a.data}: {m}/{e}", f"says {fact['field']} {said!r}; {fact['says']} {tag}")
                    for m, e, said in wrong]
        elif fact["kind"] in ("removed", "available"):
            for names, recs in a.merged.items():
                stack = ", ".join(names)
                if not _in(fact, a.pins(names[0])):
                    continue
                got = Counter(r["status"] for r in recs if r["wrapper"] == fact["wrapper"]
                              and not host_limited(r.get("family") or ""))
                if fact["kind"] == "available" and not got and any(r["wrapper"] == fact["wrapper"] for r in recs):
                    continue  # unsupported here for the host's reason: the release is not what it speaks of
                if fact["kind"] == "removed" and set(got) - {status.UNSUPPORTED}:
                    out.append(Finding("facts", f"{a.data}: {stack}", f"{fact['wrapper']} is {dict(got)}; "
                                                                     f"{fact['says']} {tag}"))
                elif fact["kind"] == "removed" and not got:
                    out.append(Finding("facts", f"{a.data}: {stack}", f"says nothing of {fact['wrapper']}, which "
                                       f"should read unsupported: {fact['says']} {tag}"))
                elif fact["kind"] == "available" and (not got or got.get(status.UNSUPPORTED)):
                    said = "says nothing of" if not got else "calls unsupported"
                    out.append(Finding("facts", f"{a.data}: {stack}", f"{said} {fact['wrapper']}; {fact['says']} "
                                                                     f"{tag}"))
            if fact["kind"] == "removed":
                out += _removal_said(a, fact, tag)
        elif fact["kind"] == "tagged":
            for c in a.changes:
                for e in c.get("evidence") or []:
                    text = str(e.get("what", ""))
                    if f"{fact['package']} {fact['release']}" in text and "release branch" in text:
                        out.append(Finding("facts", f"changes.json: {c['id']} (its evidence)",
                                           f"places the change on {fact['release']}'s release branch; "
                                           f"{fact['says']} {tag}"))
    return out


def _removal_said(a: _Atlas, fact: dict, tag: str) -> list[Finding]:
    """A wrapper a release removed goes at that release on the page: where the atlas holds rows of the
    fact's API on both sides of it, some change of kind `wrapper` in that wrapper's column has its
    `before` row below the release and its `after` row at or past it."""
    at = Version(str(fact["release"]))

    def release_of(stack: str) -> Version | None:
        pins = a.pins(stack)
        if fact.get("api") and pins.get("keras_api") != fact["api"]:
            return None
        return rows.parse_version(pins.get(fact["package"]))

    sides = {v >= at for s, recs in a.stacks.items() if (v := release_of(s)) is not None
             and any(r["wrapper"] == fact["wrapper"] for r in recs)}
    if sides != {False, True}:
        return []
    for c in a.changes:
        old, new = release_of(c.get("before") or ""), release_of(c.get("after") or "")
        if c.get("kind") == "wrapper" and fact["wrapper"] in (c.get("column") or "") and old and new \
                and old < at <= new:
            return []
    return [Finding("facts", "changes.json", f"no change says {fact['wrapper']} went at {fact['package']} "
                                             f"{fact['release']}, though rows on both sides hold it: "
                                             f"{fact['says']} {tag}")]


def _standing(change: dict) -> str | None:
    """A published change's speed standing, by the atlas's own rule (`changes.standing`)."""
    return standing(from_dict(change))


def _side_by_side(a: _Atlas) -> list[Finding]:
    """A speed change's standing against its own side-by-side run (the bisect's two ends, in one
    session): refuted while its medians moved as claimed past the bisect's threshold, or confirmed
    while they did not, is a standing its evidence contradicts."""
    out = []
    for c in a.changes:
        if c.get("kind") not in ("slower", "faster") or c.get("confirmed") is None:
            continue
        pair = side_by_side(a.evidence(c))
        if pair is None:
            continue
        ratio, old, new, drop = pair
        moved = past_threshold(c["kind"], ratio, drop)
        standing = _standing(c)
        said = f"its own side-by-side medians moved x{ratio:.2f} ({old:,.0f} -> {new:,.0f} samples/s)"
        where = f"changes.json: {c['id']} ({c['kind']} {c.get('column')}, {c.get('before')} -> {c.get('after')})"
        if standing == "refuted" and moved:
            out.append(Finding("side by side", where, f"published as refuted; {said}, past the bisect's own "
                                                      f"{drop:.0%} threshold, as the change claims"))
        elif standing == "confirmed" and not moved:
            out.append(Finding("side by side", where, f"published as confirmed; {said}, short of the bisect's "
                                                      f"own {drop:.0%} threshold"))
    return out


def _linked(a: _Atlas) -> list[Finding]:
    """Every evidence file published beside the data is one the page (or a row's page) links: a file
    no page links says something of a change nobody reaches, and goes stale unseen."""
    folder = a.data.parent / "evidence"
    if not folder.is_dir():
        return []
    pages = [a.page, *(p.read_text() for p in sorted(a.data.parent.rglob("*.md")))]
    return [Finding("evidence", str(path), "published, and no page links it (the change it explains is "
                                            "not reachable from the atlas)")
            for path in sorted(folder.glob("*.json")) if not any(f"evidence/{path.name}" in p for p in pages)]


def _cutoffs(a: _Atlas) -> list[Finding]:
    """Neighbours whose days run backwards (`rows.out_of_order`) are named on the page, both rows
    and both days on one line: left unsaid, a change between them reads as the release's alone."""
    said = a.page.splitlines()
    out = []
    for line, x, y in rows.out_of_order(rows.build(a.records)):
        days = [(r.stack.get("cutoff") or "")[:10] for r in (x, y)]
        if not any(all(t in s for t in (x.label, y.label, *days)) for s in said):
            out.append(Finding("cut-offs", f"{a.page_name}: {line}, {x.key} -> {y.key}",
                               f"{y.label} is resolved as of {days[1]}, before {x.label}'s {days[0]}, the release "
                               "before it; the page does not say so"))
    return out


_TABLE_ROW = re.compile(r'<tr [^>]*><td><a href="[^"]*/rows/(?P<slug>[^"/]+)\.html">.*?</td><td>.*?</td><td>.*?</td>'
                        r"(?P<cells>.*)</tr>$", re.M)
_OK_CELL = re.compile(r'<td class="(?P<cls>[^"]+)" data-workload="[^"]*">(?P<text>.*?)</td>')
_HEAD = re.compile(r'<th data-workload="([^"]+)">[^<]*<br><small>([^<]*)</small></th>')
_FIGURE = re.compile(r"\d+(?:\.\d+)?")


def _few_runs(a: _Atlas) -> list[Finding]:
    """Each `ok` entry of the page's table against the runs it rests on: a median and its range
    of fewer than `pages.MEDIAN_FROM` runs is no median (of two, the midpoint), and every accuracy
    the entry states is one of its runs' (to the two places the table shows)."""
    by_slug = {r.slug: r for r in rows.build(a.records)}
    cols = [f"{html.unescape(w)} {html.unescape(rest)}" for w, rest in _HEAD.findall(a.page)]
    out = []
    for m in _TABLE_ROW.finditer(a.page):
        row = by_slug.get(m["slug"])
        if row is None:
            continue
        for col, cell in zip(cols, _OK_CELL.finditer(m["cells"]), strict=False):
            entry = row.entries.get(col)
            if cell["cls"] != "s-ok" or entry is None or " of " in cell["text"]:
                continue
            runs = entry.values("val_accuracy")
            accuracy = cell["text"].split("<br>")[0]
            where = f"{a.page_name}: {row.label}, {col}"
            if "[" in accuracy and len(runs) < MEDIAN_FROM:
                out.append(Finding("few runs", where, f"a median and range of {len(runs)} run(s) "
                                                      f"({', '.join(f'{v:.3f}' for v in runs)})"))
                continue
            shown = [float(v) for v in _FIGURE.findall(accuracy.split("[")[0])]
            if len(runs) < MEDIAN_FROM and sorted(shown) != sorted(round(v, 2) for v in runs):
                out.append(Finding("few runs", where, f"states {shown or 'no value'} of runs that gave "
                                                      f"{', '.join(f'{v:.3f}' for v in runs)}"))
    return out


def _owed(a: _Atlas, matrices: Path | None, results: Path | None) -> list[Finding]:
    """The cells of the atlas matrices with no record, unless the page names them: one finding per
    environment that owes, with its count and the first cells. The matrices are expanded by the
    atlas run's own rule (`drive.stacks`: a recorded expansion first, then the index), so what the
    audit calls owed is what a fresh clone's `atlas run` would run."""
    if matrices is None:
        return []
    from harness.atlas import drive  # the run's machinery, imported only where matrices are named
    if not matrices.exists():
        raise UserError(f"{matrices}: no such folder or matrix file (--matrices)")
    recorded = {(r["matrix"], r["cell"]) for r in a.records}
    out = []
    for stack in drive.stacks(drive.matrices(matrices), results):
        hidden = [c.id for c in stack.cells if (stack.matrix.name, c.id) not in recorded and c.id not in a.page]
        if hidden:
            out.append(Finding("owed", f"{a.page_name}: {stack.matrix.name}/{stack.environment.name} "
                                       f"({stack.matrix_path})",
                               f"{len(hidden)} cell(s) of the matrix have no record and the page does not name "
                               f"them: {', '.join(hidden[:3])}" + (", ..." if len(hidden) > 3 else "")))
    return out


def audit(data: Path, page: Path | None, facts: list[dict], matrices: Path | None = None,
          results: Path | None = None) -> list[Finding]:
    """Every contradiction in the atlas at `data` (its changes and evidence beside it) and `page`;
    with `matrices`, every cell they owe that the page hides too (`results`: whose recorded
    expansions the atlas run uses)."""
    a = _Atlas(data, page)
    return (_counts(a) + _devices(a) + _duplicates(a) + _verdicts(a) + _like_for_like(a, facts) + _claims(a)
            + _facts(a, facts) + _side_by_side(a) + _linked(a) + _cutoffs(a) + _few_runs(a)
            + _owed(a, matrices, results))


def command(args, console: Console) -> int:
    data = Path(args.data)
    page = Path(args.page) if args.page else data.parent.with_suffix(".md")
    found = audit(data, page, load_facts(Path(args.facts) if args.facts else FACTS),
                  Path(args.matrices) if args.matrices else None, Path(args.results))
    return tell(found, console, as_json=args.json, noun="contradiction(s)",
                clean="the atlas says only what its data and the facts hold")
