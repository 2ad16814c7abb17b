"""The two Markdown forms every report of cells writes: a value in one cell of a table, and the
cells a sentence rests on. One place, so the upgrade report, the verdict and the certificate
quote a failure or a list of cells the same way."""

from __future__ import annotations

SHOWN = 3   # cell ids named in a sentence; the rest counted


def table_cell(text: object, limit: int = 160) -> str:
    """`text` for one cell of a Markdown table: one line, no pipe, at most `limit` characters."""
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cell_ids(cells: list[str]) -> str:
    """The cells a claim rests on: the first few ids, in code, and how many more."""
    return ", ".join(f"`{c}`" for c in cells[:SHOWN]) + (f" (+{len(cells) - SHOWN})" if len(cells) > SHOWN
                                                        else "") or "none"
