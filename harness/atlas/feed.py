"""The atlas's Atom feed: an entry per row (a stack measured) and per change, newest first.

A reader subscribed to ``docs/atlas/feed.xml`` learns of a new release's row the day the run
that measured it is published, and of each change it brought. Entry ids are stable (the row's
key, the change's id), so republishing the same data adds nothing to a reader's list; links are
relative to the feed's own address (`files.atom` writes it).
"""

from __future__ import annotations

from harness.atlas.pages import ROWS
from harness.atlas.rows import LINES, Row
from harness.claims import Change
from harness.files.atom import Entry, feed

NS = "tag:tfkeras-harness.atlas,2026:"


def _day(row: Row) -> str:
    days = [r["day"] for e in row.entries.values() for r in e.records if r["day"]]
    return max(days) if days else "1970-01-01"


def atom(table: list[Row], found: list[Change]) -> str:
    by_key = {r.key: r for r in table}
    entries = []
    for row in table:
        entries.append(Entry(_day(row), f"{NS}row:{row.key}", f"measured: {row.label}", f"{ROWS}/{row.slug}.html",
                             f"{LINES.get(row.line, row.line)}; {len(row.entries)} cells' repeats measured."))
    for change in found:
        row = by_key.get(change.after)
        if row is None:
            continue
        before = by_key.get(change.before)
        title = f"{change.kind}: {row.label}" + (f" (after {before.label})" if before else "")
        entries.append(Entry(_day(row), f"{NS}change:{change.id}", title, f"{ROWS}/{row.slug}.html", change.detail))
    return feed("tfkeras-harness: the compatibility atlas", f"{NS}feed", entries)
