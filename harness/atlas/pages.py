"""The atlas's pages: the one a reader scans (releases down, workloads and device counts across,
filters above) and a page per row.

The table is HTML inside the Markdown page, so each row carries what the filters read (its
line, TensorFlow and Keras minors, backend, Python) and each entry its workload; the filters
are a few lines of script that hide rows and columns, and keep their state in the address
(``atlas.html#line=keras3-jax&workload=gru-2x32``: a link a reader can share). Every entry says
its status; a passing one its validation accuracy (median of the repeats, their range when
several) and steady samples/s; a failing one points at its failure family, listed below the
table; a multi-device entry whose devices did not all train says so instead of a number.
"""

from __future__ import annotations

import html
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from harness import status as st
from harness.atlas import records
from harness.atlas.changes import grouped, standing
from harness.atlas.rows import LINES, Row, columns, out_of_order, parse_version, twins
from harness.claims import Change
from harness.htmlpage import FILTER_BAR_JS

ROWS = "rows"
# The pages' commands are exercised by the atlas's tests (the docs' convention: tests/test_docs.py)
COVERED = "<!-- covered-by: tests/test_atlas.py -->"
FILTERS = ("line", "tensorflow", "keras", "backend", "python", "workload")


def main_page(out: Path) -> Path:
    """docs/atlas/ -> docs/atlas.md: the page sits beside its folder."""
    return out.parent / f"{out.name}.md"


def write(table: list[Row], found: list[Change], about: dict, out: Path, plots: list[str],
          checks: list[dict]) -> list[Path]:
    families = _families(table)
    written = []
    (out / ROWS).mkdir(parents=True, exist_ok=True)
    keep = set()
    for row in table:
        path = out / ROWS / f"{row.slug}.md"
        path.write_text(_row_page(row, found, families, out.name))
        keep.add(path.name)
        written.append(path)
    for stale in (out / ROWS).glob("*.md"):
        if stale.name not in keep:
            stale.unlink()
    page = main_page(out)
    page.write_text(_main(table, found, about, families, out.name, plots, checks))
    written.append(page)
    return written


# -- failure families: numbered once, for every page ---------------------------------------
def _families(table: list[Row]) -> dict[str, int]:
    """Each failure or unsupported reason, numbered in order of first appearance."""
    out: dict[str, int] = {}
    for row in table:
        for entry in row.entries.values():
            if entry.status != st.OK and entry.family:
                out.setdefault(entry.family, len(out) + 1)
    return out


def _cell(row: Row, col: str, families: dict[str, int]) -> str:
    entry = row.entries.get(col)
    workload = html.escape(col.split(" ")[0])
    if entry is None:  # the stack's matrix has no such cell: the filters hide a column of these
        return f'<td class="na" data-workload="{workload}">&middot;</td>'
    status = entry.status
    if status == st.OK:
        acc, speed = entry.values("val_accuracy"), entry.values("samples_per_sec")
        asked, trained = int(entry.records[0]["devices"] or 1), entry.devices_trained
        if asked > 1 and trained is not None and trained < asked:
            text = f"ok, {trained} of {asked} devices trained"
        else:
            text = "ok " + _said(acc, "{:.2f}".format, "<small>[{:.2f}-{:.2f}]</small>".format) if acc else "ok"
            if speed:
                text += f"<br><small>{_said(speed, _k)}/s</small>"
        return f'<td class="s-ok" data-workload="{workload}">{text}</td>'
    number = families.get(entry.family)
    mark = f' <a href="#family-{number}"><sup>{number}</sup></a>' if number else ""
    return f'<td class="s-{html.escape(status)}" data-workload="{workload}">{html.escape(status)}{mark}</td>'


# A median and its range are said of three runs or more; of two runs, both values (the midpoint of two
# is no median a reader can weigh); of one, the value. `atlas audit` holds the page to it (few runs).
MEDIAN_FROM = 3


def _said(values: list[float], show: Callable[[float], str],
          spread: Callable[[float, float], str] | None = None) -> str:
    """`values` as the page states them, each by `show`: the median (and, by `spread`, its range)
    from MEDIAN_FROM runs on, each value below that."""
    if len(values) >= MEDIAN_FROM:
        return show(statistics.median(values)) + (f" {spread(min(values), max(values))}" if spread else "")
    return ", ".join(show(v) for v in values)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _k(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2]) if version else ""


# -- the main page -------------------------------------------------------------------------
def _main(table, found, about, families, folder: str, plots: list[str], checks: list[dict]) -> str:
    cols = columns(table)
    cost = about.get("cost") or {}
    counts = ", ".join(f"{n} {s}" for s, n in (about.get("statuses") or {}).items())
    parts = [
        "# The compatibility atlas",
        "",
        "What happens when a model **trains** on each TensorFlow and Keras release -- not what was "
        "built or tested upstream, but whether the seeds' workloads (a 2 x 32 GRU and LSTM classifier, the "
        "16 x 16 convnet, and CuDNNGRU where the stack has it) run, to what validation accuracy and how "
        "fast, on one device and on two through each era's multi-device wrappers. Every environment is "
        "resolved as of its release (the cut-off column: the contemporaries a user got that week).",
        "",
        f"**{about.get('rows', len(table))} stacks, {about.get('distinct_cells', 0)} cells, "
        f"{about.get('cells', 0)} records** ({counts}: a record per run, a cell's repeats included); "
        f"**{_count(sum(1 for c in found if c.before), 'change')}** between neighbouring releases, "
        f"**{_count(sum(1 for c in found if not c.before), 'finding')}** within one row. Data: "
        f"[{folder}/atlas.json]({folder}/atlas.json) and [{folder}/atlas.csv]({folder}/atlas.csv) "
        f"(one record per run of a cell; schema {records.SCHEMA}, [its fields](reference/atlas-data.md)), "
        f"[{folder}/changes.json]({folder}/changes.json); new rows and changes as an "
        f"[Atom feed]({folder}/feed.xml).",
        "",
        "## How it was obtained",
        "",
        "`python -m harness atlas run` (every environment of the matrices under `matrices/atlas/`, one "
        "at a time, each removed once its cells are done), then `python -m harness atlas publish`; "
        f"engine {', '.join(about.get('engines') or ['?'])}, on {'; '.join(about.get('hosts') or ['?'])} "
        "(two virtual CPU devices stand for two GPUs), "
        f"on {', '.join(about.get('days') or ['?'])}, harness commit "
        f"{', '.join(about.get('harness_commits') or ['?'])}. Each one-device cell ran three times, each "
        "from its own seed on the same data: its range is the run-to-run spread that a difference must "
        f"leave before the atlas claims it. {_two_device_seeds(table)} Cells ran two at a time, one core "
        "each, so samples/s compare within a row; a speed shift between rows run at different moments is a "
        "candidate (`?`) until `atlas explain` runs both releases in one session and confirms or refutes it "
        "(`? unresolved` where, side by side, the medians moved as claimed past the bisect's threshold while "
        "its ranges overlapped). Chance is 0.25 (four classes).",
        "",
    ]
    parts += _cost_section(about.get("runs") or ([cost] if cost else []))
    parts += ["## The table", "", "Each entry: the status; for `ok`, the validation accuracy (median of the "
              "repeats [their range]; each value where fewer than three passed) and the steady samples/s "
              "(likewise). The stack's name leads to its page (every "
              "seed's value, the versions it ran, the command that runs it again), a superscript to the "
              "failure family below.", "",
              STYLE, "", _filters(), "", _table(table, cols, families, folder), "", _script(), ""]
    parts += _out_of_order_section(table)
    parts += _changes_section(table, found, folder)
    parts += _families_section(table, families)
    parts += _notes_section(checks, table, folder)
    if plots:
        parts += ["## Plots", ""]
        parts += [f"![{name}]({folder}/plots/{name})" for name in plots]
        parts.append("")
    parts += ["## Keeping it current", "", "Each matrix's last range is open (`>=2.21`, `>=3.14`), so "
              "`python -m harness atlas watch`, run daily (cron, a CI schedule), measures a new release the day "
              "it reaches the index: a new row, its changes against the row before, each new change explained "
              "(bisected, or followed layer by layer) and linked, an entry in the feed; it exits 1 when "
              "something new changed. A new release costs one environment: "
              f"{cost.get('seconds_per_environment_median', '?')} s (median) on this host, "
              f"{cost.get('peak_disk_gb', '?')} GB of disk at most while it runs, nothing after.",
              ""]
    parts += ["## Look up your own pins", "", COVERED, "```console",
              "python -m harness atlas lookup -r requirements.txt", "```", "",
              "answers with the measured rows nearest the file's pins and every change the atlas "
              "knows between them and the newest row of their line (`--target tensorflow==2.21` for another).",
              ""]
    return "\n".join(parts)


def out_of_order_line(line: str, a: Row, b: Row) -> str:
    """The page's sentence for two neighbours whose days run backwards (`rows.out_of_order`)."""
    return (f"- {LINES.get(line, line)}: `{a.label}` resolved as of {(a.stack.get('cutoff') or '')[:10]}, "
            f"then `{b.label}` as of {(b.stack.get('cutoff') or '')[:10]}")


def _out_of_order_section(table: list[Row]) -> list[str]:
    """Neighbours resolved as of days out of order, said where they are (`atlas audit`: cut-offs)."""
    found = out_of_order(table)
    if not found:
        return []
    return ["## Rows resolved out of order", "",
            "Each row is resolved as of its release's day, so a line's rows, in release order, need not be in "
            "day order: a patch of an older minor can come out after the next minor, and its contemporaries "
            "(NumPy, h5py, ...) are then newer than the next row's. Between these neighbours the days run "
            "backwards, so a change between them may be the contemporaries' as much as the release's (the "
            "change's own evidence, where it has any, names every package that moved):", "",
            *(out_of_order_line(line, a, b) for line, a, b in found), ""]


def _cost_section(runs: list[dict]) -> list[str]:
    """What each run cost, as its log measured it; nothing where the data carries no log."""
    if not runs:
        return []
    return ["What each run cost, from its log (`atlas-run.jsonl`: every course of each environment -- a "
            "row extended later, with more seeds, counts each of its runs -- its builds and its cells; peak "
            "disk: the largest environment with its own uv cache, the most the run holds at once). A run "
            "measures a slice (a matrix added, rows measured again); the first line without a start is "
            "the run before runs were listed. The host did other work beside some runs, so the times are "
            "an upper bound for a quiet host of its size.", "",
            "| run started | environments | cells | hours | environments/hour | cells/hour | build (median s) | "
            "per environment (median s) | peak disk (GB) |", "|---|---|---|---|---|---|---|---|---|",
            *(f"| {(c.get('started') or '-')[:16].replace('T', ' ')} | {c.get('environments')} | {c.get('cells')} | "
              f"{c.get('hours')} | {c.get('environments_per_hour')} | {c.get('cells_per_hour')} | "
              f"{c.get('build_seconds_median')} | {c.get('seconds_per_environment_median')} | "
              f"{c.get('peak_disk_gb')} |" for c in runs), ""]


def _families_section(table: list[Row], families: dict[str, int]) -> list[str]:
    """Each failure family once, under the number the table's superscripts link to, with how many
    cells it holds and the first of them."""
    parts = ["## Failure families and reasons", ""]
    cells_of = defaultdict(list)
    for row in table:
        for col, entry in row.entries.items():
            if entry.family in families and entry.status != st.OK:
                cells_of[entry.family].append(f"{row.label} {col}")
    for family, number in families.items():
        where = cells_of[family]
        parts.append(f'<p id="family-{number}"><sup>{number}</sup> {html.escape(family)} '
                     f'<small>({len(where)} cells; first: {html.escape(where[0]) if where else "-"})</small></p>')
        parts.append("")
    return parts


def _two_device_seeds(table) -> str:
    """How many seeds the two-device cells ran, in words, from the records."""
    seeds = {row.key: max((len(e.records) for c, e in row.entries.items() if not c.endswith("-c1")), default=0)
             for row in table}
    most = max(seeds.values(), default=0)
    if most <= 1 or all(n == most for n in seeds.values() if n):
        return f"Two-device cells ran {'once' if most <= 1 else f'{most} times'}, each from its own seed."
    rows = sorted((r for r in table if seeds[r.key] == most), key=Row.order)
    return (f"Two-device cells ran {most} times, each from its own seed, from {rows[0].label} to {rows[-1].label} "
            "(where one seed on two devices had parted from one device); once elsewhere.")


STYLE = """<style>
.wy-nav-content { max-width: none; }
.atlas-filters { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; margin-bottom: 1em; }
table.atlas { border-collapse: collapse; font-size: 0.85em; }
table.atlas th, table.atlas td { border: 1px solid #e1e4e5; padding: 0.25em 0.45em; vertical-align: top; }
table.atlas tr.line th { background: #f3f6f6; text-align: left; }
table.atlas td.s-ok { background: #eef8ee; }
table.atlas td.s-error, table.atlas td.s-crash, table.atlas td.s-timeout, table.atlas td.s-oom,
table.atlas td.s-flaky { background: #fbeaea; }
table.atlas td.s-unsupported, table.atlas td.s-unavailable { background: #f6f6f6; color: #777; }
</style>"""


def _filters() -> str:
    boxes = "".join(f'<label>{name} <select data-filter="{name}"><option value="">all</option></select></label> '
                    for name in FILTERS)
    return f'<div class="atlas-filters" id="atlas-filters">{boxes.strip()}</div>'


def _table(table: list[Row], cols: list[str], families: dict[str, int], folder: str) -> str:
    head = "".join(f'<th data-workload="{html.escape(c.split(" ")[0])}">{html.escape(c.split(" ")[0])}<br>'
                   f'<small>{html.escape(c.split(" ", 1)[1])}</small></th>' for c in cols)
    out = ['<table class="atlas" id="atlas-table">',
           f"<thead><tr><th>stack</th><th>Python</th><th>cut-off</th>{head}</tr></thead>", "<tbody>"]
    current = None
    for row in table:
        if row.line != current:
            current = row.line
            out.append(f'<tr class="line" data-line="{row.line}"><th colspan="{3 + len(cols)}">'
                       f"{html.escape(LINES.get(row.line, row.line))}</th></tr>")
        s = row.stack
        data = {"line": row.line, "tensorflow": _minor(s.get("tensorflow")), "keras": _minor(s.get("keras")),
                "backend": s.get("backend") or "tensorflow", "python": _minor(s.get("python"))}
        attrs = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
        cells = "".join(_cell(row, c, families) for c in cols)
        out.append(f'<tr {attrs}><td><a href="{folder}/{ROWS}/{row.slug}.html">{html.escape(row.label)}</a></td>'
                   f'<td>{html.escape(s.get("python") or "")}</td><td>{html.escape((s.get("cutoff") or "")[:10])}</td>'
                   f"{cells}</tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def _script() -> str:
    """The filters: options from the rows' data, state in the address's fragment (`FILTER_BAR_JS`)."""
    return "<script>\n" + FILTER_BAR_JS + """
(function () {
  var table = document.getElementById("atlas-table"), box = document.getElementById("atlas-filters");
  if (!table || !box) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function values(name) {
    var seen = {};
    if (name === "workload") {
      table.querySelectorAll("th[data-workload]").forEach(function (th) { seen[th.dataset.workload] = 1; });
    } else {
      rows.forEach(function (r) { if (r.dataset[name]) { seen[r.dataset[name]] = 1; } });
    }
    return Object.keys(seen).sort(function (a, b) { return a.localeCompare(b, undefined, {numeric: true}); });
  }
  function apply(want) {
    var shown = 0;
    rows.forEach(function (r) {
      if (r.classList.contains("line")) { r.hidden = !!want.line && r.dataset.line !== want.line; return; }
      var keep = Object.keys(want).every(function (k) { return k === "workload" || r.dataset[k] === want[k]; });
      r.hidden = !keep; if (keep) { shown += 1; }
    });
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var first = heads.length - table.querySelectorAll("th[data-workload]").length;
    heads.forEach(function (th, i) {
      if (i < first) { return; }
      var cells = rows.filter(function (r) { return !r.hidden && !r.classList.contains("line"); })
        .map(function (r) { return r.cells[i]; });
      var empty = cells.every(function (c) { return !c || c.classList.contains("na"); });
      var off = empty || (!!want.workload && th.dataset.workload !== want.workload);
      th.hidden = off;
      rows.forEach(function (r) { if (!r.classList.contains("line") && r.cells[i]) { r.cells[i].hidden = off; } });
    });
    table.dataset.shown = String(shown);
  }
  filterBar(Array.prototype.slice.call(box.querySelectorAll("select")), values, apply);
})();
</script>"""


def _changes_section(table: list[Row], found: list[Change], folder: str) -> list[str]:
    by_key = {r.key: r for r in table}
    out = ["## Changes between neighbouring releases", "",
           "Breaks, mends and changed failures (status), accuracy shifts past the seeds' spread, wrappers that "
           "appear or go. A speed shift marked `?` is a candidate: its rows ran at different moments on a shared "
           "host, so it stands only once `python -m harness atlas explain` has run both releases side by side "
           "(its evidence then links the bisect); `? unresolved`: side by side its medians moved as claimed, past "
           "the bisect's threshold, while the bisect's ranges overlapped, so it is neither confirmed nor refuted.",
           ""]
    moved = [c for c in found if c.before is not None and c.kind != "numpy"]
    if not moved:
        out += ["None: on every line, each column keeps its status, and its accuracy and speed stay within "
                "the spread its repeats measured.", ""]
    for line in LINES:
        mine = [c for c in moved if c.where["line"] == line]
        if not mine:
            continue
        out += [f"### {LINES[line]}", "", "| change | from | to | what | evidence |", "|---|---|---|---|---|"]
        for group in grouped(mine):
            c = group[0]
            kind = {"candidate": f"{c.kind}?", "refuted": f"~~{c.kind}~~ refuted",
                    "unresolved": f"{c.kind}? unresolved"}.get(standing(c) or "", c.kind)
            what = c.detail if len(group) == 1 else (
                f"{', '.join(g.where['column'] for g in group)}: {c.detail.split(': ', 1)[1]}")
            out.append(f"| {kind} | {_link(by_key.get(c.before), folder)} | {_link(by_key.get(c.after), folder)} | "
                       f"{_md(what)} | {_group_evidence(group)} |")
        out.append("")
    out += _boundary_section(table, found, folder)
    devices = [c for c in found if c.before is None]
    out += ["## Two devices against one", ""]
    if not devices:
        out += ["On every stack, every two-device cell that trained reached the accuracy of the same stack on "
                "one device (within the range of its three seeds, widened by 0.02), on both devices.", ""]
    else:
        out += ["A two-device cell is set against the same stack on one device: *parts* when the median of its "
                "seeds lies outside the one-device range (widened by 0.02); *seed-sensitive* when only some of "
                "its seeds do, while the same seeds train within the range on one device. The evidence follows "
                "the seed that parts most, on one device and on two, layer by layer (`harness diverge`).", "",
                "| stack | finding | what | evidence |", "|---|---|---|---|"]
        out += [f"| {_link(by_key.get(c.after), folder)} | {'seed-sensitive' if c.kind == 'devices-seed' else 'parts'} "
                f"| {_md(c.detail)} | {_evidence(c)} |" for c in devices]
        out.append("")
    return out


def _boundary_section(table: list[Row], found: list[Change], folder: str) -> list[str]:
    """Each NumPy-1 row beside its NumPy-2 twin: what differs, or that nothing does."""
    variants = [r for r in table if r.line != r.base_line]
    if not variants:
        return []
    by_key = {r.key: r for r in table}
    on_numpy2 = [r for r in table if r.line == r.base_line and (v := parse_version(r.stack.get("numpy")))
                 and v.major >= 2]
    twinned = [t for t in on_numpy2 if any(twins(v, t) for v in variants)]
    out = ["## The NumPy 1/2 boundary", "", f"{len(twinned)} of the {len(on_numpy2)} stacks whose own week resolved "
           "NumPy 2 measured again with `numpy<2` (on Python 3.12, NumPy 1's last): their columns against the same "
           "stack's with NumPy 2. The others have no NumPy 1 row.", "",
           "| NumPy 1 kept | NumPy 2 | what differs |", "|---|---|---|"]
    for row in variants:
        mine = [c for c in found if c.kind == "numpy" and c.before == row.key]
        twin = by_key.get(mine[0].after) if mine else next((t for t in table if twins(row, t)), None)
        what = "; ".join(_md(c.detail) for c in mine) or ("nothing: the same statuses, accuracies within the seeds' "
                                                          "range" if twin else "no NumPy 2 row of this stack")
        if twin and row.stack.get("jax") != twin.stack.get("jax"):  # NumPy 1 held JAX back too: say so
            what += f" (JAX {row.stack.get('jax')} against {twin.stack.get('jax')}: the newest beside NumPy 1)"
        out.append(f"| {_link(row, folder)} | {_link(twin, folder)} | {what} |")
    out.append("")
    return out


def _notes_section(checks: list[dict], table: list[Row], folder: str) -> list[str]:
    by_key = {r.key: r for r in table}
    out = ["## Checked against the release notes", "",
           "Where a row disagrees with what a project's release notes say, the atlas is wrong until shown "
           "otherwise. Each publication holds every row against these notes:", "",
           "| the notes say | rows | verdict |", "|---|---|---|"]
    for c in checks:
        if not c["rows"]:
            verdict = "no row to check yet"
        elif not c["disagree"]:
            verdict = "every row agrees"
        else:
            verdict = "disagree: " + ", ".join(_link(by_key.get(k), folder) for k in c["disagree"])
        out.append(f"| [{_md(c['says'])}]({c['source']}) | {c['rows']} | {verdict} |")
    out.append("")
    return out


def _link(row: Row | None, folder: str) -> str:
    return f"[{_md(row.label)}]({folder}/{ROWS}/{row.slug}.md)" if row else "-"


def _md(text: str) -> str:
    return html.escape(text).replace("|", "\\|").replace("\n", " ")


def _group_evidence(group: list[Change]) -> str:
    """The first column's evidence, then each other column's own links (its bisect, its layer-by-layer
    record), named by the column: every evidence file the atlas publishes is one a page links."""
    parts = [_evidence(group[0])]
    for g in group[1:]:
        links = [f"[{_md(e['what'])}]({e['link']})" for e in g.evidence if e.get("link")]
        if links:
            parts.append(f"{_md(g.where['column'])}: {'; '.join(links)}")
    return "; ".join(p for p in parts if p != "-") or "-"


def _evidence(change: Change) -> str:
    parts = []
    for e in change.evidence:
        if e.get("link"):
            parts.append(f"[{_md(e['what'])}]({e['link']})")
        elif e.get("command"):
            parts.append(f"{_md(e['what'])}: `{e['command']}`")
        elif e.get("text"):
            parts.append(f"{_md(e['what'])}: {_md(e['text'][:160])}")
    return "; ".join(parts) or "-"


# -- a row's page --------------------------------------------------------------------------
def _row_page(row: Row, found: list[Change], families: dict[str, int], folder: str) -> str:
    s = row.stack
    lines = [f"# {row.label}", "", f"On the line *{LINES.get(row.line, row.line)}*. "
             f"[Back to the atlas](../../{folder}.md).", "",
             "| | |", "|---|---|"]
    for key in ("tensorflow", "keras", "keras_api", "backend", "jax", "numpy", "python"):
        if s.get(key):
            lines.append(f"| {key} | {s[key]} |")
    measured = row.origins
    lines += [f"| resolved as of | {s.get('cutoff') or 'the run day'} |",
              *(f"| matrix, environment | `{m}`, `{e}` |" for m, e in measured), "",
              "Run it again: ", "", COVERED, "```console",
              *(f"python -m harness run {m} --engine venv --only '{e}/*'" for m, e in measured), "```", "",
              "## Cells", "", "| workload | parallelism | status | validation accuracy (each seed) | samples/s | "
              "devices trained | family |", "|---|---|---|---|---|---|---|"]
    for col, entry in row.entries.items():
        workload, par = col.split(" ", 1)
        accs = ", ".join(f"{r['val_accuracy']:.3f}" for r in entry.records if r["val_accuracy"] != "")
        speed = _said(entry.values("samples_per_sec"), _k) or "-"
        number = families.get(entry.family)
        family = (f"[{number}](../../{folder}.md#family-{number}) {_md(entry.family[:120])}"
                  if number and entry.status != st.OK else "")
        lines.append(f"| {workload} | {par} | {entry.status} | {accs or '-'} | "
                     f"{speed} | {entry.devices_trained or '-'} | {family} |")
    mine = [c for c in found if row.key in (c.before, c.after)]
    lines += ["", "## Changes", ""]
    lines += [f"- {c.kind}: {_md(c.detail)}" + (" (from the previous release)" if c.after == row.key and c.before else
                                                 " (at the next release)" if c.before == row.key else "")
              for c in mine] or ["None found at this row."]
    lines.append("")
    return "\n".join(lines)
