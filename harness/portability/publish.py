"""The grid's compact data and its page, from the readers' results: ``portability.json`` (every
record, versioned), ``portability.csv`` (one row per writer, reader, model and format) and
``portability.md`` (a writer x reader table per format, then every file that loads but predicts
differently, then every refusal grouped by its error family). The model files themselves stay
in the results folder: they are results, the records are what is kept."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import status
from harness.claims import Change
from harness.errors import UserError
from harness.files import atom
from harness.portability import changes, evidence, judge, pages
from harness.portability.grid import WRITER, is_reader
from harness.portability.table import LINE_NAMES, MARK, NOT_RUN, label
from harness.results.store import scan
from harness.workloads.protocol import OUTPUT_DIR

# 2: a record's `ways` only where it predicts differently; 3: a record is a row of `columns`' values
# (null: none), errors and reasons by their place in `texts`, the cell id only where the grid's rule
# (CELL) does not give it, `floor_least` for the least floor (`expanded` gives every record as
# schema 2 did)
SCHEMA = 3
COLUMNS = ("writer", "reader", "model", "format", "verdict", "way", "max_abs_diff", "floor", "errors", "reason",
           "shape", "floor_least", "cell", "ways")
CELL = "{reader}/load-{writer}/none-c1/b128/r0"   # a pair's reader cell, as grid.reader_workload names it
CHANGES, FEED = "changes.json", "feed.xml"
NS = "tag:tfkeras-harness.portability,2026:"
LOADS = "loads.json"
CSV_FIELDS = ("writer", "reader", "model", "format", "verdict", "way", "max_abs_diff", "floor", "writer_keras",
              "writer_tensorflow", "reader_keras", "reader_tensorflow", "cell")


@dataclass
class Gathered:
    """What a grid's (or a check's) results folder holds: each reader's observations (every writer
    it read, merged over its cells), the cell and folder of each (reader, writer) pair, the cells
    that left nothing (and why), and how the cells were run."""
    loads: dict[str, dict] = field(default_factory=dict)
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    folders: dict[tuple[str, str], Path] = field(default_factory=dict)
    writers: dict[str, Path] = field(default_factory=dict)   # stack -> its ok writer's output folder
    missing: list[str] = field(default_factory=list)
    about: dict = field(default_factory=dict)


def gather(results: Path, grid: bool = True) -> Gathered:
    """The readers' observations in a results folder, and what the cells cost. On a grid (`grid`),
    only the stacks that write are its stacks: a reader cell of another stack is a `portability
    bisect`'s, testing a release between two of the grid's in the same results (where the writer's
    files are handed from), and is that bisect's evidence, not a row or column of the grid."""
    got = Gathered()
    seconds, engines, hosts, days, commits = [], set(), set(), set(), set()
    failed_writers, unread, names = set(), [], set()
    kinds: dict[bool, list[float]] = {False: [], True: []}   # is a reader -> its cells' seconds
    found = [(folder, r) for folder, r in scan(results) if hasattr(r, "cell")]
    writing = {r.cell.split("/")[0] for _, r in found if r.cell.split("/")[1] == WRITER}
    for folder, r in found:
        if grid and r.cell.split("/")[0] not in writing:
            continue
        total = (r.timing or {}).get("total_seconds")
        if isinstance(total, (int, float)):
            seconds.append(total)
            kinds[is_reader(r.cell.split("/")[1])].append(total)
        prov = r.provenance or {}
        engines.add(r.engine or "")
        hosts.add(_host(prov))
        days.add((r.started or "")[:10])
        commits.add((prov.get("harness_commit") or "")[:12])
        stack, workload = r.cell.split("/")[:2]
        names.add(stack)
        if not is_reader(workload):
            if workload == WRITER and r.status != status.OK:  # it wrote nothing: its row is empty, and said why
                failed_writers.add(stack)
                got.missing.append(_why(r))
            elif workload == WRITER:
                got.writers[stack] = folder / OUTPUT_DIR
            continue
        found = folder / OUTPUT_DIR / LOADS
        if r.status != status.OK or not found.is_file():
            unread.append(r)
            continue
        loads = json.loads(found.read_text())
        mine = got.loads.setdefault(stack, {"stack": loads.get("stack") or {}, "writers": {}})
        mine["writers"].update(loads.get("writers") or {})
        for writer in loads.get("writers") or {}:
            got.cells[(stack, writer)], got.folders[(stack, writer)] = r.cell, folder
    # a pair whose writer wrote nothing was decided without launching: the writer's line says why;
    # a reader that cannot run (its stack does not install) is one line, not one per writer
    grouped: dict[tuple, list] = defaultdict(list)
    for r in unread:
        if _writer_of(r) not in failed_writers:
            grouped[(r.cell.split("/")[0], r.status, (r.reason or r.failure_text or "")[:160])].append(r)
    for (stack, word, why), cells in grouped.items():
        got.missing.append(_why(cells[0]) if len(cells) == 1 else
                           f"{stack} (reader), {len(cells)} pairs: {word} ({why})")
    got.about = {"cell_seconds": round(sum(seconds), 1), "cells": len(seconds), "reader_cells": len(kinds[True]),
                 "stacks": len(names),
                 "writer_seconds": _spread(kinds[False]), "reader_seconds": _spread(kinds[True]),
                 **{k: sorted(v - {""}) for k, v in (("engines", engines), ("hosts", hosts), ("days", days),
                                                      ("harness_commits", commits))}}
    return got


def _spread(values: list[float]) -> dict | None:
    """Median, min and max of cells' seconds (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"median": round(median, 1), "min": round(ordered[0], 1), "max": round(ordered[-1], 1)}


def _why(r) -> str:
    return f"{r.cell}: {r.status} ({(r.reason or r.failure_text or '')[:160]})"


def _writer_of(r) -> str | None:
    """The stack whose files a reader cell was handed (its need's producer)."""
    needs = r.get("needs") or []
    return needs[0]["cell"].split("/")[0] if needs and isinstance(needs[0], dict) and needs[0].get("cell") else None


def _host(prov: dict) -> str:
    cpus = (prov.get("host_resources") or {}).get("cpus")
    platform = (prov.get("host") or {}).get("platform") or ""
    return ", ".join(x for x in (f"{cpus} CPUs" if cpus else "", platform.split("-")[0]) if x)


def judged(results: Path) -> tuple[Gathered, Judged]:
    """The grid's results gathered and judged: what publish, explain and bisect start from. No
    reader has finished there yet: exit 2, saying what to run."""
    got = gather(results)
    if not got.loads:
        raise UserError(f"{results}: no reader of the grid has finished ok there yet"
                        + (f" ({got.missing[0]})" if got.missing else "") + "; run it first: portability run STACKS")
    return got, Judged.of(judge.records(got.loads, got.cells))


def publish(results: Path, out: Path) -> dict:
    """Judge the grid's results and write every file of the publication to `out`; the data."""
    got, g = judged(results)
    return write(g, got.missing + _unwritten(got.loads), got.about, out)


def republish(out: Path) -> dict:
    """The publication made again from its committed data (`out`'s portability.json), for a clone
    that holds no results: every record as the data keeps it, each stack's versions from the
    data's `stacks`; what `publish` wrote from the results, byte for byte."""
    path = out / "portability.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the grid's data ({type(exc).__name__})") from None
    found = data.get("schema") if isinstance(data, dict) else None
    if found != SCHEMA:
        raise UserError(f"{path}: schema: expected {SCHEMA}, found {found} (publish it again from the grid's results)")
    stacks = data["stacks"]
    records = [{**r, "writer_stack": stacks[r["writer"]], "reader_stack": stacks[r["reader"]]}
               for r in expanded(data)]
    return write(Judged.of(records), data["missing"], data["about"], out)


def write(g: Judged, missing: list[str], about: dict, out: Path) -> dict:
    """Every file of the publication, from the judged records: the data, its CSV, the page, the
    changes and their feed, a page per stack and per format."""
    out.mkdir(parents=True, exist_ok=True)
    explained = differing(g, evidence.load(out))
    texts = sorted({t for r in g.records for t in _texts(r)})
    place = {t: i for i, t in enumerate(texts)}
    data = {"schema": SCHEMA, "missing": missing, "about": about, "stacks": g.stacks, "cell": CELL,
            "differing": explained, "texts": texts, "columns": list(COLUMNS),
            "records": [_row(_compact_record(r, place)) for r in g.records]}
    (out / "portability.json").write_text(compact(data))
    (out / "portability.csv").write_text(as_csv(g.records))
    (out / "portability.md").write_text(page(g, missing, about, explained, evidence.load_changes(out)))
    (out / CHANGES).write_text(compact({"schema": SCHEMA, "records": [changes.as_dict(c) for c in g.changes]}))
    (out / FEED).write_text(_feed(g, about))
    folder = out / pages.STACKS
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.md"):   # a stack no longer in the grid has no page
        old.unlink()
    for name in g.names:
        (out / pages.link(name)).write_text(pages.stack_page(name, g.names, g.records, g.stacks, g.changes))
    tables = out / pages.FORMATS
    tables.mkdir(exist_ok=True)
    for old in tables.glob("*.md"):   # a format no longer in the grid has no page
        old.unlink()
    for fmt in sorted({r["format"] for r in g.records}):
        (out / pages.format_link(fmt)).write_text(pages.format_page(fmt, g.names, g.records, g.stacks))
    return data


def _texts(r: dict) -> list[str]:
    return [e for e in (r.get("errors") or {}).values() if e] + ([r["reason"]] if r.get("reason") else [])


def _compact_record(r: dict, place: dict[str, int]) -> dict:
    """A record as the data file keeps it: every way tried only where it loads but predicts
    differently (the evidence); elsewhere the verdict, the way that worked or each way's error say
    it, and the reader cell's loads.json holds the rest. An error or a reason is its place in the
    file's `texts` (a few hundred texts stand for thousands of refusals); the cell id is left out
    where the grid's rule gives it."""
    drop = ("writer_stack", "reader_stack") + (() if r["verdict"] == judge.DIFFERS else ("ways",))
    out = {k: v for k, v in r.items() if k not in drop}
    if by_rule(r):
        del out["cell"]
    if out.get("errors"):
        out["errors"] = {way: place[e] if e else None for way, e in out["errors"].items()}
    if out.get("reason"):
        out["reason"] = place[out["reason"]]
    return out


def by_rule(r: dict) -> bool:
    """Whether the record's cell is the one the grid's rule (CELL) names for its pair: the data
    files keep a cell id only where it is not."""
    return r.get("cell") == CELL.format(reader=r["reader"], writer=r["writer"])


def _row(r: dict) -> list:
    """A record as its row of COLUMNS' values, with no trailing nulls (a row is one line of the file)."""
    unknown = set(r) - set(COLUMNS)
    if unknown:   # a field the judge added and the file has no column for: kept out silently, it would be lost
        raise ValueError(f"portability.json has no column for {sorted(unknown)}")
    row = [r.get(c) for c in COLUMNS]
    while row and row[-1] is None:
        row.pop()
    return row


def expanded(data: dict) -> list[dict]:
    """The data file's records as a reader wants them: each a mapping, errors and reasons as text,
    each cell id."""
    texts, rule, columns = data["texts"], data["cell"], data["columns"]
    out = []
    for row in data["records"]:
        r = {c: v for c, v in zip(columns, row, strict=False) if v is not None}
        r["cell"] = r.get("cell") or rule.format(reader=r["reader"], writer=r["writer"])
        if r.get("errors"):
            r["errors"] = {way: texts[i] if i is not None else None for way, i in r["errors"].items()}
        if "reason" in r:
            r["reason"] = texts[r["reason"]]
        out.append(r)
    return out


def _unwritten(loads: dict[str, dict]) -> list[str]:
    """A line per writer, format and the readers that did not find its listed files (judge.unwritten)."""
    found: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for reader, seen in loads.items():
        for writer, written in (seen.get("writers") or {}).items():
            for model, formats in (written.get("models") or {}).items():
                for fmt, entry in formats.items():
                    if judge.unwritten(entry):
                        found[(writer, fmt)][reader].add(model)
    return [f"{writer}'s {fmt} on {', '.join(sorted(readers))}: listed in the writer's manifest, and no such file "
            f"was there when read ({', '.join(sorted(set().union(*readers.values())))}): nothing to judge"
            for (writer, fmt), readers in sorted(found.items())]


@dataclass(frozen=True)
class Judged:
    """The judged records and what every part of the publication reads from them, found once:
    every stack they name (as writer or reader) -> its versions, their names oldest first, and
    the changes along each line."""
    records: list[dict]
    stacks: dict[str, dict]
    names: list[str]
    changes: list[Change]

    @classmethod
    def of(cls, records: list[dict]) -> Judged:
        stacks = {**{r["writer"]: r["writer_stack"] for r in records},
                  **{r["reader"]: r["reader_stack"] for r in records}}
        names = sorted(stacks, key=lambda n: _era(stacks[n], n))
        return cls(records, stacks, names, changes.find(records, names, stacks))


def differing(g: Judged, found: dict[str, dict]) -> list[dict]:
    """The groups of files that load but predict differently, each with its pairs' count and, where
    `portability explain` probed it (`found`: its evidence by group id), where it parts and why."""
    out = []
    for group, members in evidence.groups(g.records, g.stacks, g.names).items():
        ev = found.get(group.id)
        entry = {**group.as_dict(), "pairs": len(members)}
        if ev is not None:
            entry.update(evidence=ev["file"], sentence=ev.get("sentence"),
                         probed=[ev["pair"]["writer"], ev["pair"]["reader"]])
        out.append(entry)
    return out


def _feed(g: Judged, about: dict) -> str:
    """An entry per stack in the grid and per change, dated by the grid's newest run."""
    day = (about.get("days") or ["1970-01-01"])[-1]
    entries = [atom.Entry(day, f"{NS}stack:{n}", f"in the grid: {n}", pages.link(n), label(g.stacks[n]))
               for n in g.names]
    entries += [atom.Entry(day, f"{NS}change:{c.id}", f"{c.kind} {c.after}: {c.where['was']} -> {c.where['now']}",
                           pages.link(c.after), changes.sentence(c)) for c in g.changes]
    return atom.feed("tfkeras-harness: model files across releases", f"{NS}feed", entries)


def compact(data: dict) -> str:
    """The data file: one record per line (a new run's diff reads record by record), the stacks
    once at the top rather than in every record."""
    head = {k: v for k, v in data.items() if k != "records"}
    # a row (a list of COLUMNS' values) keeps its ways' errors in the order they were tried: the
    # page quotes the last one tried, the most lenient; a record kept as a mapping is sorted
    lines = [json.dumps(r, sort_keys=not isinstance(r, list), separators=(",", ":")) for r in data["records"]]
    return json.dumps(head, sort_keys=True)[:-1] + ', "records": [\n' + ",\n".join(lines) + "\n]}\n"


def as_csv(records: list[dict]) -> str:
    """A row per record; `cell` is empty where the grid's rule, READER/load-WRITER/none-c1/b128/r0,
    names it (a column of ids the rule gives was 40% of the file)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:   # the cell only where the rule does not give it, as in portability.json
        w.writerow({**r, "cell": None if by_rule(r) else r.get("cell"),
                    **{f"{side}_{what}": r[f"{side}_stack"].get(what)
                       for side in ("writer", "reader") for what in ("keras", "tensorflow")}})
    return buf.getvalue()


def _difference(r: dict) -> str:
    if r.get("max_abs_diff") is None:
        return f"predictions of another shape {r.get('shape')}"
    return f"largest difference {r['max_abs_diff']:.3g} (floor {r['floor']:.3g})"


def _era(stack: dict, name: str) -> tuple:
    """A stack's place in time, oldest first: its TensorFlow, then its Keras (a stack without
    TensorFlow, Keras 3 on JAX or torch, after every one with it); the name breaks a tie."""
    def version(text) -> tuple:
        try:
            parsed = Version(str(text))
        except InvalidVersion:
            return (1,)
        return (0, parsed)
    return version(stack.get("tensorflow")), version(stack.get("keras")), name


def _cost(about: dict) -> list[str]:
    """What a cell took (median, min-max, from the cells' own timings) and so what one stack more
    costs: its writer and its row and column of pairs, 2N + 1 readers on a grid of N stacks."""
    w, r = about.get("writer_seconds"), about.get("reader_seconds")
    if not w or not r:
        return []
    stacks = about.get("stacks") or 0
    more = w["median"] + (2 * stacks + 1) * r["median"]
    return ["", f"A writer cell took {w['median']:g} s (median; {w['min']:g}-{w['max']:g}), a reader cell "
                f"{r['median']:g} s ({r['min']:g}-{r['max']:g}). One stack more on this grid of {stacks}: its "
                f"writer and {2 * stacks + 1} reader cells, about {more / 60:.1f} min of cell time."]


def _changes_section(found: list[Change], narrowed: dict[str, dict]) -> list[str]:
    out = ["## Changes along each line", "",
           "Two neighbouring releases of one line (readers: the same file judged otherwise; writers: the same "
           "reader judging their files otherwise). The grid's resolution is its stacks: `portability bisect` "
           "narrows a change to its release, a readers' or a writers' (each narrowed change says so, with its "
           "evidence).", ""]
    by_line: dict[str, list[Change]] = defaultdict(list)
    for c in found:
        by_line[c.where["line"]].append(c)
    for name, members in by_line.items():
        out += [f"### {LINE_NAMES.get(name, name)}", ""]
        out += [f"- {changes.sentence(c)}" + (f" -- {narrowed[c.id]['sentence']} ([evidence]({narrowed[c.id]['file']}))"
                                        if c.id in narrowed else "") for c in members]
        out.append("")
    return out if found else out + ["None.", ""]


def _progress(names: list[str], read: set) -> list[str]:
    """How much of the grid is read: said above the tables while pairs are missing."""
    wanted = len(names) ** 2
    if len(read) >= wanted:
        return []
    return [f"**{len(read)} of {wanted} pairs read so far** (a resumed `portability run` reads the rest).", ""]


def page(g: Judged, missing: list[str], about: dict | None = None, explained: list[dict] | None = None,
         narrowed: dict[str, dict] | None = None) -> str:
    records, stacks, names = g.records, g.stacks, g.names
    models = sorted({r["model"] for r in records})
    lines = ["# Saved on one release, loaded on another", "",
             "Each stack wrote the same models (" + ", ".join(models) + "), trained a little; every stack loaded "
             "every file by each way its users would try and predicted on the writer's inputs. A table per "
             "format (each on its page, below), writers down and readers across; the filters show one model, "
             "verdict or line of writers or readers, and each mark's title says what happened. "
             f"A cell lists one mark per model in that order: `{MARK[judge.SAME]}` loads and predicts the same "
             f"(within the floor its writer's own stack measured, at least {judge.FLOOR:g}), "
             f"`{MARK[judge.DIFFERS]}` **loads but predicts differently**, `{MARK[judge.REFUSES]}` refuses, "
             f"`{MARK[judge.UNKNOWN]}` a format the reader cannot know; blank: not written by that stack; "
             f"`{NOT_RUN}`: this pair not read yet.", "",
             "Stacks (each links to its page: its files on every reader, every file on it): "
             + "; ".join(f"[`{n}`]({pages.link(n)}) ({label(stacks[n])})" for n in names), "",
             f"Data: [portability.json](portability.json) (schema {SCHEMA}), [portability.csv](portability.csv), "
             f"[{CHANGES}]({CHANGES}); [Atom feed]({FEED}).", ""]
    read = {(r["writer"], r["reader"]) for r in records}
    lines += _progress(names, read)
    lines += ["## The grid", "", "A table per format, on a page of its own (each with its filters):", "",
              "| format | files judged | " + " | ".join(f"{v} `{MARK[v]}`" for v in judge.VERDICTS) + " |",
              "|---|---:|" + "---:|" * len(judge.VERDICTS)]
    for fmt in sorted({r["format"] for r in records}):
        counts = Counter(r["verdict"] for r in records if r["format"] == fmt)
        lines.append(f"| [`{fmt}`]({pages.format_link(fmt)}) | {sum(counts.values())} | "
                     + " | ".join(str(counts.get(v, 0)) for v in judge.VERDICTS) + " |")
    lines.append("")
    lines += _changes_section(g.changes, narrowed or {})
    differs = [r for r in records if r["verdict"] == judge.DIFFERS]
    lines += ["## Loads, but predicts differently", ""]
    if differs:
        lines += ["By what the files share (model, format, way of loading, the two lines of releases); "
                  "`portability explain` follows one pair of each group layer by layer, and puts the writer's "
                  "settings back one at a time:", ""]
    for d in explained if explained is not None else differing(g, {}):
        said = (f"{d['sentence']} (probed `{d['probed'][0]}` -> `{d['probed'][1]}`; [evidence]({d['evidence']}))"
                if d.get("evidence") else "not followed yet (`portability explain`)")
        ends = " -> ".join(LINE_NAMES.get(d[end], d[end]) for end in ("writer_line", "reader_line"))
        lines.append(f"- **{d['model']} {d['format']} by `{d['way']}`, {ends}** ({d['pairs']} pairs): {said}")
    if differs:
        lines += ["", "Every pair:", ""]
    lines += [f"- `{r['writer']}` -> `{r['reader']}`, {r['model']}, {r['format']} by `{r['way']}`: " + _difference(r)
              for r in differs] or ["None."]
    lines += ["", "## Refusals, by error family", "",
              "Each file's error is its most lenient way's (the last tried: `compile=False`, `safe_mode=False`), "
              "grouped by format, reader and the error's first words; every way's error is in the data."]
    families = defaultdict(list)
    for r in records:
        if r["verdict"] == judge.REFUSES:
            last = list(r["errors"].values())[-1] if r["errors"] else ""
            families[(r["format"], r["reader"], (last or "")[:60])].append((r, last or ""))
    for (fmt, reader, _), found in sorted(families.items()):
        writers = sorted({r["writer"] for r, _ in found})
        models = sorted({r["model"] for r, _ in found})
        lines.append(f"- {fmt} on `{reader}`, from {', '.join(f'`{w}`' for w in writers)} "
                     f"({', '.join(models)}; {len(found)} files): {found[0][1][:220]}")
    if not families:
        lines.append("None.")
    if missing:
        lines += ["", "## Cells that left nothing to judge", "",
                  "A writer listed here wrote no file (it has no row); a reader listed here loaded nothing "
                  "(its column is empty).",
                  ""] + [f"- {m}" for m in missing]
    if about:
        listed = {k: ", ".join(about.get(k) or ["?"]) for k in ("hosts", "engines", "days", "harness_commits")}
        lines += ["", "## How it was obtained", "",
                  f"`harness portability run` then `publish`: {about.get('cells')} cells ("
                  f"{about.get('cells', 0) - about.get('reader_cells', 0)} writers, {about.get('reader_cells', 0)} "
                  f"readers), {about.get('cell_seconds', 0) / 60:.1f} min of cell time in all, on "
                  f"{listed['hosts']} with the {listed['engines']} engine, {listed['days']}, "
                  f"harness {listed['harness_commits']}."]
        lines += _cost(about)
    return "\n".join(lines) + "\n"
