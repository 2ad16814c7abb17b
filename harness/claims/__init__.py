"""What the products claim: one model of a change, whichever product found it.

The watch (a cell between two releases of a package), the atlas (a column between neighbouring
rows of a line) and the portability grid (a reader or a writer moved along a line, a file's
verdict with it) each publish changes; `change.Change` is the one thing each of them is. Each
product keeps only what is its own: where on its page a change lies, its stable id, and the JSON
its readers already read. `findings.Finding` is what an audit says of a claim its record or the
facts do not hold, and `findings.tell` the one way a verb tells them. This package imports
nothing of the products'.
"""

from __future__ import annotations

from harness.claims.change import Change
from harness.claims.findings import Finding

__all__ = ["Change", "Finding"]
