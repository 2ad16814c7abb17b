"""The two Markdown forms every report of cells writes: a value in one cell of a table, and the
cells a sentence rests on. One place, so the upgrade report, the verdict and the certificate
quote a failure or a list of cells the same way."""

from __future__ import annotations

import itertools

SHOWN = 3   # cell ids named in a sentence; the rest counted


def table_cell(text: object, limit: int = 160) -> str:
    """`text` for one cell of a Markdown table: one line, no pipe, at most `limit` characters."""
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cell_ids(cells: list[str]) -> str:
    """The cells a claim rests on: the first few ids, in code, and how many more."""
    return ", ".join(f"`{c}`" for c in cells[:SHOWN]) + (f" (+{len(cells) - SHOWN})" if len(cells) > SHOWN
                                                        else "") or "none"


def unlike_lines(said: str, made: str, limit: int = 160) -> list[tuple[int, str]]:
    """Where a published text departs from the text its record renders: (line number, what it says
    against what the record makes), one per differing line, each quoted from a little before the
    first character where they part (a long line's difference is seen, not cut off). The one rule
    the verdict's `--audit` and `harness audit` hold a page to, so a finding reads the same
    wherever it is found."""
    out = []
    for n, (a, b) in enumerate(itertools.zip_longest(said.splitlines(), made.splitlines()), 1):
        if a == b:
            continue
        start = _parting(a or "", b or "")
        out.append((n, f"says {_quoted(a, start, limit)}; its record makes {_quoted(b, start, limit)}"))
    return out


_CONTEXT = 40   # characters shown before the place two lines part


def _parting(a: str, b: str) -> int:
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return max(0, same - _CONTEXT)


def _quoted(line: str | None, start: int, limit: int) -> str:
    if not line:
        return "'(nothing)'"
    shown = line[start:start + limit]
    return ("..." if start else "") + repr(shown) + ("..." if start + limit < len(line) else "")
