"""One HTML page of the published site: its styles, its frame and escaping. Below both the
report's site (`report.site`) and the watch's pages (`watch.page`), which share it, so that
every page looks the same and every text from a result or an index is escaped one way."""

from __future__ import annotations

import html

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
