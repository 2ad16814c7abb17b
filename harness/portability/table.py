"""The grid as a reader scans it: an HTML table per format, writers down and readers across, inside
a Markdown page of its own (`pages.format_page`: the grid of every atlas stack is too large for one
page), with filters above.

Each row carries its writer's line (standalone Keras 2.2, tf.keras, tf-keras, Keras 3 on each
backend) and each column its reader's, so the filters hide whole lines; each mark carries its
model and verdict, so the filters show one model, or only the pairs that refuse or differ. The
state lives in the address (``portability.html#format=h5&model=gru&verdict=differs``: a link a
reader can share). Every mark's title says what happened: the way that loaded and the difference,
or each way's error."""

from __future__ import annotations

import html

from harness.htmlpage import FILTER_BAR_JS
from harness.portability import judge

MARK = {judge.SAME: "=", judge.DIFFERS: "≠", judge.REFUSES: "✗", judge.UNKNOWN: "·"}
NOT_RUN = "…"   # a pair the grid has not read yet (a grid grows a row and a column at a time)
FILTERS = ("format", "model", "verdict", "writer", "reader")
LINE_NAMES = {"standalone": "Keras 2.2 (standalone)", "tf.keras": "tf.keras", "tf_keras": "tf-keras",
              "keras3-tensorflow": "Keras 3 on TensorFlow", "keras3-jax": "Keras 3 on JAX",
              "keras3-torch": "Keras 3 on PyTorch"}


def line(stack: dict) -> str:
    """The family a stack's files belong to: its Keras API, and Keras 3's backend."""
    api = stack.get("api") or "?"
    return f"keras3-{stack.get('backend') or 'tensorflow'}" if api == "keras3" else api


def html_tables(records: list[dict], names: list[str], stacks: dict[str, dict],
                formats: list[str] | None = None) -> str:
    """The filters, a table per format (`formats`: only those, and then no format box), and the
    script: HTML for the Markdown page."""
    models = sorted({r["model"] for r in records})
    by = {(r["writer"], r["reader"], r["model"], r["format"]): r for r in records}
    read = {(r["writer"], r["reader"]) for r in records}   # a pair read, whatever formats it held
    out = [STYLE, _filters(FILTERS if formats is None else tuple(f for f in FILTERS if f != "format")), ""]
    for fmt in formats or sorted({r["format"] for r in records}):
        writers = [w for w in names if any((w, rd, m, fmt) in by for rd in names for m in models)]
        head = "".join(f'<th data-line="{_e(line(stacks[rd]))}" title="{_e(label(stacks[rd]))}">{_e(rd)}</th>'
                       for rd in names)
        out += [f'<div class="pg" data-format="{_e(fmt)}"><h3>{_e(fmt)}</h3>',
                f'<table class="pg"><thead><tr><th>writer \\ reader</th>{head}</tr></thead><tbody>']
        for w in writers:
            cells = "".join(_cell(by, read, w, rd, fmt, models) for rd in names)
            out.append(f'<tr data-line="{_e(line(stacks[w]))}"><th title="{_e(label(stacks[w]))}">{_e(w)}</th>'
                       f"{cells}</tr>")
        out += ["</tbody></table></div>", ""]
    out.append(SCRIPT)
    return "\n".join(out)


def _cell(by: dict, read: set, writer: str, reader: str, fmt: str, models: list[str]) -> str:
    if (writer, reader) not in read:
        return f'<td class="nr" title="not read yet">{NOT_RUN}</td>'
    marks = []
    for m in models:
        r = by.get((writer, reader, m, fmt))
        if r is None:
            continue  # that stack wrote no such file for this model
        marks.append(f'<span class="v-{r["verdict"]}" data-model="{_e(m)}" data-verdict="{r["verdict"]}" '
                     f'title="{_e(m + ": " + _said(r))}">{MARK[r["verdict"]]}</span>')
    return f"<td>{''.join(marks)}</td>"


def _said(r: dict) -> str:
    if r["verdict"] == judge.SAME:
        return f"same, by {r.get('way')}"
    if r["verdict"] == judge.DIFFERS:
        diff = r.get("max_abs_diff")
        return f"loads by {r.get('way')} but predicts differently" + (f" (largest difference {diff:.3g})"
                                                                       if diff is not None else "")
    if r["verdict"] == judge.UNKNOWN:
        return f"cannot know it: {r.get('reason')}"
    errors = list((r.get("errors") or {}).items())
    if not errors:
        return "refuses"
    way, err = errors[-1]   # the most lenient way's (the last tried); every way's error is in the data
    return f"refuses ({len(errors)} ways); {way}: {(err or '')[:100]}"


def label(stack: dict) -> str:
    """A stack's versions in words (a header's title, a page's list of stacks, a feed entry)."""
    parts = [f"Keras {stack.get('keras')}" if stack.get("keras") else "",
             f"TF {stack.get('tensorflow')}" if stack.get("tensorflow") else "",
             stack.get("backend") if stack.get("backend") not in (None, "tensorflow") else "",
             f"Python {stack.get('python')}" if stack.get("python") else ""]
    return ", ".join(p for p in parts if p)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _filters(names: tuple[str, ...]) -> str:
    boxes = "".join(f'<label>{name} <select data-filter="{name}"><option value="">all</option></select></label> '
                    for name in names)
    return f'<div class="pg-filters" id="pg-filters">{boxes.strip()}</div>'


STYLE = """<style>
.wy-nav-content { max-width: none; }
.pg-filters { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; margin-bottom: 1em; }
table.pg { border-collapse: collapse; font-size: 0.8em; }
table.pg th, table.pg td { border: 1px solid #e1e4e5; padding: 0.2em 0.35em; text-align: center; }
table.pg td.nr { color: #bbb; }
table.pg span.v-same { color: #2a7a2a; } table.pg span.v-unknown { color: #999; }
table.pg span.v-refuses { color: #b03030; font-weight: bold; }
table.pg span.v-differs { background: #ffd8a8; color: #8a3b00; font-weight: bold; }
</style>"""

SCRIPT = "<script>\n" + FILTER_BAR_JS + """
(function () {
  var box = document.getElementById("pg-filters");
  if (!box) { return; }
  var blocks = Array.prototype.slice.call(document.querySelectorAll("div.pg"));
  var sources = {
    format: function () { return blocks.map(function (b) { return b.dataset.format; }); },
    model: function () { return all("span[data-model]", "model"); },
    verdict: function () { return all("span[data-verdict]", "verdict"); },
    writer: function () { return all("tbody tr[data-line]", "line"); },
    reader: function () { return all("thead th[data-line]", "line"); }
  };
  function all(selector, key) {
    var seen = {};
    document.querySelectorAll("div.pg " + selector).forEach(function (n) { seen[n.dataset[key]] = 1; });
    return Object.keys(seen).sort();
  }
  function apply(want) {
    blocks.forEach(function (b) {
      b.hidden = !!want.format && b.dataset.format !== want.format;
      var table = b.querySelector("table"), heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
      var keepCol = heads.map(function (th, i) { return i === 0 || !want.reader || th.dataset.line === want.reader; });
      heads.forEach(function (th, i) { th.hidden = !keepCol[i]; });
      Array.prototype.slice.call(table.tBodies[0].rows).forEach(function (r) {
        r.hidden = !!want.writer && r.dataset.line !== want.writer;
        Array.prototype.slice.call(r.cells).forEach(function (c, i) { c.hidden = !keepCol[i]; });
        r.querySelectorAll("span[data-model]").forEach(function (s) {
          s.hidden = (!!want.model && s.dataset.model !== want.model) ||
                     (!!want.verdict && s.dataset.verdict !== want.verdict);
        });
      });
    });
  }
  filterBar(Array.prototype.slice.call(box.querySelectorAll("select")), function (name) {
    return sources[name]();
  }, apply);
})();
</script>"""
