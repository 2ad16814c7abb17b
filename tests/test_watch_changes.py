"""The change-point method, measured: quiet on replays of pure noise, finds a planted 15 %
slow-down, and reads breaks, mends and flaky releases from statuses. Seeded, pure Python.
Run with -s to see the measured rates."""

from __future__ import annotations

import random
import re

import pytest

from harness import status
from harness.watch.changelog import change_id, describe, entry, from_dict, from_shift, from_status, to_dict
from harness.watch.changes import Outcome, Point, find_shifts, not_enough_repeats, status_changes

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

TRIALS = 200


def noisy_series(rng: random.Random, step: float = 0.0, noise: str = "lognormal"):
    """6-10 releases, 3-5 repeats each, CV 2-5 %; with `step`, every release from a random
    position on is that much slower. Returns (points, index of the step or None)."""
    n, repeats, cv = rng.randint(6, 10), rng.randint(3, 5), rng.uniform(0.02, 0.05)
    at = rng.randint(1, n - 1) if step else None
    points = []
    for i in range(n):
        level = 1000.0 * (1 - step if at is not None and i >= at else 1.0)
        draw = (lambda: rng.lognormvariate(0, cv)) if noise == "lognormal" else (lambda: rng.gauss(1, cv))
        points.append(Point(f"pkg 1.{i}.0", tuple(level * draw() for _ in range(repeats))))
    return points, at


@pytest.mark.parametrize("noise", ["lognormal", "normal"])
def test_quiet_on_pure_noise(noise):
    rng = random.Random(20260308)
    alarms = sum(bool(find_shifts(noisy_series(rng, noise=noise)[0], seed=t)) for t in range(TRIALS))
    rate = alarms / TRIALS
    print(f"\npure {noise} noise: {alarms}/{TRIALS} trials reported a change (false-alarm rate {rate:.1%})")
    assert rate <= 0.05


@pytest.mark.parametrize("noise", ["lognormal", "normal"])
def test_finds_a_planted_15_percent_slowdown(noise):
    rng = random.Random(15)
    found = 0
    for t in range(TRIALS):
        points, at = noisy_series(rng, step=0.15, noise=noise)
        shifts = find_shifts(points, seed=t)
        hit = [s for s in shifts if s.index == at]
        if hit and hit[0].ratio < 1 and hit[0].low <= 0.85 * 1.03 and hit[0].high >= 0.85 * 0.97:
            found += 1
    rate = found / TRIALS
    print(f"\nplanted 15 % slow-down, {noise} noise: found at the right release in {found}/{TRIALS} ({rate:.1%})")
    assert rate >= 0.95


def test_shift_reports_size_interval_and_confidence():
    rng = random.Random(3)
    points = [Point(f"tensorflow 2.{i}.0", tuple(500 * (0.8 if i >= 4 else 1) * rng.lognormvariate(0, 0.03)
                                                  for _ in range(4))) for i in range(8)]
    [shift] = find_shifts(points, seed=1)
    assert (shift.index, shift.before, shift.after) == (4, "tensorflow 2.3.0", "tensorflow 2.4.0")
    assert shift.low < shift.ratio < shift.high < 1
    assert 0.75 < shift.ratio < 0.85
    assert shift.p_value < 0.05 and shift.confidence == pytest.approx(1 - shift.p_value)
    assert find_shifts(points, seed=1) == [shift]   # deterministic for a seed


def test_two_steps_are_two_shifts():
    rng = random.Random(5)
    levels = [1, 1, 1, 0.8, 0.8, 0.8, 1.1, 1.1, 1.1]
    points = [Point(str(i), tuple(100 * lv * rng.lognormvariate(0, 0.02) for _ in range(4)))
              for i, lv in enumerate(levels)]
    assert [s.index for s in find_shifts(points)] == [3, 6]


def test_a_small_real_shift_is_not_reported():
    rng = random.Random(9)
    points = [Point(str(i), tuple(100 * (0.97 if i >= 4 else 1) * rng.lognormvariate(0, 0.002)
                                  for _ in range(5))) for i in range(8)]
    assert find_shifts(points, min_effect=0.05) == []
    assert [s.index for s in find_shifts(points, min_effect=0.01)] == [4]


def test_single_samples_claim_nothing_alone():
    base = [Point(str(i), (100.0, 101.0, 99.0)) for i in range(6)]
    newest = Point("new", (70.0,))
    assert find_shifts([*base, newest]) == []
    assert not_enough_repeats([*base, newest]) == ["new"]
    assert not_enough_repeats(base) == []
    again = Point("new", (70.0, 71.0))   # a second run of the same release: now it can be judged
    assert [s.after for s in find_shifts([*base, again])] == ["new"]


def test_degenerate_series():
    assert find_shifts([]) == []
    assert find_shifts([Point("a", (1.0, 1.0))]) == []
    assert find_shifts([Point(str(i), (5.0, 5.0, 5.0)) for i in range(6)]) == []
    # a deterministic metric that moves is a change with any number of repeats >= 2 a side
    steps = [Point(str(i), (0.9, 0.9) if i < 3 else (0.5, 0.5)) for i in range(6)]
    assert [s.index for s in find_shifts(steps)] == [3]
    # zeros (an accuracy of 0) and non-finite samples do not break it
    assert find_shifts([Point(str(i), (0.0, float("nan"), 0.0)) for i in range(5)]) == []


# -- statuses -----------------------------------------------------------------------------
def outcomes(*spec):
    """spec: per release a tuple of statuses, or (statuses, family)."""
    out = []
    for i, item in enumerate(spec):
        statuses, family = item if isinstance(item[0], tuple) else (item, None)
        out.append(Outcome(f"3.{i}.0", statuses, family))
    return out


def test_planted_break_is_broke_at_the_right_release():
    crash = ((status.CRASH,) * 3, "BatchNotDivisible")
    found = status_changes(outcomes((status.OK,) * 3, (status.OK,) * 3, crash, crash))
    assert [(c.kind, c.before, c.after) for c in found] == [("broke", "3.1.0", "3.2.0")]
    assert "crashes" in found[0].detail and "BatchNotDivisible" in found[0].detail


def test_planted_mend_is_mended():
    found = status_changes(outcomes(((status.ERROR,) * 2, "TypeError"), ((status.ERROR,) * 2, "TypeError"),
                                    (status.OK,) * 2))
    assert [(c.kind, c.before, c.after) for c in found] == [("mended", "3.1.0", "3.2.0")]


def test_disagreeing_repeats_are_flaky_not_broke():
    found = status_changes(outcomes((status.OK,) * 3, (status.OK, status.TIMEOUT, status.OK), (status.OK,) * 3))
    assert [(c.kind, c.after) for c in found] == [("flaky", "3.1.0")]
    # flaky, then really broken: the break names the last release where every repeat passed
    found = status_changes(outcomes((status.OK,) * 2, (status.OK, status.CRASH), ((status.CRASH,) * 2, "SIGSEGV")))
    assert [(c.kind, c.before, c.after) for c in found] == [("flaky", "3.0.0", "3.1.0"), ("broke", "3.0.0", "3.2.0")]


def test_family_change_and_not_run():
    found = status_changes(outcomes(((status.ERROR,), "ImportError"), ((status.UNAVAILABLE,), "no wheel"),
                                    ((status.CRASH,), "SIGSEGV")))
    assert [(c.kind, c.before, c.after) for c in found] == [("family-changed", "3.0.0", "3.2.0")]
    # a release that could not run judges nothing: ok, unavailable, ok is no change
    assert status_changes(outcomes((status.OK,), (status.UNSUPPORTED,), (status.OK,))) == []


def test_planted_status_replays():
    """Random histories with one planted break (or mend), 1-4 repeats a release: always found where planted."""
    rng = random.Random(32)
    right = 0
    for _ in range(TRIALS):
        n, at, reps = rng.randint(3, 10), None, rng.randint(1, 4)
        at = rng.randint(1, n - 1)
        mend = rng.random() < 0.5
        spec = []
        for i in range(n):
            bad = (i < at) if mend else (i >= at)
            spec.append(((status.CRASH,) * reps, "SIGSEGV") if bad else ((status.OK,) * reps, None))
        found = status_changes(outcomes(*spec))
        if [(c.kind, c.after) for c in found] == [("mended" if mend else "broke", f"3.{at}.0")]:
            right += 1
    print(f"\nplanted break/mend: found at the right release in {right}/{TRIALS}")
    assert right == TRIALS


# -- the change log's words -------------------------------------------------------------------
def test_describe_slowdown_like_the_issue():
    change = entry("m", "GRU on 2 devices", "slower", "tensorflow", "2.20.0", "2.21.0", "2026-03-08", ratio=0.82,
                   low=0.76, high=0.88, confidence=0.99, bisected_to="2.21.0rc1")
    assert change.id == change_id("m", "GRU on 2 devices", "slower", "2.21.0")
    assert describe(change) == ("tensorflow 2.21.0: GRU on 2 devices 18 % slower [12-24 %], first seen 2026-03-08, "
                                "bisected to 2.21.0rc1")


def test_describe_break_and_roundtrip():
    from harness.watch.changes import StatusChange
    sc = StatusChange("broke", "3.11.3", "3.12.0", "crashes (BatchNotDivisible)")
    change = from_status("m", "lstm-2gpu", "keras", sc, "2026-03-09", evidence=["results/x/result.json"])
    assert change.where["summary"] == ("keras 3.12.0: lstm-2gpu crashes (BatchNotDivisible), last good 3.11.3, "
                                       "first seen 2026-03-09")
    assert from_dict(to_dict(change)) == change
    assert change.id == from_status("m", "lstm-2gpu", "keras", sc, "2026-04-01").id   # stable across days


def test_from_shift_speaks_of_seconds_like_samples_per_second():
    rng = random.Random(1)
    points = [Point(f"numpy 2.{i}.0", tuple(10 * (1.25 if i >= 3 else 1) * rng.lognormvariate(0, 0.02)
                                            for _ in range(3))) for i in range(6)]
    [shift] = find_shifts(points)
    change = from_shift("m", "mlp", "numpy", shift, "2026-03-08", higher_is_better=False)
    assert change.kind == "slower" and change.low < change.size < change.high < 1
    assert change.runs == 18   # every repeat of both segments
    assert re.match(r"numpy 2\.3\.0: mlp (19|20|21) % slower \[\d+-\d+ %\], first seen 2026-03-08$",
                    change.where["summary"])
