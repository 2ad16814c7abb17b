"""What "bad" means to `harness bisect`: a release's verdict from its cells' results (`judge`).

Another status than the working end's (a timeout or crash is bad when that end was ok), a
value the matrix expects and it does not give, or optionally validation accuracy below the
working end's by more than X, or steady samples/s below it by more than Y % *and* outside
its min-max range (noise-aware). The ends are judged each by what it does (`judge_ends`),
never by its place. Kept apart from the search, which sees only the verdicts' kinds, and
from the driver that runs the cells: `upgrade` judges its own cells by the same rule.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness import status
from harness.investigate.bisect_search import BAD, GOOD, SKIP, Verdict
from harness.results.result import Result
from harness.stats import spread_of, steady


@dataclass(frozen=True)
class Criteria:
    accuracy_drop: float | None = None   # absolute val_accuracy below the good end's median
    speed_drop: float | None = None      # percent of steady samples/s below the good end's median


DEFAULT_CRITERIA = Criteria()  # a change of status or of an expected value only: no accuracy or speed criterion


def evidence(results: list[Result]) -> dict:
    """What a release's cells showed: status(es), signature, val_accuracy and samples/s with spread."""
    statuses = Counter(r.status for r in results)
    failed = [r for r in results if r.status != status.OK]
    ok = [r for r in results if r.status == status.OK]
    acc = spread_of(r.metric("val_accuracy") for r in ok)
    speed = spread_of(e.get("samples_per_sec") for r in ok for e in steady(r.epochs))
    missed = [[v for v in r.expected.values if v.met is False] if r.expected else [] for r in results]
    return {"status": statuses.most_common(1)[0][0] if statuses else None,
            "statuses": dict(statuses), "signature": status.failure_text(failed[0]) if failed else "",
            "val_accuracy": acc, "samples_per_sec": speed, "cells": [r.cell for r in results],
            "unmet": [v.detail or f"{v.metric}: {v.got} (expected {v.want})" for vs in missed for v in vs],
            "unmet_cells": sum(1 for vs in missed if vs)}


def evidence_line(ev: dict) -> str:
    """A release's evidence in one line: its statuses, signature, unmet values, accuracy and speed."""
    parts = [", ".join(f"{n} {s}" for s, n in sorted(ev["statuses"].items()))]
    if ev["signature"]:
        parts.append(ev["signature"][:160])
    if ev.get("unmet"):
        parts.append("expectation not met: " + "; ".join(ev["unmet"])[:200])
    if ev["val_accuracy"]:
        parts.append(f"val_accuracy {ev['val_accuracy'].fmt(3)}")
    if ev["samples_per_sec"]:
        parts.append(f"samples/s {ev['samples_per_sec'].fmt(0)}")
    return "; ".join(parts)


def judge(results: list[Result], good: dict | None, criteria: Criteria = Criteria()) -> Verdict:
    """A release's verdict from its cells' results, against the working end's evidence (`good`;
    None: judged on its own, as an end is: good when it runs and gives the values expected)."""
    ev = evidence(results)
    if not results:
        return Verdict(SKIP, "no result", evidence=ev)
    not_run = [r for r in results if r.status in status.NOT_RUN]
    if not_run:
        r = not_run[0]
        return Verdict(SKIP, f"{r.status}: {r.reason or r.failure_text}"[:300], evidence=ev)
    want = good["status"] if good else status.OK
    changed = [r for r in results if r.status != want]
    if changed:
        return Verdict(BAD, evidence_line(ev), flaky=len(changed) < len(results), evidence=ev)
    # a value the matrix expects (`expect:` with `metric:`) that this release does not give: a silent
    # change is a change (while the good end gave it; an end that misses it is not good)
    if ev["unmet"] and not (good and good.get("unmet")):
        return Verdict(BAD, evidence_line(ev), flaky=ev["unmet_cells"] < len(results), evidence=ev)
    if good and criteria.accuracy_drop is not None and ev["val_accuracy"] and good["val_accuracy"]:
        if ev["val_accuracy"].median < good["val_accuracy"].median - criteria.accuracy_drop:
            return Verdict(BAD, f"val_accuracy {ev['val_accuracy'].fmt(3)} against {good['val_accuracy'].fmt(3)} "
                                f"(more than {criteria.accuracy_drop} lower)", evidence=ev)
    if good and criteria.speed_drop is not None and ev["samples_per_sec"] and good["samples_per_sec"]:
        now, then = ev["samples_per_sec"], good["samples_per_sec"]
        if now.median < then.median * (1 - criteria.speed_drop / 100) and now.hi < then.lo:
            return Verdict(BAD, f"samples/s {now.fmt(0)} against {then.fmt(0)} (more than {criteria.speed_drop:g}% "
                                "lower, outside its range)", evidence=ev)
    return Verdict(GOOD, evidence_line(ev), evidence=ev)


def judge_ends(old: list[Result], new: list[Result], criteria: Criteria = Criteria()) -> tuple[Verdict, Verdict]:
    """Both ends' verdicts, each by what it does, never by its place: each on its own first (does
    it run, and give the values the matrix expects?). When both do, each against the other with
    the criteria: a newer end slower or less accurate than the older is bad (a break), an older
    end slower or less accurate than the newer is bad (a mend). The end that comes out good is
    the yardstick every release between them is judged against."""
    a, b = judge(old, None, criteria), judge(new, None, criteria)
    if a.kind == GOOD and b.kind == GOOD:
        worse_new = judge(new, a.evidence, criteria)
        if worse_new.kind == BAD:
            return a, worse_new
        worse_old = judge(old, b.evidence, criteria)
        if worse_old.kind == BAD:
            return worse_old, b
    return a, b
