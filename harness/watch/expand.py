"""The matrix's ranges expanded as the index stands now, or stood at a moment (``--as-of``).

A watch always asks the index again (a results folder's recorded expansion is what `run`
reuses; a watch is there to see what is new). Replaying a date filters each project to the
files uploaded before it (``releases.Project.as_of``), and no environment resolves later than
that date: its cut-off is capped at it, so a replay installs what a user could have installed
then. An environment whose release came out long before the date keeps the cut-off `run` gives
it (its upload plus the margin), so the same release is the same cell at every later watch.
"""

from __future__ import annotations

import dataclasses

from harness.errors import UserError
from harness.index import releases


def as_of_moment(text: str | None) -> str | None:
    """'2024-06-20' or a UTC time -> the harness's form of a moment; None when the option is
    left out; exit 2 for anything else -- an empty one included, which is what an unset variable
    in a schedule's line gives (``--as-of "$DAY"``) and must not quietly mean "now"."""
    if text is None:
        return None
    if not text.strip():
        raise UserError("--as-of '': empty (an unset variable?); give a date (2024-06-20) or a UTC time, "
                        "or leave the option out to watch the index as it is now")
    try:
        return releases.utc_text(text)
    except ValueError:
        raise UserError(f"--as-of {text!r}: expected a date (2024-06-20) or a UTC time "
                        "(2024-06-20T12:00:00Z)") from None


class WatchResolver(releases.Resolver):
    """A Resolver that asks the index (never a recorded expansion), lists only what the index
    had before `as_of`, and tells the matrix parser it is a watch (``watch: {pre: true}``)."""

    watching = True

    def __init__(self, as_of: str | None = None, *, offline: bool = False):
        super().__init__(None, refresh=not offline, offline=offline)
        self.as_of = as_of
        self.not_yet: list[str] = []   # ranges with no release yet: their environments wait (ranges.py)

    def expand(self, package: str, spec: str, python: str, options: releases.Options) -> releases.Expansion:
        found = releases.expand(package, spec, python, options, refresh=self.refresh, offline=self.offline,
                                as_of=self.as_of)
        if self.as_of:
            found.note = "; ".join(n for n in (found.note, f"as the index listed it before {self.as_of}") if n)
        self.used[releases.key(package, spec, python, options)] = found.as_dict()
        for v in found.versions:
            self.times[f"{found.package}=={v}"] = found.uploaded.get(v)
        return found


def capped(m, as_of: str | None):
    """The matrix with no environment resolving later than `as_of` (see the module's docstring)."""
    if not as_of:
        return m
    cells = []
    for cell in m.cells:
        env = cell.environment
        if env.uploaded_before and env.uploaded_before > as_of:
            cell = dataclasses.replace(cell, environment=dataclasses.replace(env, uploaded_before=as_of))
        cells.append(cell)
    return dataclasses.replace(m, cells=cells)
