"""The static site: an index with every table and plot, a page per cell.

Plain HTML with relative links and no script, so it works opened straight
from disk and nothing in a result can run: every text from a result goes
through html.escape.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.htmlpage import e, page
from harness.report.tables import KEY, Table, slug
from harness.results.result import Result


def html_table(table: Table, prefix: str = "") -> str:
    if not table.rows:
        return ""
    out = [f"<h2>{e(table.title)}</h2>"]
    if table.note:
        out.append(f"<p class=\"note\">{e(table.note)}</p>")
    out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in table.headers) + "</tr></thead><tbody>")
    for row in table.rows:
        cells = []
        for c in row:
            text = e(c.text)
            if c.link:
                text = f"<a href=\"{e(prefix + 'cells/' + slug(c.link) + '.html')}\">{text}</a>"
            if c.ref and KEY.match(c.ref):
                text += f" <a class=\"ref\" href=\"#{e(c.ref.lower())}\">{e(c.ref)}</a>"
            cls = f" class=\"{e(c.mark)}\"" if c.mark else ""
            anchor = f" id=\"{e(c.anchor.lower())}\"" if c.anchor and KEY.match(c.anchor) else ""
            cells.append(f"<td{cls}{anchor}>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def index(title: str, intro: list[str], tables: list[Table], plots: list[tuple[str, str]],
          downloads: list[str]) -> str:
    body = [f"<p>{e(line)}</p>" for line in intro]
    body.append("<p>Also as: " + ", ".join(f"<a href=\"{e(d)}\">{e(d)}</a>" for d in downloads) + "</p>")
    body += [html_table(t) for t in tables]
    if plots:
        body.append("<h2>Plots</h2>")
        body += [f"<figure><img src=\"{e(src)}\" alt=\"{e(caption)}\"><figcaption>{e(caption)}</figcaption></figure>"
                 for caption, src in plots]
    return page(title, "\n".join(b for b in body if b))


def cell_page(result: Result, folder: Path | None) -> str:
    """Everything known about one cell: status, error, environment as seen,
    epochs, timing, provenance and the log tails."""
    return page(result.cell, "<p><a href=\"../index.html\">back to the index</a></p>\n" + _cell_body(result, folder))


def cells_page(found: list[tuple[Path | None, Result]]) -> str:
    """One page for a cell id that several runs (results folders) hold: each
    result in its own section, none overwriting another."""
    body = ["<p><a href=\"../index.html\">back to the index</a></p>",
            f"<p>{len(found)} results carry this cell id, one per results folder:</p>"]
    for folder, result in found:
        body.append(f"<h2>{e(folder)}</h2>\n" + _cell_body(result, folder))
    return page(found[0][1].cell, "\n".join(body))


def _cell_body(result: Result, folder: Path | None) -> str:
    err = result.failure
    rows = [("status", result.status), ("engine", result.engine),
            ("signature", result.signature), ("where (your code)", err and err.where), ("reason", result.reason),
            ("exit", json.dumps(result.exit)), ("expectation", json.dumps(result.expectation)),
            ("folder", str(folder) if folder else None)]
    body = ["<table>"]
    body += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows if v not in (None, "null")]
    body.append("</table>")
    if result.error:
        body.append("<h2>Error</h2><pre>" + e(err.message or "") + "</pre>")
        if err.traceback:
            body.append("<h3>Traceback</h3><pre>" + e(err.traceback) + "</pre>")
    epochs = result.epochs
    if epochs:
        keys = ["epoch", "seconds", "samples_per_sec", "loss", "accuracy", "val_loss", "val_accuracy"]
        body.append("<h2>Epochs</h2><table><tr>" + "".join(f"<th>{e(k)}</th>" for k in keys) + "</tr>")
        for ep in epochs:
            body.append("<tr>" + "".join(f"<td>{e(_num(ep.get(k)))}</td>" for k in keys) + "</tr>")
        body.append("</table>")
    for key in ("timing", "warmth", "engagement", "resources", "metrics", "code", "needs", "feeds", "seen",
                "placement", "samples", "parallelism", "provenance"):
        value = result.get(key)  # warmth, code, needs, feeds: extra keys (warm launch, user code, chain links)
        if value:
            body.append(f"<h2>{e(key)}</h2><pre>{e(json.dumps(value, indent=2, sort_keys=True, default=str))}</pre>")
    logs = result.logs
    for key in ("stderr_tail", "stdout_tail"):
        if logs.get(key):
            body.append(f"<h2>{e(key.replace('_', ' '))}</h2><pre>{e(logs[key])}</pre>")
    return "\n".join(body)


def _num(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)
