"""One change a product claims: what changed, between which two stacks, by how much and how
surely, and the evidence that holds it up.

The products found the same kind of thing and each said it in a class of its own; the claim is
one. What differs between them is kept apart, so that no product's words leak into another's:

- `where`: the product's own coordinates and particulars -- the watch's matrix, cell, package,
  first-seen day, summary and bisected release; the atlas's line, column and a speed shift's
  standing (`confirmed`); the grid's line and the two verdicts (`was`, `now`);
- `id`: made by the product (`watch.changelog.change_id`, the atlas's and the grid's own), so that
  the same change found again has the same id in that product, and every published id stays;
- the JSON: each product writes (and reads back) its own shape, which its pages, feeds, history
  files and evidence files already hold -- so the class has no `to_dict` of its own, and a product
  that forgot to say its shape fails, not writes another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Change:
    """A claim: between `before` and `after` (the older and the newer neighbour; `before` None for a
    finding within one stack), something of `kind` changed.

    `size` is how much, where a product measures it (a ratio of medians, an accuracy difference),
    with its spread `low`-`high` and the `confidence` the statistics give it; `runs` is how many
    runs it rests on, where the product counted them. `evidence` is what holds it up, in the
    product's own entries (the watch: paths of records; the atlas: what, and a command or a link;
    the grid: the files, as (other end, model, format)). None of these is published unless the
    product's own JSON says so."""
    kind: str
    before: str | None
    after: str
    detail: str = ""                 # what a reader reads of it, in the product's words
    size: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    runs: int | None = None
    evidence: list = field(default_factory=list)
    where: dict[str, Any] = field(default_factory=dict)
    id: str = ""
