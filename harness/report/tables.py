"""The report's tables as data (headers + cells), rendered to Markdown or HTML.

Every table is built once here; the Markdown and HTML writers only format.
A cell's text comes from result files, which may hold anything a crashing
process printed, so each writer escapes every cell for its own format.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from . import analysis
from .analysis import Result, Spread


@dataclass
class Entry:
    """One table cell (named apart from harness.cells.Cell, the unit of work)."""
    text: str
    link: str | None = None   # a cell id: the writers turn it into a page link
    mark: str | None = None   # "ok", "error", "flag", ...: a CSS class / Markdown emphasis


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Entry]] = field(default_factory=list)
    note: str = ""


def slug(cell_id: str) -> str:
    """A file name for a cell page that every file system and browser accepts."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", cell_id.replace("/", "__"))


def fmt_si(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def _fmt(s: Spread | None, digits: int = 2) -> str:
    return s.fmt(digits) if s else "-"


def _short_failure(r: Result) -> str:
    if r["status"] in ("unsupported", "unavailable"):
        return (r.get("reason") or "")[:90]
    return ((r.get("error") or {}).get("signature") or "")[:90]


def group_summary(g: analysis.Group) -> Entry:
    if g.all_ok:
        val, sps = g.metric("val_accuracy"), g.samples_per_sec()
        parts = ["ok"] + ([f"val {val.median:.2f}"] if val else []) + ([f"{fmt_si(sps.median)}/s"] if sps else [])
        return Entry(" ".join(parts), link=g.first["cell"], mark="ok")
    worst = next(r for r in g.results if r["status"] != "ok")
    return Entry(f"{g.status}: {_short_failure(worst)}".rstrip(": "), link=worst["cell"], mark=worst["status"])


def compatibility(results: list[Result]) -> Table:
    """Environments as rows, (workload, parallelism) as columns; a column with
    several batch sizes lists each."""
    envs: list[str] = []
    cols: list[tuple[str, str]] = []
    cells: dict[tuple, list[analysis.Group]] = defaultdict(list)
    for g in analysis.groups(results).values():
        env, col = analysis.env_of(g.first), (analysis.workload_of(g.first), analysis.label_of(g.first))
        envs += [env] if env not in envs else []
        cols += [col] if col not in cols else []
        cells[(env, col)].append(g)
    table = Table("Compatibility", ["environment"] + [f"{w} {p}" for w, p in cols],
                  note="Each entry: status, validation accuracy and steady-state samples/s "
                       "(median of epochs 2..N over repeats); failures show their signature.")
    for env in envs:
        row = [Entry(env)]
        for col in cols:
            gs = sorted(cells.get((env, col), []), key=lambda g: g.first.get("batch_size") or 0)
            if len(gs) == 1:
                row.append(group_summary(gs[0]))
            elif gs:
                parts = [group_summary(g) for g in gs]
                worst = next((p.mark for p in parts if p.mark != "ok"), "ok")
                text = "; ".join(f"b{g.first.get('batch_size')}: {p.text}" for g, p in zip(gs, parts, strict=True))
                row.append(Entry(text, link=gs[0].first["cell"], mark=worst))
            else:
                row.append(Entry(""))
        table.rows.append(row)
    return table


def seed_comparison(results: list[Result]) -> Table:
    table = Table("1 device against N (seed 000)",
                  ["environment", "workload", "epochs", "batch", "parallelism", "acc 1", "val acc 1", "s/epoch 1",
                   "acc N", "val acc N", "s/epoch N", "time N/1", "flags"],
                  note="s/epoch: median of the steady epochs [min-max]. Flags: degraded = validation accuracy "
                       f"more than {analysis.ACCURACY_TOLERANCE} below 1 device; slower = N devices take longer "
                       "per epoch than the slowest 1-device epoch. Virtual CPU devices share the same cores: "
                       "their timings show overhead, not GPU speedups.")
    for row in analysis.seed_comparison(results):
        flags = [f for f in ("degraded", "slower") if row[f]]
        failed = row["status"] != "ok"
        table.rows.append([
            Entry(row["environment"]), Entry(row["workload"]), Entry(str(row["epochs"] or "")),
            Entry(str(row["batch"])),
            Entry(row["parallelism"]), Entry(_fmt(row["acc_1"])), Entry(_fmt(row["val_acc_1"])),
            Entry(_fmt(row["seconds_1"]), link=row["baseline_cell"]),
            Entry(row["status"] if failed else _fmt(row["acc_n"]), link=row["cell"] if failed else None,
                 mark=row["status"].split()[0] if failed else None),
            Entry("" if failed else _fmt(row["val_acc_n"])),
            Entry("" if failed else _fmt(row["seconds_n"]), link=row["cell"]),
            Entry(f"{row['time_ratio']:.2f}" if row["time_ratio"] else "-"),
            Entry(" ".join(flags), mark="flag" if flags else None),
        ])
    return table


def scaling(results: list[Result]) -> Table:
    table = Table("Scaling with the device count (seeds 003/004)",
                  ["environment", "workload", "wrapper", "batch", "devices", "status", "samples/s", "s/epoch",
                   "speedup", "efficiency", "val acc"],
                  note="Speedup: samples/s against 1 device at the same per-device batch; efficiency = "
                       "speedup / devices.")
    rows = analysis.scaling(results)
    counts: dict[tuple, set] = defaultdict(set)
    for row in rows:
        if row["status"] == "ok":
            counts[(row["environment"], row["workload"])].add(row["devices"])
    for row in rows:
        if len(counts.get((row["environment"], row["workload"]), ())) < 2:
            continue  # no series: nothing ran on more than one device count here
        ok = row["status"] == "ok"
        sps = row["samples_per_sec"]
        table.rows.append([
            Entry(row["environment"]), Entry(row["workload"]), Entry(row["wrapper"]),
            Entry(f"{row['batch']} ({row['policy']})"), Entry(str(row["devices"])),
            Entry(row["status"], link=row["cell"], mark=row["status"].split()[0]),
            Entry(f"{fmt_si(sps.median)} [{fmt_si(sps.lo)}-{fmt_si(sps.hi)}]" if ok and sps else "-"),
            Entry(_fmt(row["epoch_seconds"]) if ok else "-"),
            Entry(f"{row['speedup']:.2f}" if row["speedup"] else "-"),
            Entry(f"{row['efficiency']:.0%}" if row["efficiency"] else "-"),
            Entry(_fmt(row["val_accuracy"]) if ok else "-"),
        ])
    return table


def failure_families(results: list[Result]) -> Table:
    table = Table("Failure families", ["signature", "status", "cells", "environments", "example"],
                  note="The same normalised error signature (paths, numbers, addresses stripped) across cells.")
    for fam in analysis.failure_families(results):
        table.rows.append([Entry(fam["signature"], mark=fam["status"]), Entry(fam["status"]),
                           Entry(str(len(fam["cells"]))), Entry(", ".join(fam["environments"])),
                           Entry(fam["cells"][0], link=fam["cells"][0])])
    return table


def drifted_controls(results: list[Result]) -> Table:
    table = Table("Control cells that drifted", ["cell", "expected", "got", "why it was expected"],
                  note="A control cell's known answer is written in its matrix; these no longer give it.")
    for r in analysis.drifted_controls(results):
        want = r["expectation"]
        got = (r.get("error") or {}).get("signature") or r.get("reason") or ""
        table.rows.append([Entry(r["cell"], link=r["cell"], mark="flag"),
                           Entry(want["status"] + (f" '{want['signature']}'" if want.get("signature") else "")),
                           Entry(f"{r['status']} {got}".strip()), Entry(want.get("why") or "")])
    return table


def comparison(diff: dict[str, list[dict]]) -> list[Table]:
    tables = []
    for key, title in (("regressions", "Regressions (ok before, failing now)"), ("fixes", "Fixes"),
                       ("slower", "Slower beyond noise"), ("faster", "Faster beyond noise")):
        t = Table(title, ["cell", "run A", "run B", "detail"])
        for e in diff[key]:
            detail = e.get("b_signature") or e.get("a_signature") or ""
            if "change" in e:
                detail = f"{e['a_seconds'].fmt()} -> {e['b_seconds'].fmt()} s/epoch ({e['change']:+.0%})"
            t.rows.append([Entry(e["cell"]), Entry(e["a"]), Entry(e["b"]), Entry(detail)])
        tables.append(t)
    return tables
