"""Changes along a release axis, claimed with their size and their confidence.

Two questions are asked of one cell's history, release after release:

* did a number move (speed, accuracy)?  `find_shifts` -- change points in a
  series of `Point`s, each holding the cell's *repeats* at one release;
* did the cell start or stop failing?  `status_changes` -- from the statuses
  of every repeat/run at each release.

A series is one metric of one cell on **one host and one launch kind** (warm
or fresh). Building it so is the caller's job, and it matters: two hosts, or a
warm launcher and a fresh process, differ by more than most real regressions,
and nothing here could tell such a difference from a change of release.

How the others do it, and why this module does it differently
-------------------------------------------------------------
* **asv** (step detection, `asv.step_detect`) fits a piecewise-constant
  function to the per-commit values by minimising an L1 cost plus a penalty
  per step, and reports steps whose size passes a threshold. It has no
  p-value: the penalty is a tuning knob, and it reads one value per commit
  (asv keeps a spread, but the fit does not use it as its noise model).
* **conbench** flags a result whose z-score against a baseline distribution
  (the last N results on the same machine) exceeds a threshold. It compares
  one new point with a history; it needs a long history to estimate the
  spread, and it says nothing about *where* a step happened in a series.
* **E-Divisive** (MongoDB's change-point work, Hunter) does binary
  segmentation with the energy distance and a permutation test for each
  split. It is the closest model: a stated significance, no distributional
  assumption, several change points. Hunter runs on one value per commit.

This module keeps E-Divisive's skeleton -- binary segmentation, each split
tested by permutation, the max over candidate splits as the statistic so the
p-value is corrected for the number of candidates -- and changes what is
permuted and what is reported:

* The statistic is a two-sample t of the *samples* (the repeats, as logs:
  speed changes are ratios) after a candidate split against those before,
  the spread pooled within the two sides. Its null distribution is not taken
  from a table but drawn: each draw rebuilds the segment from the measured
  within-point residuals (the repeats' own scatter, permuted across points)
  plus a fresh run-to-run offset per point, whose size is estimated from how
  far the point means scatter beyond what their repeats explain. So the
  noise model is the repeats' and the runs' -- never one sample -- and two
  releases that differ by a run's luck are not a change. The max over all
  candidate splits is compared with the max of each draw, which corrects for
  the number of splits tried (a Westfall-Young max-T correction). A rank
  statistic was tried first and dropped: ranks saturate at the ends of a
  series (a 1-point segment of 3 samples can be no more extreme than
  "lowest 3"), which cost power exactly where a watch needs it, at the newest
  release.
* A split is reported with the ratio of the two adjacent segments' medians
  and a bootstrap interval for it. The bootstrap resamples the *points* of
  each segment and then the samples of each drawn point, so run-to-run
  scatter between releases widens the interval (it is not averaged away).
  A shift is claimed only when (1) the permutation p-value is below `alpha`,
  (2) the interval excludes 1 (no change), and (3) the ratio moved by at least
  `min_effect` (default 5 %): a real but tiny shift -- the few per cent any
  two environments differ by -- is never reported.
* Both sides of a split need at least `MIN_SAMPLES` (2) samples in total.
  A point with a single sample can still sit inside a segment, but no change
  is ever claimed *from it alone*: the newest release measured once is "not
  enough repeats" (`not_enough_repeats`), not a regression.

Limits, said plainly: with samples from one run per release, a difference
between two *runs* (a noisy neighbour during one release's run) looks like a
difference between releases; the interval guard and `min_effect` keep that
from being reported unless it is large. A shift at the newest release rests
on one run: re-running that release (a second run pooled into its point) is
the confirmation. The measured false-alarm rate and power are in
bench/changes.py and tests/test_watch_changes.py.

Status changes: a release whose repeats all pass is good, one whose repeats
all fail (error, crash, oom, timeout) is bad with a failure family; a release
where some repeats pass and some fail is **flaky** -- neither a break nor a
mend. Statuses that say the cell did not run (unavailable, unsupported) judge
nothing and are skipped.

Pure Python, standard library only, deterministic for a given `seed`.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness import status as st

MIN_SAMPLES = 2          # samples needed on each side of a split, in total
PERMUTATIONS = 499       # permutations for one split's test
EARLY_STOP = 40          # Besag-Clifford: stop once this many permutations beat the observed statistic
_MEDIAN_CHI2_1 = 0.4549364   # median of a chi-square with 1 degree of freedom
_MEDIAN_EFFICIENCY = 0.4     # a median of squares is worth about this share of as many degrees of freedom
BOOTSTRAP = 499          # resamples for a ratio's interval


# -- data ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One position on a release axis (in release order), one metric, one host, one launch kind."""
    label: str                 # e.g. "tensorflow 2.21.0"
    samples: tuple[float, ...]  # the cell's repeats of one metric (e.g. steady samples/s), >= 1


@dataclass(frozen=True)
class Shift:
    index: int                 # first point after the change
    before: str                # label of the last point before
    after: str                 # label of the first point after
    ratio: float               # median(after segment) / median(before segment)
    low: float                 # lower bound of the ratio's confidence interval
    high: float                # upper bound
    p_value: float             # permutation test, corrected for the number of candidate split points
    confidence: float          # 1 - p_value
    runs: int = 0              # the samples of both segments: how many runs the shift rests on


@dataclass(frozen=True)
class Outcome:
    label: str                 # release label, in release order
    statuses: tuple[str, ...]  # the status of each repeat/run of that cell at that release
    family: str | None         # the failure family / signature ("" or None when ok)


@dataclass(frozen=True)
class StatusChange:
    kind: str                  # "broke" | "mended" | "family-changed" | "flaky"
    before: str | None         # last good (or last) label before
    after: str                 # first label with the new behaviour
    detail: str                # one line a person reads


# -- shifts --------------------------------------------------------------------------------
def _clean(samples) -> list[float]:
    return [float(v) for v in samples if v is not None and math.isfinite(float(v))]


class _Segment:
    """The samples of points [start, stop) as one flat list (logs of positive metrics), with what
    every test of a split needs: the candidate splits, each with its sample counts."""

    def __init__(self, points: list[Point]):
        self.counts = [len(p.samples) for p in points]
        positive = all(v > 0 for p in points for v in p.samples)
        self.logs = [[math.log(v) if positive else v for v in p.samples] for p in points]
        self.n = n = sum(self.counts)
        # candidate splits: after j points (1 <= j < len(counts)), both sides >= MIN_SAMPLES samples
        self.cuts: list[tuple[int, int]] = []
        before = 0
        for j in range(1, len(self.counts)):
            before += self.counts[j - 1]
            if before >= MIN_SAMPLES and n - before >= MIN_SAMPLES:
                self.cuts.append((j, before))

    def stats(self, values: list[float]) -> list[float]:
        """|t| of each candidate split: the difference of the two sides' means over its standard
        error, the spread pooled *within* the two sides (a step does not inflate its own yardstick)."""
        n = len(values)
        sums, squares = [0.0], [0.0]
        for v in values:
            sums.append(sums[-1] + v)
            squares.append(squares[-1] + v * v)
        out = []
        for _, k in self.cuts:
            left, right = sums[k], sums[n] - sums[k]
            ml, mr = left / k, right / (n - k)
            ss = (squares[k] - left * ml) + (squares[n] - squares[k] - right * mr)
            var = max(ss, 0.0) / max(n - 2, 1)
            diff = abs(mr - ml)
            scale = max(abs(ml), abs(mr), 1.0)
            if var <= (1e-12 * scale) ** 2:
                out.append(math.inf if diff > 1e-12 * scale else 0.0)
            else:
                out.append(diff / math.sqrt(var * (1 / k + 1 / (n - k))))
        return out

    def noise(self, j: int) -> tuple[list[float], float, float, int]:
        """The two parts of the noise, from the data split after point j: the within-point
        residuals (each sample minus its point's mean, rescaled for the mean it lost); and the
        run-to-run part: the variance of a point's mean, robustly from successive differences
        (with the degrees of freedom it is worth), and the share of it the repeats' noise explains."""
        means = [statistics.fmean(ls) for ls in self.logs]
        residuals: list[float] = []
        for ls, m in zip(self.logs, means, strict=True):
            if len(ls) > 1:
                scale = math.sqrt(len(ls) / (len(ls) - 1))
                residuals.extend((v - m) * scale for v in ls)
        # Successive differences of point means, the one across the split left out: each other
        # step in the segment spoils one difference, and the median of their squares ignores it.
        diffs = [(means[i + 1] - means[i]) ** 2 for i in range(len(means) - 1) if i + 1 != j]
        if not residuals or len(diffs) < 3:   # no repeats, or too few points to tell run-to-run apart
            return residuals, 0.0, 0.0, 0
        within = statistics.fmean([r * r for r in residuals]) * statistics.fmean([1 / c for c in self.counts])
        spread = statistics.median(diffs) / _MEDIAN_CHI2_1 / 2   # Var(d) = 2 Var(point mean)
        return residuals, spread, within, max(2, round(_MEDIAN_EFFICIENCY * len(diffs)))


def _best_split(points: list[Point], rng: random.Random) -> tuple[int, float] | None:
    """The most significant split of a segment (index of its first point after) and its p-value:
    the max |t| over candidate splits against the max of each draw under the null, which corrects
    for the number of candidates.

    Under the null a sample is its point's run-to-run offset plus within-point noise: each draw
    permutes the within-point residuals across the segment and adds a fresh normal offset per
    point. The offsets' variance is the point means' scatter less what the repeats explain; it
    rests on few points, so each draw takes it from its sampling distribution (scaled
    chi-square), not its estimate alone -- with 6 points, a lucky low estimate would otherwise
    turn a run's luck into a change. Without repeats (every point one sample), the samples
    themselves are permuted: offsets and noise cannot be told apart then, and both are in them."""
    if len(points) < 2:
        return None
    seg = _Segment(points)
    if not seg.cuts:
        return None
    flat = [v for ls in seg.logs for v in ls]
    observed = seg.stats(flat)
    best = max(range(len(observed)), key=observed.__getitem__)
    j = seg.cuts[best][0]
    top = observed[best] - 1e-9
    if top <= 0:
        return j, 1.0
    residuals, spread, within, df = seg.noise(j)
    beaten = 0
    done = 0
    for done in range(1, PERMUTATIONS + 1):
        if residuals:
            rng.shuffle(residuals)
            pool = residuals * (seg.n // len(residuals) + 1)
            offset = 0.0
            if df:
                drawn = spread * df / rng.gammavariate(df / 2, 2.0) - within
                offset = math.sqrt(drawn) if drawn > 0 else 0.0
            draw: list[float] = []
            k = 0
            for c in seg.counts:
                b = rng.gauss(0.0, offset) if offset else 0.0
                draw.extend(pool[k + i] + b for i in range(c))
                k += c
        else:
            rng.shuffle(flat)
            draw = flat
        if max(seg.stats(draw)) >= top:
            beaten += 1
            if beaten >= EARLY_STOP:  # clearly not significant: the sequential p-value is beaten / done
                return j, beaten / done
    return j, (beaten + 1) / (done + 1)


def _median_of(points: Sequence[Point]) -> float:
    return statistics.median([v for p in points for v in p.samples])


def _interval(before: list[Point], after: list[Point], rng: random.Random, level: float) -> tuple[float, float]:
    """Percentile bootstrap interval of median(after)/median(before): points resampled within each
    segment, then samples within each drawn point (run-to-run scatter widens it)."""
    def draw(points: list[Point]) -> list[float]:
        out: list[float] = []
        for _ in points:
            samples = rng.choice(points).samples
            out.extend(rng.choice(samples) for _ in samples)
        return out

    ratios = []
    for _ in range(BOOTSTRAP):
        b = statistics.median(draw(before))
        if b > 0:
            ratios.append(statistics.median(draw(after)) / b)
    if not ratios:
        return math.nan, math.nan
    ratios.sort()
    tail = (1 - level) / 2
    lo = ratios[max(0, int(math.floor(tail * len(ratios))))]
    hi = ratios[min(len(ratios) - 1, int(math.ceil((1 - tail) * len(ratios))) - 1)]
    return lo, hi


def find_shifts(points: Sequence[Point], *, alpha: float = 0.05, min_effect: float = 0.05,
                seed: int = 0) -> list[Shift]:
    """Change points in a series of releases. Noise comes from the repeats within each point and
    from run-to-run variation; a shift smaller than `min_effect` (relative) is never reported.

    Binary segmentation: the whole series is tested; a significant split (p < `alpha`) cuts it in
    two and each part is tested again. The shifts are then sized between adjacent final segments
    and kept when their interval excludes 1 and their size reaches `min_effect`. The series must
    be one host, one launch kind (see the module's docstring). Values are positive metrics
    (samples/s, seconds, accuracy); a point's non-finite samples are dropped."""
    pts = [Point(p.label, tuple(_clean(p.samples))) for p in points]
    pts = [p for p in pts if p.samples]
    rng = random.Random(seed)
    cuts: dict[int, float] = {}   # index of first point after -> p-value
    todo = [(0, len(pts))]
    while todo:
        start, stop = todo.pop()
        found = _best_split(pts[start:stop], rng)
        if found is None:
            continue
        j, p = found
        if p >= alpha:
            continue
        cuts[start + j] = p
        todo.extend([(start, start + j), (start + j, stop)])
    bounds = [0, *sorted(cuts), len(pts)]
    shifts = []
    for k in range(1, len(bounds) - 1):
        before, after = pts[bounds[k - 1]:bounds[k]], pts[bounds[k]:bounds[k + 1]]
        base = _median_of(before)
        if base <= 0:
            continue
        ratio = _median_of(after) / base
        if abs(ratio - 1) < min_effect:
            continue
        low, high = _interval(before, after, rng, 1 - alpha)
        if not (low > 1 or high < 1):
            continue
        p = cuts[bounds[k]]
        shifts.append(Shift(index=bounds[k], before=before[-1].label, after=after[0].label, ratio=ratio,
                            low=low, high=high, p_value=p, confidence=1 - p,
                            runs=sum(len(q.samples) for q in before + after)))
    return shifts


def not_enough_repeats(points: Sequence[Point]) -> list[str]:
    """Labels at the newest end of the series that no change can be claimed at: fewer than
    `MIN_SAMPLES` samples in total from there on. A watch says so instead of guessing."""
    labels: list[str] = []
    total = 0
    for p in reversed(points):
        total += len(_clean(p.samples))
        if total >= MIN_SAMPLES:
            break
        labels.append(p.label)
    return list(reversed(labels))


# -- status changes ------------------------------------------------------------------------
_FAILED_WORDS = {st.ERROR: "fails", st.CRASH: "crashes", st.OOM: "runs out of memory", st.TIMEOUT: "times out"}


def _judged(outcome: Outcome) -> tuple[str, str] | None:
    """("good" | "bad" | "flaky", failure) of one release, None when nothing ran."""
    ran = [s for s in outcome.statuses if s not in st.NOT_RUN]
    if not ran:
        return None
    failed = [s for s in ran if s != st.OK]
    if not failed:
        return "good", ""
    if len(failed) < len(ran):
        return "flaky", f"{len(failed)} of {len(ran)} runs failed, {statistics.mode(failed)}"
    word = statistics.mode(failed)
    return "bad", f"{word}|{outcome.family or ''}"


def failure_words(failure: str) -> str:
    """'crashes (family)' from the 'status|family' a release failed with."""
    word, _, family = failure.partition("|")
    text = _FAILED_WORDS.get(word, word)
    return f"{text} ({family})" if family else text


def status_changes(outcomes: Sequence[Outcome]) -> list[StatusChange]:
    """Breaks, mends, changed failure families and flaky releases along one cell's releases.

    `before` of a break is the last release where every repeat passed; of a mend, the last
    release that failed. A flaky release (repeats disagree) is reported once per streak and
    never counts as good or bad: ok, flaky, crash is a flaky release and then a break from the
    last good one."""
    out: list[StatusChange] = []
    state = None         # "good" | "bad"
    failure = ""
    last_good = last_bad = None
    was_flaky = False
    previous = None
    for outcome in outcomes:
        judged = _judged(outcome)
        if judged is None:
            continue
        kind, what = judged
        if kind == "flaky":
            if not was_flaky:
                out.append(StatusChange("flaky", previous, outcome.label, f"flaky: {what}"))
            was_flaky = True
            previous = outcome.label
            continue
        was_flaky = False
        if kind == "good":
            if state == "bad":
                out.append(StatusChange("mended", last_bad, outcome.label,
                                        f"passes again (was: {failure_words(failure)})"))
            state, last_good = "good", outcome.label
        else:
            if state == "good":
                out.append(StatusChange("broke", last_good, outcome.label, failure_words(what)))
            elif state == "bad" and what != failure:
                out.append(StatusChange("family-changed", last_bad, outcome.label,
                                        f"{failure_words(what)}, was: {failure_words(failure)}"))
            state, failure, last_bad = "bad", what, outcome.label
        previous = outcome.label
    return out
