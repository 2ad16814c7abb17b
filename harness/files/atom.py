"""The one Atom 1.0 writer (RFC 4287): every feed the harness publishes -- the atlas's, the
portability grid's, each watched matrix's -- is written here, so every feed escapes, dates and
orders its entries alike.

Entry ids are stable (a row's key, a change's id), so republishing the same data adds nothing to
a reader's list; an entry's link is relative to the feed's own address unless the caller gives an
absolute one. Everything that comes from a user (cell names, error families) is escaped, and the
characters XML 1.0 cannot carry at all (control characters from an error message) are dropped."""

from __future__ import annotations

import re
from typing import NamedTuple

# XML 1.0 allows tab, newline, carriage return and everything from U+0020 except surrogates
# and U+FFFE/U+FFFF; anything else cannot appear even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
EMPTY_UPDATED = "1970-01-01"   # an empty feed's date: fixed, so writing it again changes nothing


def xml_text(value) -> str:
    """`value` as a string XML 1.0 can carry (escaping is the writer's job; this drops what it can't)."""
    return _NOT_XML.sub("", str(value))


def text(value) -> str:
    """Escaped for XML text (between tags)."""
    return xml_text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def attribute(value) -> str:
    """Escaped for XML text and double- or single-quoted attributes alike."""
    return text(value).replace('"', "&quot;").replace("'", "&#39;")


def moment(day: str) -> str:
    """RFC 3339 for a date ('YYYY-MM-DD', or already a full timestamp)."""
    return f"{day}T00:00:00Z" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day or "") else (day or "")


class Entry(NamedTuple):
    day: str        # YYYY-MM-DD (or a full RFC 3339 moment): when what it reports was measured or found
    ident: str      # a stable id: a tag: or urn: URI
    title: str
    link: str       # where a reader goes: relative to the feed, or absolute
    summary: str
    related: tuple[str, ...] = ()      # its evidence, as rel="related" links
    categories: tuple[str, ...] = ()   # its kind, package, matrix: what a reader filters on


def feed(title: str, ident: str, entries: list[Entry], *, updated: str | None = None, self_href: str = "feed.xml",
         home: str = "", generator: str = "") -> str:
    """The feed document, newest entries first (ties by id, so the order is stable); `updated` is
    the newest entry's day unless given. `self_href` is the feed's own address, `home` the page it
    follows (a rel="alternate" link), `generator` who wrote it."""
    ordered = sorted({e.ident: e for e in reversed(entries)}.values(), key=lambda e: (e.day, e.ident), reverse=True)
    updated = updated or (ordered[0].day if ordered else EMPTY_UPDATED)
    parts = ['<?xml version="1.0" encoding="utf-8"?>', '<feed xmlns="http://www.w3.org/2005/Atom">',
             f"<title>{text(title)}</title>", f"<id>{text(ident)}</id>", f"<updated>{text(moment(updated))}</updated>"]
    if self_href:
        parts.append(f'<link rel="self" href="{attribute(self_href)}"/>')
    if home:
        parts.append(f'<link rel="alternate" href="{attribute(home)}" type="text/html"/>')
    parts.append(f"<author><name>{text(generator or 'tfkeras-harness')}</name></author>")
    if generator:
        parts.append(f"<generator>{text(generator)}</generator>")
    for e in ordered:
        parts += ["<entry>", f"<title>{text(e.title)}</title>", f"<id>{text(e.ident)}</id>",
                  f"<updated>{text(moment(e.day))}</updated>", f'<link href="{attribute(e.link)}"/>']
        parts += [f'<link rel="related" href="{attribute(href)}"/>' for href in e.related]
        parts += [f'<category term="{attribute(term)}"/>' for term in e.categories]
        parts += [f"<summary>{text(e.summary)}</summary>", "</entry>"]
    parts.append("</feed>")
    return "\n".join(parts) + "\n"
