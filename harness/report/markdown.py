"""Markdown output: for a README, a PR or an issue."""

from __future__ import annotations

from harness.report.tables import KEY, Table
from harness.status import FAILED


def md_escape(text: object) -> str:
    """Make any text safe inside a Markdown table cell: no `|` or newline can
    break the row, no HTML can render."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|")
    s = " ".join(s.split())
    for ch in "*_`[]":
        s = s.replace(ch, "\\" + ch)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_table(table: Table, link=None) -> str:
    """`link(cell_id)` gives a URL for cells that point at a result, or None."""
    if not table.rows:
        return ""
    lines = [f"### {md_escape(table.title)}", ""]
    if table.note:  # a paragraph: "<N>" in it must not turn into an HTML tag
        lines += [md_escape(table.note), ""]
    lines.append("| " + " | ".join(md_escape(h) for h in table.headers) + " |")
    lines.append("|" + "---|" * len(table.headers))
    for row in table.rows:
        out = []
        for c in row:
            text = md_escape(c.text)
            if c.mark in (*FAILED, "flag") and text:
                text = f"**{text}**"
            url = link(c.link) if (link and c.link) else None
            text = f"[{text}]({url})" if url and text else text
            if c.anchor and KEY.match(c.anchor):  # GitHub keeps `name` (not `id`) on an anchor
                text = f"<a name=\"{c.anchor.lower()}\"></a>{text}"
            if c.ref and KEY.match(c.ref):
                text += f" [{c.ref}](#{c.ref.lower()})"
            out.append(text)
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"
