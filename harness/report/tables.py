"""The report's tables as data (headers + cells), rendered to Markdown or HTML.

Every table is built once here; the Markdown and HTML writers only format.
A cell's text comes from result files, which may hold anything a crashing
process printed, so each writer escapes every cell for its own format.

Readable at any size: one compatibility table per workload, never wider than
MAX_COLUMNS; a failure or a refusal is a status word with a footnote key (F1,
U1) whose text is shown once, in the failure-family or not-run table.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.names import file_name
from harness.report import analysis
from harness.report.analysis import Spread
from harness.results.result import NO_CUTOFF, Result
from harness.stacks import release_key
from harness.status import OK, failure_line

MAX_COLUMNS = 12  # data columns per table, besides the row label: what a Markdown view shows unscrolled
CUT = 160         # characters of a reason or signature shown in a table; the whole text is one click away
KEY = re.compile(r"^[A-Z][0-9]+$")  # footnote keys (F1, U2): the only thing writers put into an id/anchor


@dataclass
class Entry:
    """One table cell (named apart from harness.cells.Cell, the unit of work)."""
    text: str
    link: str | None = None   # a cell id: the writers turn it into a page link
    mark: str | None = None   # "ok", "error", "flag", ...: a CSS class / Markdown emphasis
    ref: str | None = None    # a footnote key (F1: a failure family, U1: why cells did not run) it points at
    anchor: str | None = None  # the footnote key this entry defines (the target of `ref`)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Entry]] = field(default_factory=list)
    note: str = ""


def slug(cell_id: str) -> str:
    """A cell page's file name: one per cell id (`names.file_name`)."""
    return file_name(cell_id)


def cut(text: object, limit: int = CUT) -> str:
    """Whole, or cut at a word boundary with an ellipsis: never mid-word."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.") + " …"


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


@dataclass
class Context:
    """What every table of one report shares, computed once: the stacks in
    version order with their labels, and the footnote key of each failed or
    not-run cell, so an entry says "error F2" and F2 is explained once."""
    stacks: dict[str, analysis.Stack]
    labels: dict[str, str]
    families: list[dict]
    reasons: list[dict]
    key_of: dict[str, str]
    rank: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rank = {env: n for n, env in enumerate(self.stacks)}

    def order(self, env: str) -> int:
        """An environment's place in version order (for sorting rows)."""
        return self.rank.get(env, len(self.rank))


def context(results: list[Result]) -> Context:
    stacks = analysis.stacks(results)
    families = analysis.failure_families(results)
    reasons = analysis.not_run_reasons(results)
    key_of = {}
    for prefix, groups in (("F", families), ("U", reasons)):
        for n, g in enumerate(groups, 1):
            g["key"] = f"{prefix}{n}"
            key_of.update((cell, g["key"]) for cell in g["cells"])
    return Context(stacks, analysis.labels(stacks), families, reasons, key_of)


def group_summary(g: analysis.Group, ctx: Context | None = None) -> Entry:
    """ok with validation accuracy and samples/s; otherwise the status word
    and the footnote that explains it (the signature lives there, once), or,
    outside a report (no context), the status and the signature itself."""
    if g.all_ok:
        val, sps = g.metric("val_accuracy"), g.samples_per_sec()
        parts = [OK] + ([f"val {val.median:.2f}"] if val else []) + ([f"{fmt_si(sps.median)}/s"] if sps else [])
        return Entry(" ".join(parts), link=g.first.cell, mark=OK)
    worst = next(r for r in g.results if r.status != OK)
    if ctx is None:  # a line on its own (the live run output): say what happened right there
        line = failure_line(worst)  # says its status once, with the real reason
        if g.status != worst.status:
            line = f"{g.status}: {line}"
        return Entry(cut(line, 140), link=worst.cell, mark=worst.status)
    return Entry(g.status, link=worst.cell, mark=worst.status, ref=ctx.key_of.get(worst.cell))


def _column_key(col: tuple[str, str, int, int]) -> tuple:
    wrapper, label, devices, batch = col
    return (wrapper != "none", wrapper, devices, label, batch)


def _chunks(cols: list, limit: int) -> list[list]:
    """Columns cut into tables of at most `limit`, one wrapper's columns kept
    together where they fit in one table."""
    parts: list[list] = [[]]
    for wrapper in dict.fromkeys(c[0] for c in cols):
        mine = [c for c in cols if c[0] == wrapper]
        if parts[-1] and len(parts[-1]) + len(mine) > limit and len(mine) <= limit:
            parts.append([])
        for c in mine:
            if len(parts[-1]) >= limit:
                parts.append([])
            parts[-1].append(c)
    return [p for p in parts if p]


LEGEND = ("Each entry: ok with validation accuracy (val) and steady-state samples/s (median of epochs 2..N over "
          "repeats), or the status and its footnote: F = failure family, U = why it did not run. Columns: "
          "wrapper-cN = N virtual CPU devices, wrapper-gN = N GPUs. Empty: the matrix has no such cell.")


def _left_out(at: dict, ran: set, envs: list[str], ctx: Context) -> str:
    """Which stacks and columns a table leaves out because nothing ran there,
    by name, with the footnotes that say why."""
    def keys(pairs) -> str:
        found = {ctx.key_of[at[k].first.cell] for k in pairs if at[k].first.cell in ctx.key_of}
        return ", ".join(sorted(found, key=lambda k: (k[0], int(k[1:]))))

    def named(names: list[str]) -> str:
        return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more"

    parts = []
    gone_envs = sorted({e for e, _ in at} - set(envs), key=ctx.order)
    if gone_envs:
        parts.append(f"stack{'s' if len(gone_envs) > 1 else ''} {named(gone_envs)} "
                     f"({keys(k for k in at if k[0] in gone_envs)})")
    shown_cols = {c for _, c in ran}
    gone_cols = sorted({c for e, c in at if e in envs} - shown_cols, key=_column_key)
    if gone_cols:
        labels = list(dict.fromkeys(c[1] for c in gone_cols))
        parts.append(f"column{'s' if len(labels) > 1 else ''} {named(labels)} "
                     f"({keys(k for k in at if k[0] in envs and k[1] in gone_cols)})")
    return f"Left out, nothing ran there on this host: {'; '.join(parts)}." if parts else ""


def compatibility(results: list[Result], ctx: Context | None = None, limit: int = MAX_COLUMNS) -> list[Table]:
    """One table per workload (of one run): stacks as rows, in version order;
    wrapper x devices (x batch size, where the workload ran several) as
    columns. Stacks and columns where nothing ran on this host are left out
    and counted in the note: their reason is one line under "Not run"."""
    ctx = ctx or context(results)
    by_workload: dict[tuple[str, str], list[analysis.Group]] = defaultdict(list)
    for g in analysis.groups(results).values():
        by_workload[(analysis.run_of(g.first), analysis.workload_of(g.first))].append(g)
    out = []
    for (run, workload), gs in sorted(by_workload.items()):
        at: dict[tuple, analysis.Group] = {}
        for g in gs:
            col = (analysis.wrapper_of(g.first), analysis.label_of(g.first), analysis.devices_of(g.first),
                   g.first.batch_size or 0)
            at[(analysis.env_of(g.first), col)] = g
        ran = {k for k, g in at.items() if not all(analysis.not_run(r) for r in g.results)}
        envs = sorted({e for e, _ in ran}, key=ctx.order)
        cols = sorted({c for _, c in ran}, key=_column_key)
        if not envs:
            continue  # nothing of this workload ran here: its reasons are under "Not run"
        batches = sorted({c[3] for c in cols})
        name = f"{workload} ({Path(run).stem})" if run else workload
        note = _left_out(at, ran, envs, ctx)
        if not out:
            note = LEGEND + (" " + note if note else "")
        parts = _chunks(cols, limit)
        for n, part in enumerate(parts, 1):
            title = f"Compatibility: {name}" + (f", batch {batches[0]}" if len(batches) == 1 else "")
            if len(parts) > 1:
                title += f" (part {n} of {len(parts)})"
            headers = [label if len(batches) == 1 else f"{label} b{batch}" for _, label, _, batch in part]
            table = Table(title, ["stack"] + headers, note=note)
            for env in envs:
                row = [Entry(ctx.labels.get(env, env))]
                for col in part:
                    g = at.get((env, col))
                    row.append(group_summary(g, ctx) if g else Entry(""))
                table.rows.append(row)
            out.append(table)
    return out


def stacks_table(results: list[Result], ctx: Context | None = None) -> Table:
    ctx = ctx or context(results)
    table = Table("Stacks", ["environment", "Python", "TensorFlow", "Keras", "API", "NumPy", "cells"],
                  note="The versions each environment's cells saw from inside, in version order. Where no cell "
                       "got that far, the footnotes say why.")
    cells_of: dict[str, list[str]] = defaultdict(list)
    for r in results:
        cells_of[analysis.env_of(r)].append(r.cell)
    for name, st in ctx.stacks.items():
        s = st.seen
        if not s.has_versions:
            keys = sorted({ctx.key_of[c] for c in cells_of[name] if c in ctx.key_of}, key=lambda k: (k[0], int(k[1:])))
            table.rows.append([Entry(name), Entry("not seen", ref=keys[0] if keys else None)]
                              + [Entry("") for _ in range(4)] + [Entry(str(st.cells))])
            continue
        table.rows.append([Entry(name)]
                          + [Entry(getattr(s, k) or "-") for k in ("python", "tensorflow", "keras")]
                          + [Entry((s.api or "-") + (f" ({s.backend})" if s.api == "keras3" else "")),
                             Entry(s.numpy or "-"), Entry(str(st.cells))])
    return table


def _stack_names(envs: list[str], ctx: Context) -> str:
    envs = sorted(envs, key=ctx.order)
    return ", ".join(envs) if len(envs) <= 6 else ", ".join(envs[:5]) + f" and {len(envs) - 5} more"


def failure_families(results: list[Result], ctx: Context | None = None) -> Table:
    ctx = ctx or context(results)
    table = Table("Failure families", ["", "status", "signature", "cells", "environments", "example"],
                  note="One row per normalised error signature (the root cause, with paths, numbers and addresses "
                       "stripped), across stacks and wrappers. The example's page holds the whole message and "
                       "traceback.")
    for fam in ctx.families:
        table.rows.append([Entry(fam["key"], anchor=fam["key"], mark=fam["statuses"][0]),
                           Entry(", ".join(fam["statuses"])), Entry(cut(fam["signature"], 2 * CUT)),
                           Entry(str(len(fam["cells"]))), Entry(_stack_names(fam["environments"], ctx)),
                           Entry(fam["cells"][0], link=fam["cells"][0])])
    return table


def not_run(results: list[Result], ctx: Context | None = None) -> Table:
    ctx = ctx or context(results)
    table = Table("Not run on this host", ["", "status", "reason", "cells", "environments", "example"],
                  note="Cells the host or the environment refused before anything ran, one row per reason.")
    for reason in ctx.reasons:
        table.rows.append([Entry(reason["key"], anchor=reason["key"], mark=reason["status"]),
                           Entry(reason["status"]), Entry(cut(reason["reason"], 2 * CUT)),
                           Entry(str(len(reason["cells"]))),
                           Entry(_stack_names(reason["environments"], ctx)),
                           Entry(reason["cells"][0], link=reason["cells"][0])])
    return table


def _per_workload(rows: list[dict], ctx: Context) -> dict[tuple[str, str], list[dict]]:
    """Rows split by (run, workload), stacks in version order within each:
    one table per workload keeps each narrow enough to read."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in sorted(rows, key=lambda row: ctx.order(row["environment"])):  # stable: keeps the rest of the order
        out[(row.get("run") or "", row["workload"])].append(row)
    return dict(sorted(out.items()))


def _name(run: str, workload: str) -> str:
    return f"{workload} ({Path(run).stem})" if run else workload


def _acc(acc: Spread | None, val: Spread | None) -> str:
    return f"{_fmt(acc)} / {_fmt(val)}"


def seed_comparison(results: list[Result], ctx: Context | None = None) -> list[Table]:
    """Seed 000's table, one per workload: 1 device next to N at each batch."""
    ctx = ctx or context(results)
    note = ("acc / val: training and validation accuracy after the last epoch. s/epoch: median of the steady epochs "
            f"[min-max]. Flags: degraded = validation accuracy more than {analysis.ACCURACY_TOLERANCE} below 1 "
            "device; slower = N devices take longer per epoch than the slowest 1-device epoch. Virtual CPU devices "
            "share the same cores: their timings show overhead, not GPU speedups. N-device cells that did not run "
            "are left out (see Not run).")
    rows = [row for row in analysis.seed_comparison(results) if row["status"].split()[0] not in analysis.NOT_RUN]
    tables = []
    for (run, workload), mine in _per_workload(rows, ctx).items():
        epochs = sorted({row["epochs"] for row in mine if row["epochs"]})
        title = f"1 device against N (seed 000): {_name(run, workload)}" + (
            f", {epochs[0]} epochs" if len(epochs) == 1 else "")
        table = Table(title, ["stack", "batch", "parallelism", "acc / val 1", "s/epoch 1", "acc / val N",
                              "s/epoch N", "time N/1", "flags"], note=note if not tables else "")
        for row in mine:
            flags = [f for f in ("degraded", "slower") if row[f]]
            failed = row["status"] != OK
            table.rows.append([
                Entry(ctx.labels.get(row["environment"], row["environment"])), Entry(str(row["batch"])),
                Entry(row["parallelism"]), Entry(_acc(row["acc_1"], row["val_acc_1"])),
                Entry(_fmt(row["seconds_1"]), link=row["baseline_cell"]),
                Entry(row["status"], link=row["cell"], mark=row["status"].split()[0],
                      ref=ctx.key_of.get(row["cell"])) if failed else Entry(_acc(row["acc_n"], row["val_acc_n"])),
                Entry("" if failed else _fmt(row["seconds_n"]), link=None if failed else row["cell"]),
                Entry(f"{row['time_ratio']:.2f}" if row["time_ratio"] else "-"),
                Entry(" ".join(flags), mark="flag" if flags else None),
            ])
        tables.append(table)
    return tables


def scaling(results: list[Result], ctx: Context | None = None) -> list[Table]:
    """Seeds 003/004, one table per workload: samples/s per device count."""
    ctx = ctx or context(results)
    note = ("Speedup: samples/s against 1 device at the same per-device batch; efficiency = speedup / devices. "
            "Only series that ran on at least two device counts.")
    rows = [row for row in analysis.scaling(results) if row["status"].split()[0] not in analysis.NOT_RUN]
    counts: dict[tuple, set] = defaultdict(set)
    for row in rows:
        if row["status"] == OK:
            counts[(row["run"], row["environment"], row["workload"])].add(row["devices"])
    rows = [row for row in rows if len(counts.get((row["run"], row["environment"], row["workload"]), ())) >= 2]
    tables = []
    for (run, workload), mine in _per_workload(rows, ctx).items():
        table = Table(f"Scaling with the device count (seeds 003/004): {_name(run, workload)}",
                      ["stack", "wrapper", "batch", "devices", "status", "samples/s", "s/epoch", "speedup",
                       "efficiency", "val acc"], note=note if not tables else "")
        for row in mine:
            ok = row["status"] == OK
            sps = row["samples_per_sec"]
            table.rows.append([
                Entry(ctx.labels.get(row["environment"], row["environment"])),
                Entry(row["wrapper"]), Entry(f"{row['batch']} ({row['policy']})"), Entry(str(row["devices"])),
                Entry(row["status"], link=row["cell"], mark=row["status"].split()[0],
                      ref=None if ok else ctx.key_of.get(row["cell"])),
                Entry(f"{fmt_si(sps.median)} [{fmt_si(sps.lo)}-{fmt_si(sps.hi)}]" if ok and sps else "-"),
                Entry(_fmt(row["epoch_seconds"]) if ok else "-"),
                Entry(f"{row['speedup']:.2f}" if row["speedup"] else "-"),
                Entry(f"{row['efficiency']:.0%}" if row["efficiency"] else "-"),
                Entry(_fmt(row["val_accuracy"]) if ok else "-"),
            ])
        tables.append(table)
    return tables


def drifted_controls(results: list[Result]) -> Table:
    table = Table("Control cells that drifted", ["cell", "expected", "got", "why it was expected"],
                  note="A control cell's known answer (a status, or a value) is written in its matrix; "
                       "these no longer give it.")
    for r in analysis.drifted_controls(results):
        want = r.expected
        got = r.failure_text
        failed_values = [v for v in want.values if v.met is False]
        if failed_values:  # a value expectation (harness/status/values.py): the numbers are the finding
            for v in failed_values:
                peer = f" ({v.peer.split('/', 1)[0]})" if v.peer else ""
                wanted = f"{v.metric} = {v.want}{peer}"
                table.rows.append([Entry(r.cell, link=r.cell, mark="flag"), Entry(wanted),
                                   Entry(cut(f"{v.metric} = {v.got}")),
                                   Entry(v.why or want.why or v.detail or "")])
            if not want.status or r.status == want.status:
                continue
        table.rows.append([Entry(r.cell, link=r.cell, mark="flag"),
                           Entry((want.status or "") + (f" '{want.signature}'" if want.signature else "")),
                           Entry(cut(got if got.startswith(r.status) else f"{r.status} {got}".strip())),
                           Entry(want.why or "")])
    return table


def report(results: list[Result]) -> list[Table]:
    """Every table of a published report, in reading order: what drifted,
    which stacks, one compatibility table per workload, then the footnotes
    those point at (failure families, reasons for not running), then the
    seed questions (1 device against N, scaling)."""
    ctx = context(results)
    return ([drifted_controls(results), stacks_table(results, ctx)] + compatibility(results, ctx)
            + support_grids(results, ctx)
            + [failure_families(results, ctx), not_run(results, ctx)] + seed_comparison(results, ctx)
            + scaling(results, ctx))


def summary(results: list[Result]) -> list[Table]:
    """What `run` prints at the end: the compatibility tables and their footnotes."""
    ctx = context(results)
    return compatibility(results, ctx) + [failure_families(results, ctx), not_run(results, ctx)]


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
    if diff.get("metric_changes"):  # numbers users' scripts reported (report/reported.py)
        t = Table("Reported numbers that changed", ["cell", "metric", "run A", "run B"])
        for e in diff["metric_changes"]:
            t.rows.append([Entry(e["cell"]), Entry(e["metric"]), Entry(f"{e['a_value'].median:.6g}"),
                           Entry(f"{e['b_value'].median:.6g}")])
        tables.append(t)
    return tables


def support_grids(results: list[Result], ctx: Context | None = None) -> list[Table]:
    """Where a matrix swept a package's releases: releases (PEP 440 order) x parallelism,
    each entry one word -- ok, degraded (N devices lost accuracy against 1), or the
    status with its footnote -- the shape of a compatibility table a project publishes."""
    ctx = ctx or context(results)
    out = []
    for (run, workload, package, stack), rows in analysis.trend_series(results).items():
        batches = sorted({r["batch"] for r in rows})
        cols = list(dict.fromkeys((r["label"], r["batch"]) for r in sorted(
            rows, key=lambda r: (r["wrapper"] != "none", r["wrapper"], r["devices"], r["label"], r["batch"]))))
        at = {(r["version"], r["label"], r["batch"]): r for r in rows}
        versions = sorted({r["version"] for r in rows}, key=release_key)
        title = f"Support: {workload} ({Path(run).stem}) across {package} releases, {stack.replace('*', 'X')}"
        headers = [label if len(batches) == 1 else f"{label} b{batch}" for label, batch in cols]
        first = {}
        for r in rows:
            first.setdefault(r["version"], r)
        dated = any(r["as_of"] for r in rows)
        table = Table(title, [package] + headers + ["tested with"] + (["resolved as of"] if dated else []),
                      note="One word per cell: ok, degraded (N devices more than "
                           f"{analysis.ACCURACY_TOLERANCE} validation accuracy below 1 device), drifted (ok, "
                           "but not the value its matrix expects), or the status with its footnote. Releases in "
                           "version order. Tested with: the versions the cells saw"
                           + ("; resolved as of: everything not pinned resolved as the index was then (the "
                              f"release's upload, README: Version ranges); {NO_CUTOFF}: the newest releases the "
                              "day its environment was built." if dated else "."))
        for v in versions:
            row = [Entry(v)]
            for label, batch in cols:
                r = at.get((v, label, batch))
                if r is None:
                    row.append(Entry(""))
                elif r["word"] == "ok":
                    word = "drifted" if r["drifted"] else "degraded" if r["degraded"] else "ok"
                    row.append(Entry(word, link=r["cell"], mark="ok" if word == "ok" else "flag"))
                else:
                    row.append(Entry(r["status"], link=r["cell"], mark=r["word"], ref=ctx.key_of.get(r["cell"])))
            row.append(Entry(next((r["with"] for r in rows if r["version"] == v and r["with"]), "")))
            if dated:  # each row as its record says: a release of the range may have been run without one
                row.append(Entry(first[v]["as_of"] or NO_CUTOFF))
            table.rows.append(row)
        out.append(table)
    return out
