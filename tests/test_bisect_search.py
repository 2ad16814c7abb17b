"""The bisect search as a pure function of a version list and an oracle: fast, table-driven."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import status
from harness.bisect import BAD, GOOD, SKIP, Criteria, Verdict, judge, probes, search
from harness.result import Result

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

VERSIONS = [f"1.{i}.0" for i in range(16)]


def oracle_from(kinds: dict[str, str], calls: list[list[str]] | None = None):
    """An oracle that answers from a table and remembers each round it was asked."""
    def oracle(asked):
        if calls is not None:
            calls.append(list(asked))
        return {v: Verdict(kinds[v], f"{kinds[v]} at {v}") for v in asked}
    return oracle


def first_bad_at(n: int, versions=VERSIONS) -> dict[str, str]:
    return {v: (BAD if i >= n else GOOD) for i, v in enumerate(versions)}


@pytest.mark.parametrize("bad_from", range(1, 16))
@pytest.mark.parametrize("jobs", [1, 2, 3, 5])
def test_finds_the_first_bad_release_wherever_it_is(bad_from, jobs):
    calls = []
    found = search(VERSIONS, oracle_from(first_bad_at(bad_from), calls), jobs=jobs)
    assert found.first_bad == VERSIONS[bad_from]
    assert found.last_good == VERSIONS[bad_from - 1]
    assert not found.problem and not found.warnings
    assert all(len(c) <= max(2, jobs) for c in calls)          # at most `jobs` releases a round (2 for the ends)
    assert len({v for c in calls for v in c}) == sum(len(c) for c in calls)  # nobody asked twice


def test_fewer_tests_than_a_linear_sweep_and_fewer_rounds_with_more_jobs():
    rounds = {}
    for jobs in (1, 3):
        calls = []
        found = search(VERSIONS, oracle_from(first_bad_at(11), calls), jobs=jobs)
        assert found.first_bad == "1.11.0"
        assert len(found.tested) < len(VERSIONS)
        rounds[jobs] = len(calls)
    assert rounds[1] <= 2 + math.ceil(math.log2(len(VERSIONS)))
    assert rounds[3] < rounds[1]


def test_skipped_releases_are_stepped_around():
    kinds = first_bad_at(9)
    kinds.update({"1.7.0": SKIP, "1.8.0": SKIP, "1.4.0": SKIP})
    found = search(VERSIONS, oracle_from(kinds))
    # 1.9.0 is bad and 1.6.0 good; 1.7.0 and 1.8.0 cannot be installed: the answer is one of three
    assert found.last_good == "1.6.0"
    assert found.first_bad is None
    assert found.candidates == ["1.7.0", "1.8.0", "1.9.0"]
    assert found.tested["1.7.0"].kind == SKIP and found.tested["1.8.0"].kind == SKIP


def test_a_skip_away_from_the_change_does_not_blur_the_answer():
    kinds = first_bad_at(9)
    kinds.update({"1.7.0": SKIP, "1.3.0": SKIP})
    found = search(VERSIONS, oracle_from(kinds))
    assert found.first_bad == "1.9.0" and found.last_good == "1.8.0"


def test_a_flaky_middle_is_reported_as_where_it_started_and_flagged():
    """1.5.0 .. 1.9.0 fail one repeat in three; from 1.10.0 on every repeat fails. The change is
    that the cell stops always working: 1.5.0, marked flaky, and each release is asked once."""
    ok = Result(cell="c", status=status.OK, metrics={"val_accuracy": 0.9})
    err = Result(cell="c", status=status.ERROR, error={"signature": "exception: ValueError: x"})
    calls = []

    def repeats_of(i):
        if i >= 10:
            return [err, err, err]
        if i >= 5:
            return [ok, err, ok]
        return [ok, ok, ok]

    def oracle(asked):
        calls.append(asked)
        good = judge(repeats_of(0), None).evidence
        return {v: judge(repeats_of(VERSIONS.index(v)), None if v == VERSIONS[0] else good) for v in asked}

    found = search(VERSIONS, oracle)
    assert found.first_bad == "1.5.0"
    assert found.tested["1.5.0"].flaky and found.tested["1.5.0"].kind == BAD
    assert not found.tested["1.15.0"].flaky


def test_a_non_monotone_middle_gives_a_change_and_a_warning():
    kinds = first_bad_at(12)
    kinds["1.4.0"] = BAD  # bad once in the middle, good again after it
    found = search(VERSIONS, oracle_from(kinds), jobs=3)  # round 1 tests 1.4.0, 1.8.0 and 1.11.0
    assert found.first_bad == "1.4.0" and found.last_good == "1.3.0"
    assert any("not monotone" in w and "1.8.0" in w for w in found.warnings)


@pytest.mark.parametrize("ends, problem", [((BAD, BAD), "good end"), ((GOOD, GOOD), "bad end"),
                                           ((SKIP, BAD), "good end"), ((GOOD, SKIP), "bad end")])
def test_bounds_that_do_not_bracket_a_change_give_no_answer(ends, problem):
    kinds = first_bad_at(8)
    kinds[VERSIONS[0]], kinds[VERSIONS[-1]] = ends
    calls = []
    found = search(VERSIONS, oracle_from(kinds, calls))
    assert problem in found.problem and found.first_bad is None
    assert len(calls) == 1  # nothing more is run once the ends are wrong


def test_probes_spread_evenly():
    assert probes(list(range(1, 15)), 1) == [8]
    assert probes(list(range(1, 15)), 3) == [4, 8, 11]
    assert probes([3], 4) == [3]


def _ok(acc, rates):
    return Result(cell="c", status=status.OK, metrics={"val_accuracy": acc},
                  epochs=[{"samples_per_sec": None}] + [{"samples_per_sec": r} for r in rates])


def test_metric_criteria_are_noise_aware():
    good = judge([_ok(0.9, [1000, 1100, 950])], None).evidence
    crit = Criteria(accuracy_drop=0.05, speed_drop=20)
    assert judge([_ok(0.88, [990, 1050])], good, crit).kind == GOOD
    assert judge([_ok(0.80, [990, 1050])], good, crit).kind == BAD
    assert judge([_ok(0.9, [600, 700])], good, crit).kind == BAD
    # 25 % slower by median but inside the good end's range: noise, not a change
    wide = judge([_ok(0.9, [500, 1000, 1500])], None).evidence
    assert judge([_ok(0.9, [700, 760, 800])], wide, crit).kind == GOOD
    assert judge([_ok(0.9, [600, 700])], good, Criteria()).kind == GOOD  # no speed option: status only


def test_timeouts_and_crashes_are_bad_and_unavailable_is_a_skip():
    good = judge([_ok(0.9, [1000])], None).evidence
    for word in (status.TIMEOUT, status.CRASH, status.OOM, status.ERROR):
        assert judge([Result(cell="c", status=word)], good).kind == BAD
    skip = judge([Result(cell="c", status=status.UNAVAILABLE,
                         reason="pip install failed: No matching distribution found for numpy==9")], good)
    assert skip.kind == SKIP and "No matching distribution" in skip.why


@given(n=st.integers(2, 40), data=st.data(), jobs=st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_any_monotone_sequence_with_skips(n, data, jobs):
    """Whatever the list, the change and the skips: the answer brackets the true change,
    only skipped releases lie between, and no release is asked twice."""
    versions = [f"0.{i}" for i in range(n)]
    change = data.draw(st.integers(1, n - 1))
    skips = data.draw(st.sets(st.integers(1, n - 2), max_size=n // 2)) if n > 2 else set()
    kinds = {v: SKIP if i in skips else (BAD if i >= change else GOOD) for i, v in enumerate(versions)}
    calls = []
    found = search(versions, oracle_from(kinds, calls), jobs=jobs)
    assert sum(len(c) for c in calls) == len({v for c in calls for v in c})
    lo, hi = versions.index(found.last_good), versions.index(found.candidates[-1])
    assert lo < change <= hi
    assert all(kinds[v] == SKIP for v in found.candidates[:-1])
    assert found.first_bad == (versions[change] if not found.candidates[:-1] else None)
    if not skips:
        assert len(found.tested) <= 2 + jobs * math.ceil(math.log(max(n - 2, 1), jobs + 1) + 1)


def test_a_value_the_matrix_expects_and_a_release_does_not_give_is_bad():
    """A silent change (the run is ok, a number differs): `expect:` values count, when the good
    end met them; an end that misses them is not good."""
    def run(lr):
        met = abs(lr - 0.0068) < 1e-4
        return Result(cell="c", status=status.OK, metrics={"learning_rate_after": lr},
                      expectation={"met": met, "values": [{"metric": "learning_rate_after", "got": lr,
                                                           "want": 0.0068, "met": met,
                                                           "detail": f"learning_rate_after {lr} != 0.0068"}]})
    good = judge([run(0.0068)], None)
    assert good.kind == GOOD
    silent = judge([run(0.01)], good.evidence)
    assert silent.kind == BAD and "expectation not met: learning_rate_after 0.01 != 0.0068" in silent.why
    assert judge([run(0.0068), run(0.01)], good.evidence).flaky
    assert judge([run(0.01)], None).kind == BAD, "a good end that misses the value is not good"
