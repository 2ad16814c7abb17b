"""Plain-text output: the report's tables as a terminal shows them (`run`'s summary).

The third writer of report/tables.py's tables, beside Markdown and HTML. A terminal
renders no Markdown and no HTML, so nothing here is escaped for either (``<module>``
stays ``<module>``, ``lr_kwarg.py`` stays ``lr_kwarg.py``); what a terminal would
obey instead -- control characters and escape sequences -- is written out by
terminal.visible, where the caller prints. Columns are padded to line up; a cell's
text is one line (whitespace runs folded), as in the other writers.
"""

from __future__ import annotations

from harness.report.tables import KEY, Table


def _cell(text: object) -> str:
    return " ".join(str(text).split())


def text_table(table: Table) -> str:
    if not table.rows:
        return ""
    rows = [[_cell(h) for h in table.headers]]
    for row in table.rows:
        rows.append([_cell(c.text) + (f" [{c.ref}]" if c.ref and KEY.match(c.ref) else "") for c in row])
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0]))]
    lines = [table.title]
    if table.note:
        lines.append(_cell(table.note))
    lines.append("")
    for n, row in enumerate(rows):
        lines.append("  ".join(text.ljust(w) for text, w in zip(row, widths, strict=False)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
