"""The watch's changes as static files a user can host anywhere: feeds and badges.

* a JSON Feed 1.1 (https://jsonfeed.org/version/1.1) and an Atom 1.0 feed (RFC 4287) of the
  changes, newest first. An entry's id is derived from the change's own stable id, so a feed
  written again (the next night, with one more change) shows a reader one new entry, never the
  old ones twice;
* an SVG badge per stack in the flat style of shields.io ("works with | TF 2.21").

Everything that comes from a user (cell names, error families, labels) is escaped for the
format it lands in -- XML text and attributes in Atom and SVG, and characters XML 1.0 cannot
carry at all (control characters from an error message) are dropped. Files are written
atomically and only when their content changed, so an unattended watch that finds nothing new
leaves the published folder untouched. Standard library only.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.errors import UserError
from harness.files import ownfiles
from harness.watch.changelog import Change

JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
ATOM_NS = "http://www.w3.org/2005/Atom"
GENERATOR = "harness watch"
HISTORY_PAGE = "history/{matrix}.html"   # the matrix's history page, relative to the site's root
EMPTY_UPDATED = "1970-01-01T00:00:00Z"    # an empty feed's date: fixed, so writing it again changes nothing
_ID_SPACE = uuid.UUID("0b8f3a56-5f1e-4c43-9a43-6f7d3d6c2e11")   # ids of this tool's feeds and entries

# XML 1.0 allows tab, newline, carriage return and everything from U+0020 except surrogates
# and U+FFFE/U+FFFF; anything else cannot appear even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text) -> str:
    """`text` as a string XML 1.0 can carry (escaping is the writer's job; this drops what it can't)."""
    return _NOT_XML.sub("", str(text))


def _escape(text) -> str:
    """Escaped for XML text and double- or single-quoted attributes alike."""
    return (xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def _ordered(changes: Sequence[Change]) -> list[Change]:
    """Newest first, one entry per id (the same change found twice is one entry)."""
    seen: dict[str, Change] = {}
    for c in changes:
        seen.setdefault(c.id, c)
    return sorted(seen.values(), key=lambda c: (c.first_seen, c.id), reverse=True)


def _moment(day: str) -> str:
    """RFC 3339 for a first-seen date ('YYYY-MM-DD', or already a full timestamp)."""
    return f"{day}T00:00:00Z" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day or "") else (day or "")


def _entry_id(change: Change) -> str:
    return f"urn:uuid:{uuid.uuid5(_ID_SPACE, 'change:' + change.id)}"


def _link(home_url: str, change: Change) -> str:
    """Where a reader goes: the change's anchor on the history page."""
    return f"{home_url}#change-{change.id}" if home_url else f"#change-{change.id}"


def _title(change: Change) -> str:
    release = change.after if change.after.startswith(f"{change.package} ") else f"{change.package} {change.after}"
    return f"{release}: {change.cell} {change.kind}"


def _tags(change: Change) -> list[str]:
    return [t for t in (change.kind, change.package, change.matrix) if t]


def json_feed(changes: Sequence[Change], *, title: str, home_url: str, feed_url: str) -> dict:
    """A JSON Feed 1.1 document (a dict; json.dumps it). Each item carries the whole change
    under `_harness` (an extension key, as the spec allows) for machines."""
    feed: dict = {"version": JSON_FEED_VERSION, "title": title}
    if home_url:
        feed["home_page_url"] = home_url
    if feed_url:
        feed["feed_url"] = feed_url
    feed["description"] = f"Changes found by {GENERATOR}: breaks, mends, flaky cells and speed or accuracy shifts"
    items = []
    for c in _ordered(changes):
        item = {"id": _entry_id(c), "url": _link(home_url, c), "title": _title(c),
                "content_text": c.summary, "date_published": _moment(c.first_seen), "tags": _tags(c),
                "_harness": c.to_dict()}
        if c.evidence:
            item["external_url"] = c.evidence[0]
        items.append(item)
    feed["items"] = items
    return feed


def atom_feed(changes: Sequence[Change], *, title: str, home_url: str, feed_url: str, updated: str) -> str:
    """An Atom 1.0 document (RFC 4287): feed id, title, updated, author, self link; per entry id,
    title, updated, link, summary. Built with ElementTree, so every text is escaped."""
    ET.register_namespace("", ATOM_NS)

    def sub(parent, tag, text=None, **attrs):
        el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", {k: xml_text(v) for k, v in attrs.items()})
        if text is not None:
            el.text = xml_text(text)
        return el

    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    sub(feed, "id", f"urn:uuid:{uuid.uuid5(_ID_SPACE, 'feed:' + (feed_url or title))}")
    sub(feed, "title", title)
    sub(feed, "updated", _moment(updated))
    author = sub(feed, "author")
    sub(author, "name", GENERATOR)
    sub(feed, "generator", GENERATOR)
    if feed_url:
        sub(feed, "link", rel="self", href=feed_url, type="application/atom+xml")
    if home_url:
        sub(feed, "link", rel="alternate", href=home_url, type="text/html")
    for c in _ordered(changes):
        entry = sub(feed, "entry")
        sub(entry, "id", _entry_id(c))
        sub(entry, "title", _title(c))
        sub(entry, "updated", _moment(c.first_seen))
        sub(entry, "link", rel="alternate", href=_link(home_url, c))
        for href in c.evidence:
            sub(entry, "link", rel="related", href=href)
        for tag in _tags(c):
            sub(entry, "category", term=tag)
        sub(entry, "summary", c.summary, type="text")
    ET.indent(feed)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="unicode") + "\n"


# -- badges --------------------------------------------------------------------------------
COLORS = {"green": "#4c1", "brightgreen": "#4c1", "yellowgreen": "#a4a61d", "yellow": "#dfb317",
          "orange": "#fe7d37", "red": "#e05d44", "blue": "#007ec6", "grey": "#9f9f9f",
          "gray": "#9f9f9f", "lightgrey": "#9f9f9f"}
_HEX = re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})")

# Approximate advance widths of Verdana 11px (shields measures the same font): enough for the
# badge to fit its text within a pixel or two; wide unknown characters count as wide.
_NARROW = set("fijlrtI.,:;!|'() ")
_WIDE = set("mwMW@%")


def _text_width(text: str) -> int:
    width = 0.0
    for ch in text:
        if ch in _NARROW:
            width += 3.9
        elif ch in _WIDE:
            width += 10.0
        elif ch.isupper() or ch.isdigit() or ord(ch) > 0x2e7f:
            width += 7.5
        else:
            width += 6.6
    return int(round(width))


def _color(color: str) -> str:
    """A colour a badge may use: a known name or a hex value; anything else is grey (never pasted as is)."""
    if color in COLORS:
        return COLORS[color]
    m = _HEX.fullmatch(color or "")
    return f"#{m.group(1)}" if m else COLORS["grey"]


def badge_svg(label: str, message: str, color: str) -> str:
    """A shields-style flat badge: grey label on the left, coloured message on the right."""
    label, message = xml_text(label), xml_text(message)
    lw, mw = _text_width(label) + 10, _text_width(message) + 10
    total = lw + mw
    fill = _color(color)
    title = _escape(f"{label}: {message}")
    lx, mx = lw * 5, (lw + mw / 2) * 10   # text is drawn at scale(.1) for crisp rendering
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="20" role="img" aria-label="{title}">'
        f"<title>{title}</title>"
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/>'
        '<stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{total}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{mw}" height="20" fill="{fill}"/>'
        f'<rect width="{total}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        'text-rendering="geometricPrecision" font-size="110">'
        f'<text aria-hidden="true" x="{lx:.0f}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)" '
        f'textLength="{(lw - 10) * 10}">{_escape(label)}</text>'
        f'<text x="{lx:.0f}" y="140" transform="scale(.1)" fill="#fff" textLength="{(lw - 10) * 10}">'
        f"{_escape(label)}</text>"
        f'<text aria-hidden="true" x="{mx:.0f}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)" '
        f'textLength="{(mw - 10) * 10}">{_escape(message)}</text>'
        f'<text x="{mx:.0f}" y="140" transform="scale(.1)" fill="#fff" textLength="{(mw - 10) * 10}">'
        f"{_escape(message)}</text></g></svg>\n"
    )


SHORT_NAMES = {"tensorflow": "TF", "tensorflow-cpu": "TF", "tf-nightly": "TF nightly", "keras": "Keras",
               "keras-nightly": "Keras nightly", "jax": "JAX", "torch": "PyTorch", "numpy": "numpy"}


def stack_badge(package: str, release: str | None, works: bool | None) -> tuple[str, str, str]:
    """(label, message, color) of a stack's badge: 'works with | TF 2.21' green, 'broken since |
    TF 2.22' red, 'TF | untested' grey (never a claim without a result)."""
    name = SHORT_NAMES.get(package, package)
    if works is None or not release:
        return name, "untested", "grey"
    if works:
        return "works with", f"{name} {release}", "green"
    return "broken since", f"{name} {release}", "red"


# -- files ---------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def file_name(name: str) -> str:
    """A name as one safe path component: no separators, no leading dot, never empty."""
    safe = _UNSAFE.sub("-", name).strip("-.")
    return safe or "unnamed"


def check_home_url(url: str | None) -> str:
    """The site's address as ``--home-url`` gives it: an http(s) address with a host, or nothing.
    Anything else (``javascript:``, ``file:``, a bare word) would be written into every feed's
    links, where a reader opens it: exit 2 instead."""
    if not url:
        return ""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or any(c in url for c in "\r\n\t <>\"'"):
        raise UserError(f"--home-url {url!r}: not an http(s) address (e.g. https://example.org/compat/)")
    return url


def write(out_dir: Path, matrix: str, changes: Sequence[Change], badges: Mapping[str, tuple[str, str, str]], *,
          home_url: str = "") -> list[Path]:
    """Write out_dir/feeds/<matrix>.json, out_dir/feeds/<matrix>.atom.xml and
    out_dir/badges/<matrix>/<name>.svg; return the paths (written or already up to date).

    `home_url` is the site's address (feeds want absolute links); empty, links are relative to the
    feed file itself (`../history/...`), which is where a reader resolves them from. The feed's
    `updated` is its newest change's date, so an unchanged set of changes gives byte-identical
    files (an empty feed is dated EMPTY_UPDATED)."""
    out_dir = Path(out_dir)
    stem = file_name(matrix)
    base = home_url.rstrip("/") + "/" if home_url else "../"  # feeds/ is one level below the root
    page = base + HISTORY_PAGE.format(matrix=stem)
    title = f"{matrix}: changes"
    ordered = _ordered(changes)
    updated = ordered[0].first_seen if ordered else EMPTY_UPDATED
    json_path = out_dir / "feeds" / f"{stem}.json"
    atom_path = out_dir / "feeds" / f"{stem}.atom.xml"
    feed = json_feed(ordered, title=title, home_url=page, feed_url=f"{base}feeds/{stem}.json")
    ownfiles.write_atomic(out_dir, json_path, (json.dumps(feed, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    atom = atom_feed(ordered, title=title, home_url=page, feed_url=f"{base}feeds/{stem}.atom.xml", updated=updated)
    ownfiles.write_atomic(out_dir, atom_path, atom.encode("utf-8"))
    paths = [json_path, atom_path]
    for name, (label, message, color) in sorted(badges.items()):
        path = out_dir / "badges" / stem / f"{file_name(name)}.svg"
        ownfiles.write_atomic(out_dir, path, badge_svg(label, message, color).encode("utf-8"))
        paths.append(path)
    return paths
