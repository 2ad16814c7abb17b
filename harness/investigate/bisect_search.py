"""The search of `harness bisect`: the first release that does what the newer end does.

A pure function of an ordered version list and an oracle (`search`), kept apart from what
runs the cells (``bisect``) and from how a release is judged (``bisect_judge``), so it is
tested without running anything and `upgrade` drives it with an oracle of its own:

- both ends are tested first: they must differ (one good, one bad), or
  there is nothing to find (a bisect that trusts its bounds answers wrong);
- a release that cannot be installed for the cell's Python is *skipped* with
  pip's reason, as `git bisect skip` does; when skipped releases sit right
  before the first changed one, the answer is the list of candidates;
- with `jobs` > 1 each round tests that many releases at once, spread evenly
  over what is left (k-ary search), so rounds fall as hosts rise;
- the oracle is asked once per release: a release whose repeats disagree
  (a flaky failure) is bad when the working end was reliably good -- the
  change is that it no longer always works -- and is marked flaky.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

GOOD, BAD, SKIP = "good", "bad", "skip"
BROKE, MENDED = "broke", "mended"   # which way the cells changed: the watch's words for the same


def direction(old: str, new: str) -> str | None:
    """Which way two ends' verdicts say the cells changed (None: they do not differ, or one
    cannot be judged): the one rule by which a search, its printout and its record tell a break
    from a mend."""
    return {(GOOD, BAD): BROKE, (BAD, GOOD): MENDED}.get((old, new))


def words(way: str | None) -> tuple[str, str]:
    """What the release before the change and the one after it are called, by direction."""
    return {BROKE: ("last good", "first bad"), MENDED: ("last bad", "first good")}.get(way, ("old end", "new end"))


def where(way: str) -> str:
    """What a search in that direction looks for, in words."""
    return {BROKE: "where it broke", MENDED: "where it was mended"}[way]


@dataclass(frozen=True)
class Verdict:
    kind: str            # good | bad | skip
    why: str = ""        # one line: the status and signature, the metric, or pip's reason
    flaky: bool = False  # repeats disagreed
    evidence: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Step:
    round: int
    tested: list[tuple[str, Verdict]]
    before: str          # the last release known to do what the old end does
    after: str           # the first release known to do what the new end does
    left: int            # releases still untested between them
    direction: str | None = None


@dataclass
class Found:
    versions: list[str]
    tested: dict[str, Verdict]
    steps: list[Step]
    direction: str | None = None  # BROKE | MENDED, from what the ends did; None: no change between them
    before: str | None = None     # the last release that does what the old end does
    after: str | None = None      # the first that does what the new end does (None: skips hide which)
    candidates: list[str] = field(default_factory=list)  # `after` is one of these (skips hide which)
    problem: str = ""    # why there is no answer (the bounds do not bracket a change)
    warnings: list[str] = field(default_factory=list)
    nightly: dict | None = None  # the search below the releases (`below`), when asked

    @property
    def first_bad(self) -> str | None:
        return self.after if self.direction == BROKE else None

    @property
    def last_good(self) -> str | None:
        return self.before if self.direction == BROKE else None

    @property
    def first_good(self) -> str | None:
        return self.after if self.direction == MENDED else None

    @property
    def last_bad(self) -> str | None:
        return self.before if self.direction == MENDED else None

    def answer(self) -> dict:
        """The answer under both pairs of names, the pair that does not apply None (the record's keys)."""
        return {"direction": self.direction, "first_bad": self.first_bad, "last_good": self.last_good,
                "first_good": self.first_good, "last_bad": self.last_bad}


class BoundsError(Exception):
    pass


def probes(inner: list[int], jobs: int) -> list[int]:
    """`jobs` indices spread evenly over `inner` (splitting it into jobs + 1 parts)."""
    if not inner:
        return []
    k = max(1, min(jobs, len(inner)))
    picked = sorted({inner[min(len(inner) - 1, (j * len(inner)) // (k + 1))] for j in range(1, k + 1)})
    return picked


def _ends_problem(versions: list[str], old: Verdict, new: Verdict, expect: str | None) -> str:
    """Why two ends give no search ('' when they do): they do not differ, one cannot be judged,
    or (`expect`, a search below the releases) they differ the other way than the releases did."""
    if expect is not None:
        want_old, want_new = {BROKE: (GOOD, BAD), MENDED: (BAD, GOOD)}[expect]
        if old.kind != want_old:
            return f"the old end {versions[0]} is not {want_old}: {old.kind} ({old.why})"
        if new.kind != want_new:
            return f"the new end {versions[-1]} is not {want_new}: {new.kind} ({new.why})"
        return ""
    for end, v, verdict in (("old", versions[0], old), ("new", versions[-1], new)):
        if verdict.kind == SKIP:
            return f"the {end} end {v} cannot be judged here: {verdict.why}"
    if old.kind == new.kind:
        return (f"the ends do not differ: {versions[0]} and {versions[-1]} are both {old.kind} "
                f"({versions[0]}: {old.why}; {versions[-1]}: {new.why})")
    return ""


def search(versions: list[str], oracle: Callable[[list[str]], dict[str, Verdict]], jobs: int = 1,
           on_step: Callable[[Step], None] | None = None, expect: str | None = None) -> Found:
    """Find the first release in `versions` (oldest first) that does what the last one does, when
    the first does the other: the first bad release when the first is good and the last bad, the
    first good one when it is the other way round. `oracle` judges a list of releases at once
    (one round); `expect` (BROKE or MENDED) asks the ends to differ that way."""
    found = Found(versions=list(versions), tested={}, steps=[])
    if len(versions) < 2:
        found.problem = "fewer than two releases between the bounds"
        return found

    def ask(idx: list[int]) -> None:  # one round: each release asked once, ever
        asked = [versions[i] for i in idx]
        verdicts = oracle(asked)
        for v in asked:
            found.tested[v] = verdicts[v]

    ask([0, len(versions) - 1])
    old_end, new_end = found.tested[versions[0]], found.tested[versions[-1]]
    found.problem = _ends_problem(versions, old_end, new_end, expect)
    if not found.problem:
        found.direction = direction(old_end.kind, new_end.kind)
    like_old, like_new = old_end.kind, new_end.kind
    lo, hi = 0, len(versions) - 1
    step = Step(0, [(v, found.tested[v]) for v in (versions[0], versions[-1])], versions[lo], versions[hi],
                hi - lo - 1, found.direction)
    found.steps.append(step)
    if on_step:
        on_step(step)
    if found.problem:
        return found
    round_ = 0
    while True:
        inner = [i for i in range(lo + 1, hi) if versions[i] not in found.tested]
        if not inner:
            break
        round_ += 1
        picked = probes(inner, jobs)
        ask(picked)
        kinds = {i: found.tested[versions[i]].kind for i in range(lo, hi + 1) if versions[i] in found.tested}
        new_hi = min((i for i, k in kinds.items() if k == like_new and i > lo), default=hi)
        new_lo = max((i for i, k in kinds.items() if k == like_old and i < new_hi), default=lo)
        later = [versions[i] for i, k in kinds.items() if k == like_old and i > new_hi]
        if later:
            found.warnings.append(f"not monotone: {versions[new_hi]} is {like_new} but later {', '.join(later)} "
                                  f"{like_old}; the first change is reported")
        lo, hi = new_lo, new_hi
        left = sum(1 for i in range(lo + 1, hi) if versions[i] not in found.tested)
        step = Step(round_, [(versions[i], found.tested[versions[i]]) for i in picked], versions[lo], versions[hi],
                    left, found.direction)
        found.steps.append(step)
        if on_step:
            on_step(step)
    found.before = versions[lo]
    skipped = [versions[i] for i in range(lo + 1, hi) if found.tested.get(versions[i], Verdict(SKIP)).kind == SKIP]
    found.candidates = skipped + [versions[hi]]
    found.after = versions[hi] if not skipped else None
    return found
