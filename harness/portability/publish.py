"""The grid's compact data and its page, from the readers' results: ``portability.json`` (every
record, versioned), ``portability.csv`` (one row per writer, reader, model and format) and
``portability.md`` (a writer x reader table per format, then every file that loads but predicts
differently, then every refusal grouped by its error family). The model files themselves stay
in the results folder: they are results, the records are what is kept."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import status
from harness.errors import UserError
from harness.portability import judge
from harness.portability.grid import WRITER, is_reader
from harness.results.store import scan
from harness.workloads.protocol import OUTPUT_DIR

SCHEMA = 1
LOADS = "loads.json"
MARK = {judge.SAME: "=", judge.DIFFERS: "≠", judge.REFUSES: "✗", judge.UNKNOWN: "·"}
NOT_RUN = "…"   # a pair the grid has not read yet (a grid grows a row and a column at a time)
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
    missing: list[str] = field(default_factory=list)
    about: dict = field(default_factory=dict)


def gather(results: Path) -> Gathered:
    got = Gathered()
    seconds, engines, hosts, days, commits = [], set(), set(), set(), set()
    failed_writers, unread = set(), []
    for folder, r in scan(results):
        if not hasattr(r, "cell"):
            continue
        total = (r.timing or {}).get("total_seconds")
        if isinstance(total, (int, float)):
            seconds.append(total)
        prov = r.provenance or {}
        engines.add(r.engine or "")
        hosts.add(_host(prov))
        days.add((r.started or "")[:10])
        commits.add((prov.get("harness_commit") or "")[:12])
        stack, workload = r.cell.split("/")[:2]
        if not is_reader(workload):
            if workload == WRITER and r.status != status.OK:  # it wrote nothing: its row is empty, and said why
                failed_writers.add(stack)
                got.missing.append(_why(r))
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
    # a pair whose writer wrote nothing was decided without launching: the writer's line says why
    got.missing += [_why(r) for r in unread if _writer_of(r) not in failed_writers]
    got.about = {"cell_seconds": round(sum(seconds), 1), "cells": len(seconds),
                 **{k: sorted(v - {""}) for k, v in (("engines", engines), ("hosts", hosts), ("days", days),
                                                      ("harness_commits", commits))}}
    return got


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


def publish(results: Path, out: Path) -> dict:
    got = gather(results)
    if not got.loads:
        raise UserError(f"{results}: no reader of the grid has finished ok there yet"
                        + (f" ({got.missing[0]})" if got.missing else "") + "; run it first: portability run STACKS")
    records = judge.records(got.loads, got.cells)
    out.mkdir(parents=True, exist_ok=True)
    stacks = {**{r["writer"]: r["writer_stack"] for r in records}, **{r["reader"]: r["reader_stack"] for r in records}}
    data = {"schema": SCHEMA, "missing": got.missing, "about": got.about, "stacks": stacks,
            "records": [{k: v for k, v in r.items() if k not in ("writer_stack", "reader_stack")} for r in records]}
    (out / "portability.json").write_text(compact(data))
    (out / "portability.csv").write_text(as_csv(records))
    (out / "portability.md").write_text(page(records, got.missing, got.about))
    return data


def compact(data: dict) -> str:
    """The data file: one record per line (a new run's diff reads record by record), the stacks
    once at the top rather than in every record."""
    head = {k: v for k, v in data.items() if k != "records"}
    lines = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in data["records"]]
    return json.dumps(head, sort_keys=True)[:-1] + ', "records": [\n' + ",\n".join(lines) + "\n]}\n"


def as_csv(records: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({**r, **{f"{side}_{what}": r[f"{side}_stack"].get(what)
                            for side in ("writer", "reader") for what in ("keras", "tensorflow")}})
    return buf.getvalue()


def _stack(s: dict) -> str:
    keras = f"Keras {s.get('keras')}" if s.get("keras") else "?"
    tf = f"TF {s['tensorflow']}" if s.get("tensorflow") else None
    backend = s.get("backend") if s.get("backend") not in (None, "tensorflow") else None
    return ", ".join(x for x in (keras, backend, tf) if x)


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


def _progress(names: list[str], read: set) -> list[str]:
    """How much of the grid is read: said above the tables while pairs are missing."""
    wanted = len(names) ** 2
    if len(read) >= wanted:
        return []
    return [f"**{len(read)} of {wanted} pairs read so far** (a resumed `portability run` reads the rest).", ""]


def page(records: list[dict], missing: list[str], about: dict | None = None) -> str:
    models = sorted({r["model"] for r in records})
    stacks = {}
    for r in records:
        stacks[r["writer"]] = r["writer_stack"]
        stacks[r["reader"]] = r["reader_stack"]
    names = sorted(stacks, key=lambda n: _era(stacks[n], n))
    lines = ["# Saved on one release, loaded on another", "",
             "Each stack wrote the same models (" + ", ".join(models) + "), trained a little; every stack loaded "
             "every file by each way its users would try and predicted on the writer's inputs. "
             f"A cell lists one mark per model in that order: `{MARK[judge.SAME]}` loads and predicts the same "
             f"(within the floor its writer's own stack measured, at least {judge.FLOOR:g}), "
             f"`{MARK[judge.DIFFERS]}` **loads but predicts differently**, `{MARK[judge.REFUSES]}` refuses, "
             f"`{MARK[judge.UNKNOWN]}` a format the reader cannot know; blank: not written by that stack; "
             f"`{NOT_RUN}`: this pair not read yet.", "",
             "Stacks: " + "; ".join(f"`{n}` ({_stack(stacks[n])})" for n in names), ""]
    by = {(r["writer"], r["reader"], r["model"], r["format"]): r for r in records}
    read = {(r["writer"], r["reader"]) for r in records}
    lines += _progress(names, read)
    for fmt in sorted({r["format"] for r in records}):
        lines += [f"## {fmt}", "", "| writer \\ reader | " + " | ".join(f"`{n}`" for n in names) + " |",
                  "|---|" + "---|" * len(names)]
        for w in names:
            row = []
            for rd in names:
                if (w, rd) not in read:
                    row.append(f"`{NOT_RUN}`")
                    continue
                marks = "".join(MARK[by[(w, rd, m, fmt)]["verdict"]] if (w, rd, m, fmt) in by else " " for m in models)
                row.append(marks.strip() and f"`{marks}`")
            if any(r and r != f"`{NOT_RUN}`" for r in row):
                lines.append(f"| `{w}` | " + " | ".join(row) + " |")
        lines.append("")
    differs = [r for r in records if r["verdict"] == judge.DIFFERS]
    lines += ["## Loads, but predicts differently", ""]
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
                  f"`harness portability run` then `publish`: {about.get('cells')} cells (a writer per stack, a "
                  f"reader per pair), {about.get('cell_seconds', 0) / 60:.1f} min of cell time in all, on "
                  f"{listed['hosts']} with the {listed['engines']} engine, {listed['days']}, "
                  f"harness {listed['harness_commits']}."]
    return "\n".join(lines) + "\n"
