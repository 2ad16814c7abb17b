"""The atlas's Atom feed: an entry per row (a stack measured) and per change, newest first.

A reader subscribed to ``docs/atlas/feed.xml`` learns of a new release's row the day the run
that measured it is published, and of each change it brought. Entry ids are stable (the row's
key, the change's id), so republishing the same data adds nothing to a reader's list; links are
relative to the feed's own address.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from harness.atlas.changes import Change
from harness.atlas.pages import ROWS
from harness.atlas.rows import LINES, Row

NS = "tag:tfkeras-harness.atlas,2026:"


def _day(row: Row) -> str:
    days = [r["day"] for e in row.entries.values() for r in e.records if r["day"]]
    return max(days) if days else "1970-01-01"


def atom(table: list[Row], found: list[Change]) -> str:
    by_key = {r.key: r for r in table}
    entries = []
    for row in table:
        entries.append((_day(row), f"{NS}row:{row.key}", f"measured: {row.label}",
                        f"{ROWS}/{row.slug}.html",
                        f"{LINES.get(row.line, row.line)}; {len(row.entries)} cells' repeats measured."))
    for change in found:
        row = by_key.get(change.after)
        if row is None:
            continue
        before = by_key.get(change.before)
        title = f"{change.kind}: {row.label}" + (f" (after {before.label})" if before else "")
        entries.append((_day(row), f"{NS}change:{change.id}", title, f"{ROWS}/{row.slug}.html", change.detail))
    entries.sort(key=lambda e: (e[0], e[1]), reverse=True)
    updated = entries[0][0] if entries else "1970-01-01"
    parts = ['<?xml version="1.0" encoding="utf-8"?>', '<feed xmlns="http://www.w3.org/2005/Atom">',
             "<title>tfkeras-harness: the compatibility atlas</title>", f"<id>{NS}feed</id>",
             f"<updated>{updated}T00:00:00Z</updated>", '<link rel="self" href="feed.xml"/>',
             "<author><name>tfkeras-harness</name></author>"]
    for day, ident, title, link, summary in entries:
        parts += ["<entry>", f"<title>{escape(title)}</title>", f"<id>{escape(ident)}</id>",
                  f"<updated>{day}T00:00:00Z</updated>", f'<link href="{escape(link)}"/>',
                  f"<summary>{escape(summary)}</summary>", "</entry>"]
    parts.append("</feed>")
    return "\n".join(parts) + "\n"
