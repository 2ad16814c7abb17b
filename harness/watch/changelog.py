"""The change log's entries: one `Change` per break, mend, flaky streak or shift, with a stable id
and the one line a person reads in the log, the feeds and the pages.

The statistics that find a change (`harness.watch.changes`) say what moved and how surely; this module
says it as an entry that outlives the run that found it: the same change found again (another run,
another day) has the same id, and the entry round-trips through JSON (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields

from harness.watch.changes import Shift, StatusChange

KINDS = ("broke", "mended", "family-changed", "flaky", "slower", "faster", "accuracy", "expectation")


def change_id(matrix: str, cell: str, kind: str, after: str) -> str:
    """Stable: the same change found twice (another run, another day) is one entry."""
    return hashlib.sha256("\0".join((matrix, cell, kind, after)).encode()).hexdigest()[:16]


@dataclass
class Change:
    """One entry of the change log / feeds; JSON-serialisable via to_dict()/from_dict()."""
    id: str
    matrix: str
    cell: str
    kind: str
    package: str
    before: str | None
    after: str
    first_seen: str
    summary: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    bisected_to: str | None = None
    evidence: list[str] = field(default_factory=list)
    detail: str = ""           # what a status change says ("crashes (BatchNotDivisible)"), or the metric's name

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Change:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def _release(package: str, label: str | None) -> str:
    """'tensorflow 2.21.0' whether the label already names the package or not."""
    if label is None:
        return ""
    return label if label.startswith(f"{package} ") or not package else f"{package} {label}"


def _bare(package: str, label: str | None) -> str | None:
    if label is None:
        return None
    return label[len(package) + 1:] if package and label.startswith(f"{package} ") else label


def _percent(x: float) -> str:
    return f"{abs(x) * 100:.0f}"


def describe(change: Change) -> str:
    """The one-line change-log text, e.g. 'tensorflow 2.21.0: GRU on 2 devices 18 % slower [12-24 %],
    first seen 2026-03-08, bisected to 2.21.0rc1'."""
    head = f"{_release(change.package, change.after)}: {change.cell}"
    kind = change.kind
    if kind in ("slower", "faster", "accuracy") and change.ratio is not None:
        if kind == "accuracy":
            word = "lower" if change.ratio < 1 else "higher"
            what = f"{change.detail or 'accuracy'} {_percent(change.ratio - 1)} % {word}"
        else:
            word = kind
            what = f"{_percent(change.ratio - 1)} % {word}"
        if change.low is not None and change.high is not None:
            a, b = sorted((abs(change.low - 1), abs(change.high - 1)))
            if (change.low - 1) * (change.high - 1) < 0:   # an interval across 1 (should not be claimed)
                a = 0.0
            what += f" [{a * 100:.0f}-{b * 100:.0f} %]"
        text = f"{head} {what}"
    elif kind == "broke":
        text = f"{head} {change.detail or 'fails'}"
        if change.before:
            text += f", last good {_bare(change.package, change.before)}"
    elif kind == "mended":
        text = f"{head} {change.detail or 'passes again'}"
        if change.before:
            text += f", last bad {_bare(change.package, change.before)}"
    elif kind == "family-changed":
        text = f"{head} {change.detail or 'fails differently'}"
    elif kind == "flaky":
        text = f"{head} {change.detail or 'flaky'}"
    else:
        text = f"{head} {change.detail or kind}"
    text += f", first seen {change.first_seen}"
    if change.bisected_to:
        text += f", bisected to {_bare(change.package, change.bisected_to)}"
    return text


def from_shift(matrix: str, cell: str, package: str, shift: Shift, first_seen: str, *,
               metric: str = "speed", higher_is_better: bool = True, evidence: Sequence[str] = ()) -> Change:
    """A change-log entry for a shift of `metric` ('speed' for samples/s or seconds, else an
    accuracy-like value). For seconds, pass higher_is_better=False: a ratio above 1 is slower."""
    if metric == "speed":
        up = shift.ratio > 1
        kind = "faster" if up == higher_is_better else "slower"
        if not higher_is_better:   # seconds: say it in the same words as samples/s
            shift = Shift(shift.index, shift.before, shift.after, 1 / shift.ratio, 1 / shift.high,
                          1 / shift.low, shift.p_value, shift.confidence)
    else:
        kind = "accuracy"
    change = Change(id=change_id(matrix, cell, kind, shift.after), matrix=matrix, cell=cell, kind=kind,
                    package=package, before=shift.before, after=shift.after, first_seen=first_seen, summary="",
                    ratio=shift.ratio, low=shift.low, high=shift.high, confidence=shift.confidence,
                    evidence=list(evidence), detail="" if metric == "speed" else metric)
    change.summary = describe(change)
    return change


def from_status(matrix: str, cell: str, package: str, sc: StatusChange, first_seen: str, *,
                evidence: Sequence[str] = ()) -> Change:
    """A change-log entry for a status change."""
    detail = sc.detail
    if sc.kind == "flaky" and detail.startswith("flaky: "):
        detail = "is flaky (" + detail[len("flaky: "):] + ")"
    change = Change(id=change_id(matrix, cell, sc.kind, sc.after), matrix=matrix, cell=cell, kind=sc.kind,
                    package=package, before=sc.before, after=sc.after, first_seen=first_seen, summary="",
                    evidence=list(evidence), detail=detail)
    change.summary = describe(change)
    return change
