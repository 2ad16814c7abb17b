"""Figures with their spread, and which epochs count: decided once.

Every timing is a median with min and max, never a lone number, and steady
state means epochs 2..N -- epoch 1 carries graph building and compilation.
`record` (result.json), `report.analysis` (tables, plots, compare) and the
GPU monitor all use these two rules from here.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

SPREAD_WIDE = 0.25   # (max - min) / median above this: the figure is marked as noisy


@dataclass(frozen=True)
class Spread:
    median: float
    lo: float
    hi: float
    n: int

    @property
    def wide(self) -> bool:
        return self.n > 1 and self.median > 0 and (self.hi - self.lo) / self.median > SPREAD_WIDE

    def fmt(self, digits: int = 2) -> str:
        text = f"{self.median:.{digits}f}"
        if self.n > 1:
            text += f" [{self.lo:.{digits}f}-{self.hi:.{digits}f}]"
        return text + (" (noisy)" if self.wide else "")

    def as_dict(self) -> dict:
        """The form result.json stores."""
        return {"median": self.median, "min": self.lo, "max": self.hi, "n": self.n}


def spread_of(values: Iterable) -> Spread | None:
    values = [float(v) for v in values if v is not None]
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values))


def steady(epochs: list[dict]) -> list[dict]:
    """The epochs a steady-state figure is taken from: 2..N."""
    return list(epochs or [])[1:]
