"""The static site: an index with every table and plot, a page per cell.

Plain HTML with relative links and no script, so it works opened straight
from disk and nothing in a result can run: every text from a result goes
through html.escape.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..result import Result
from .tables import KEY, Table, slug

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:110rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;vertical-align:top;text-align:left}
th{background:#f3f3f3}
td.ok{background:#eaf7ea}td.error,td.crash,td.oom,td.timeout{background:#fbe3e3}
td.unsupported{background:#e8eefb}td.unavailable{background:#fdf5dc}td.flag{background:#ffe9c7;font-weight:bold}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;font-size:.8rem;white-space:pre-wrap}
.note{color:#555;font-size:.85rem;max-width:60rem}a.ref{font-size:.75rem;color:#555}
td:target{outline:2px solid #d08000}img{max-width:100%;border:1px solid #ddd;margin:.3rem}
"""


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n<h1>{e(title)}</h1>\n{body}\n</body></html>\n")


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
