"""The change log's entries: one `claims.Change` per break, mend, flaky streak or shift, with a stable id
and the one line a person reads in the log, the feeds and the pages.

The statistics that find a change (`harness.watch.changes`) say what moved and how surely; this module
says it as an entry that outlives the run that found it: the same change found again (another run,
another day) has the same id, and the entry round-trips through JSON in the shape the history files,
the feeds and the evidence files have always held (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from harness.claims import Change
from harness.watch.changes import Shift, StatusChange

KINDS = ("broke", "mended", "family-changed", "flaky", "slower", "faster", "accuracy", "expectation")


def change_id(matrix: str, cell: str, kind: str, after: str) -> str:
    """Stable: the same change found twice (another run, another day) is one entry."""
    return hashlib.sha256("\0".join((matrix, cell, kind, after)).encode()).hexdigest()[:16]


# A change-log entry is a `claims.Change` (its `size` the shift's ratio, with `low`, `high` and
# `confidence`; `evidence` the paths of the records behind it; `detail` what a status change says,
# "crashes (BatchNotDivisible)", or the metric's name) whose `where` holds the watch's own: the
# `matrix` and `cell`, the `package` whose releases the series runs along, the day the change was
# `first_seen`, its one-line `summary` and the release a bisect narrowed it to (`bisected_to`).


def entry(matrix: str, cell: str, kind: str, package: str, before: str | None, after: str, first_seen: str, *,
          summary: str = "", ratio: float | None = None, low: float | None = None, high: float | None = None,
          confidence: float | None = None, runs: int | None = None, bisected_to: str | None = None,
          evidence: Sequence[str] = (), detail: str = "", id: str | None = None) -> Change:
    """A change-log entry; its id is `change_id`'s unless one is given (an entry read back keeps its own)."""
    return Change(kind, before, after, detail, size=ratio, low=low, high=high, confidence=confidence, runs=runs,
                  evidence=list(evidence), id=change_id(matrix, cell, kind, after) if id is None else id,
                  where={"matrix": matrix, "cell": cell, "package": package, "first_seen": first_seen,
                         "summary": summary, "bisected_to": bisected_to})


def to_dict(change: Change) -> dict:
    """The entry as the history, the feeds and the evidence files hold it, in the order they always did."""
    where = change.where
    return {"id": change.id, "matrix": where["matrix"], "cell": where["cell"], "kind": change.kind,
            "package": where["package"], "before": change.before, "after": change.after,
            "first_seen": where["first_seen"], "summary": where["summary"], "ratio": change.size, "low": change.low,
            "high": change.high, "confidence": change.confidence, "bisected_to": where.get("bisected_to"),
            "evidence": list(change.evidence), "detail": change.detail}


def from_dict(d: dict) -> Change:
    """An entry read back, as any version of the watch wrote it: keys it does not know are ignored."""
    return entry(d["matrix"], d["cell"], d["kind"], d["package"], d["before"], d["after"], d["first_seen"],
                 summary=d["summary"], ratio=d.get("ratio"), low=d.get("low"), high=d.get("high"),
                 confidence=d.get("confidence"), bisected_to=d.get("bisected_to"), evidence=d.get("evidence") or [],
                 detail=d.get("detail", ""), id=d["id"])


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
    package, ratio = change.where["package"], change.size
    head = f"{_release(package, change.after)}: {change.where['cell']}"
    kind = change.kind
    if kind in ("slower", "faster", "accuracy") and ratio is not None:
        if kind == "accuracy":
            word = "lower" if ratio < 1 else "higher"
            what = f"{change.detail or 'accuracy'} {_percent(ratio - 1)} % {word}"
        else:
            word = kind
            what = f"{_percent(ratio - 1)} % {word}"
        if change.low is not None and change.high is not None:
            a, b = sorted((abs(change.low - 1), abs(change.high - 1)))
            if (change.low - 1) * (change.high - 1) < 0:   # an interval across 1 (should not be claimed)
                a = 0.0
            what += f" [{a * 100:.0f}-{b * 100:.0f} %]"
        text = f"{head} {what}"
    elif kind == "broke":
        text = f"{head} {change.detail or 'fails'}"
        if change.before:
            text += f", last good {_bare(package, change.before)}"
    elif kind == "mended":
        text = f"{head} {change.detail or 'passes again'}"
        if change.before:
            text += f", last bad {_bare(package, change.before)}"
    elif kind == "family-changed":
        text = f"{head} {change.detail or 'fails differently'}"
    elif kind == "flaky":
        text = f"{head} {change.detail or 'flaky'}"
    else:
        text = f"{head} {change.detail or kind}"
    text += f", first seen {change.where['first_seen']}"
    if change.where.get("bisected_to"):
        text += f", bisected to {_bare(package, change.where['bisected_to'])}"
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
                          1 / shift.low, shift.p_value, shift.confidence, shift.runs)
    else:
        kind = "accuracy"
    change = entry(matrix, cell, kind, package, shift.before, shift.after, first_seen, ratio=shift.ratio,
                   low=shift.low, high=shift.high, confidence=shift.confidence, runs=shift.runs or None,
                   evidence=evidence, detail="" if metric == "speed" else metric)
    change.where["summary"] = describe(change)
    return change


def from_status(matrix: str, cell: str, package: str, sc: StatusChange, first_seen: str, *,
                evidence: Sequence[str] = ()) -> Change:
    """A change-log entry for a status change."""
    detail = sc.detail
    if sc.kind == "flaky" and detail.startswith("flaky: "):
        detail = "is flaky (" + detail[len("flaky: "):] + ")"
    change = entry(matrix, cell, sc.kind, package, sc.before, sc.after, first_seen, evidence=evidence,
                   detail=detail)
    change.where["summary"] = describe(change)
    return change
