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
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.claims import Change
from harness.errors import UserError
from harness.files import atom, ownfiles
from harness.watch import changelog

JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
GENERATOR = "harness watch"
HISTORY_PAGE = "history/{matrix}.html"   # the matrix's history page, relative to the site's root
_ID_SPACE = uuid.UUID("0b8f3a56-5f1e-4c43-9a43-6f7d3d6c2e11")   # ids of this tool's feeds and entries

def _ordered(changes: Sequence[Change]) -> list[Change]:
    """Newest first, one entry per id (the same change found twice is one entry)."""
    seen: dict[str, Change] = {}
    for c in changes:
        seen.setdefault(c.id, c)
    return sorted(seen.values(), key=lambda c: (c.where["first_seen"], c.id), reverse=True)


def _entry_id(change: Change) -> str:
    return f"urn:uuid:{uuid.uuid5(_ID_SPACE, 'change:' + change.id)}"


def _link(home_url: str, change: Change) -> str:
    """Where a reader goes: the change's anchor on the history page."""
    return f"{home_url}#change-{change.id}" if home_url else f"#change-{change.id}"


def _title(change: Change) -> str:
    package = change.where["package"]
    release = change.after if change.after.startswith(f"{package} ") else f"{package} {change.after}"
    return f"{release}: {change.where['cell']} {change.kind}"


def _tags(change: Change) -> list[str]:
    return [t for t in (change.kind, change.where["package"], change.where["matrix"]) if t]


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
                "content_text": c.where["summary"], "date_published": atom.moment(c.where["first_seen"]),
                "tags": _tags(c),
                "_harness": changelog.to_dict(c)}
        if c.evidence:
            item["external_url"] = c.evidence[0]
        items.append(item)
    feed["items"] = items
    return feed


def atom_feed(changes: Sequence[Change], *, title: str, home_url: str, feed_url: str, updated: str) -> str:
    """The changes as an Atom 1.0 document, by the harness's one Atom writer (`files.atom`): per
    entry its id, title, date, link to its history anchor, its evidence as related links, its
    kind, package and matrix as categories, and its summary."""
    entries = [atom.Entry(c.where["first_seen"], _entry_id(c), _title(c), _link(home_url, c), c.where["summary"],
                          related=tuple(c.evidence), categories=tuple(_tags(c))) for c in _ordered(changes)]
    return atom.feed(title, f"urn:uuid:{uuid.uuid5(_ID_SPACE, 'feed:' + (feed_url or title))}", entries,
                     updated=updated, self_href=feed_url or "", home=home_url, generator=GENERATOR)


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
    label, message = atom.xml_text(label), atom.xml_text(message)
    lw, mw = _text_width(label) + 10, _text_width(message) + 10
    total = lw + mw
    fill = _color(color)
    title = atom.attribute(f"{label}: {message}")
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
        f'textLength="{(lw - 10) * 10}">{atom.attribute(label)}</text>'
        f'<text x="{lx:.0f}" y="140" transform="scale(.1)" fill="#fff" textLength="{(lw - 10) * 10}">'
        f"{atom.attribute(label)}</text>"
        f'<text aria-hidden="true" x="{mx:.0f}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)" '
        f'textLength="{(mw - 10) * 10}">{atom.attribute(message)}</text>'
        f'<text x="{mx:.0f}" y="140" transform="scale(.1)" fill="#fff" textLength="{(mw - 10) * 10}">'
        f"{atom.attribute(message)}</text></g></svg>\n"
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
    files (an empty feed is dated files.atom.EMPTY_UPDATED)."""
    out_dir = Path(out_dir)
    stem = file_name(matrix)
    base = home_url.rstrip("/") + "/" if home_url else "../"  # feeds/ is one level below the root
    page = base + HISTORY_PAGE.format(matrix=stem)
    title = f"{matrix}: changes"
    ordered = _ordered(changes)
    updated = ordered[0].where["first_seen"] if ordered else atom.EMPTY_UPDATED
    json_path = out_dir / "feeds" / f"{stem}.json"
    atom_path = out_dir / "feeds" / f"{stem}.atom.xml"
    feed = json_feed(ordered, title=title, home_url=page, feed_url=f"{base}feeds/{stem}.json")
    ownfiles.write_atomic(out_dir, json_path, (json.dumps(feed, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    document = atom_feed(ordered, title=title, home_url=page, feed_url=f"{base}feeds/{stem}.atom.xml",
                         updated=updated)
    ownfiles.write_atomic(out_dir, atom_path, document.encode("utf-8"))
    paths = [json_path, atom_path]
    for name, (label, message, color) in sorted(badges.items()):
        path = out_dir / "badges" / stem / f"{file_name(name)}.svg"
        ownfiles.write_atomic(out_dir, path, badge_svg(label, message, color).encode("utf-8"))
        paths.append(path)
    return paths
