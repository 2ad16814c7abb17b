"""An Atom 1.0 feed (RFC 4287) of published entries, for the pages that a reader subscribes to
(the atlas, the portability grid): one writer, so every feed escapes and dates its entries alike.

Entry ids are stable (a row's key, a change's id), so republishing the same data adds nothing to
a reader's list; links are relative to the feed's own address."""

from __future__ import annotations

from typing import NamedTuple
from xml.sax.saxutils import escape


class Entry(NamedTuple):
    day: str        # YYYY-MM-DD: when what it reports was measured
    ident: str      # a stable tag: URI
    title: str
    link: str       # relative to the feed
    summary: str


def feed(title: str, ident: str, entries: list[Entry]) -> str:
    """The feed document, newest entries first (ties by id, so the order is stable)."""
    ordered = sorted(entries, key=lambda e: (e.day, e.ident), reverse=True)
    updated = ordered[0].day if ordered else "1970-01-01"
    parts = ['<?xml version="1.0" encoding="utf-8"?>', '<feed xmlns="http://www.w3.org/2005/Atom">',
             f"<title>{escape(title)}</title>", f"<id>{escape(ident)}</id>",
             f"<updated>{updated}T00:00:00Z</updated>", '<link rel="self" href="feed.xml"/>',
             "<author><name>tfkeras-harness</name></author>"]
    for e in ordered:
        parts += ["<entry>", f"<title>{escape(e.title)}</title>", f"<id>{escape(e.ident)}</id>",
                  f"<updated>{e.day}T00:00:00Z</updated>", f'<link href="{escape(e.link)}"/>',
                  f"<summary>{escape(e.summary)}</summary>", "</entry>"]
    parts.append("</feed>")
    return "\n".join(parts) + "\n"
