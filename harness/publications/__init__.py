"""What the harness publishes, as one kind of thing: a folder rendered from the record it holds
(the atlas, the portability grid, a dependency-bump verdict, an upgrade report). `audit` holds
each to its record (`harness audit`).

It stands above the products it audits, so it is not part of `harness.api` (which they call):
``from harness import publications; publications.audit("docs/atlas")`` is the call."""

from harness.claims.findings import Finding
from harness.publications.audit import Publication, audit, audit_one, known

__all__ = ["Finding", "Publication", "audit", "audit_one", "known"]
