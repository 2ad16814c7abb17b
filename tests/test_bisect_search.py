"""The bisect search as a pure function of a version list and an oracle: fast, table-driven."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import status
from harness.investigate.bisect_judge import Criteria, judge, judge_ends
from harness.investigate.bisect_search import BAD, GOOD, SKIP, Verdict, probes, search
from harness.results.result import Result

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


@pytest.mark.parametrize("ends, problem", [((BAD, BAD), "do not differ"), ((GOOD, GOOD), "do not differ"),
                                           ((SKIP, BAD), "old end 1.0.0 cannot be judged"),
                                           ((GOOD, SKIP), "new end 1.15.0 cannot be judged")])
def test_bounds_that_do_not_bracket_a_change_give_no_answer(ends, problem):
    kinds = first_bad_at(8)
    kinds[VERSIONS[0]], kinds[VERSIONS[-1]] = ends
    calls = []
    found = search(VERSIONS, oracle_from(kinds, calls))
    assert problem in found.problem and found.after is None and found.direction is None
    assert len(calls) == 1  # nothing more is run once the ends are wrong


def first_good_at(n: int, versions=VERSIONS) -> dict[str, str]:
    """Broken up to release n, mended from it on."""
    return {v: (GOOD if i >= n else BAD) for i, v in enumerate(versions)}


@pytest.mark.parametrize("good_from", range(1, 16))
@pytest.mark.parametrize("jobs", [1, 3])
def test_a_bad_old_end_and_a_good_new_one_find_the_first_good_release(good_from, jobs):
    """The other question: the stack is broken, which release mends it? The ends say which way."""
    calls = []
    found = search(VERSIONS, oracle_from(first_good_at(good_from), calls), jobs=jobs)
    assert (found.direction, found.first_good, found.last_bad) == ("mended", VERSIONS[good_from],
                                                                   VERSIONS[good_from - 1])
    assert found.first_bad is None and found.last_good is None     # the break's names do not apply
    assert found.answer() == {"direction": "mended", "first_good": VERSIONS[good_from],
                              "last_bad": VERSIONS[good_from - 1], "first_bad": None, "last_good": None}
    assert not found.problem and not found.warnings
    assert len({v for c in calls for v in c}) == sum(len(c) for c in calls)  # nobody asked twice


def test_a_break_is_still_a_break_and_says_so():
    found = search(VERSIONS, oracle_from(first_bad_at(6)))
    assert (found.direction, found.first_bad, found.last_good, found.first_good) == ("broke", "1.6.0", "1.5.0", None)
    assert [(s.before, s.after) for s in found.steps][0] == ("1.0.0", "1.15.0")


def test_a_mend_behind_skipped_releases_gives_the_candidates():
    kinds = first_good_at(9)
    kinds.update({"1.7.0": SKIP, "1.8.0": SKIP})
    found = search(VERSIONS, oracle_from(kinds))
    assert found.direction == "mended" and found.last_bad == "1.6.0" and found.first_good is None
    assert found.candidates == ["1.7.0", "1.8.0", "1.9.0"]


def test_a_mend_that_breaks_again_in_between_warns():
    kinds = first_good_at(4)
    kinds["1.8.0"] = BAD   # mended at 1.4.0, broken once more at 1.8.0
    found = search(VERSIONS, oracle_from(kinds), jobs=3)  # round 1 tests 1.4.0, 1.8.0 and 1.11.0
    assert found.first_good == "1.4.0" and found.last_bad == "1.3.0"
    assert any("not monotone" in w and "1.8.0" in w for w in found.warnings), found.warnings


@pytest.mark.parametrize("expect, ends, problem", [
    ("broke", (BAD, BAD), "the old end 1.0.0 is not good"), ("broke", (GOOD, GOOD), "the new end 1.15.0 is not bad"),
    ("broke", (BAD, GOOD), "the old end 1.0.0 is not good"),
    ("mended", (GOOD, BAD), "the old end 1.0.0 is not bad"), ("mended", (BAD, BAD), "the new end 1.15.0 is not good"),
])
def test_nights_must_change_the_way_the_releases_did(expect, ends, problem):
    """Below the releases the ends are asked to differ as the releases did: a night before a break
    that is already bad is not where the break came in, whatever the rest of the nights do."""
    kinds = first_bad_at(8)
    kinds[VERSIONS[0]], kinds[VERSIONS[-1]] = ends
    found = search(VERSIONS, oracle_from(kinds), expect=expect)
    assert problem in found.problem and found.after is None


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


@given(n=st.integers(2, 40), data=st.data(), jobs=st.integers(1, 6), mend=st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_monotone_sequence_with_skips(n, data, jobs, mend):
    """Whatever the list, the change, its direction and the skips: the answer brackets the true
    change, only skipped releases lie between, and no release is asked twice."""
    versions = [f"0.{i}" for i in range(n)]
    change = data.draw(st.integers(1, n - 1))
    skips = data.draw(st.sets(st.integers(1, n - 2), max_size=n // 2)) if n > 2 else set()
    before, after = (BAD, GOOD) if mend else (GOOD, BAD)
    kinds = {v: SKIP if i in skips else (after if i >= change else before) for i, v in enumerate(versions)}
    calls = []
    found = search(versions, oracle_from(kinds, calls), jobs=jobs)
    assert sum(len(c) for c in calls) == len({v for c in calls for v in c})
    assert found.direction == ("mended" if mend else "broke")
    lo, hi = versions.index(found.before), versions.index(found.candidates[-1])
    assert lo < change <= hi
    assert all(kinds[v] == SKIP for v in found.candidates[:-1])
    assert found.after == (versions[change] if not found.candidates[:-1] else None)
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


def _value(lr: float, want: float = 0.0068) -> Result:
    met = abs(lr - want) < 1e-4
    return Result(cell="c", status=status.OK, metrics={"learning_rate_after": lr},
                  expectation={"met": met, "values": [{"metric": "learning_rate_after", "got": lr, "want": want,
                                                       "met": met, "detail": f"learning_rate_after {lr} != {want}"}]})


def test_each_end_is_judged_by_what_it_does_not_by_its_place():
    """An end that fails is bad and one that works is good, whichever is older; the end that
    works is the yardstick: the one every release between is judged against."""
    err = Result(cell="c", status=status.ERROR, error={"signature": "exception: AttributeError: spmd_mode"})
    old, new = judge_ends([err], [_ok(0.9, [1000])])
    assert (old.kind, new.kind) == (BAD, GOOD) and "spmd_mode" in old.why and "1 ok" in new.why
    old, new = judge_ends([_ok(0.9, [1000])], [err])
    assert (old.kind, new.kind) == (GOOD, BAD)
    # a value the matrix expects, missed by the older end and given again by the newer: a mend
    old, new = judge_ends([_value(0.01)], [_value(0.0068)])
    assert (old.kind, new.kind) == (BAD, GOOD)
    # both fail: no end works, nothing to measure against
    old, new = judge_ends([err], [Result(cell="c", status=status.TIMEOUT)])
    assert (old.kind, new.kind) == (BAD, BAD)


def test_between_two_working_ends_the_worse_one_is_bad():
    """A speed or accuracy shift between two working ends goes either way: a slower newer end
    is a break, a slower older end a mend; within the noise, neither."""
    crit = Criteria(accuracy_drop=0.05, speed_drop=20)
    fast, slow = [_ok(0.9, [1000, 1100, 950])], [_ok(0.9, [600, 650, 700])]
    assert [v.kind for v in judge_ends(fast, slow, crit)] == [GOOD, BAD]
    assert [v.kind for v in judge_ends(slow, fast, crit)] == [BAD, GOOD]
    low = [_ok(0.7, [1000, 1100, 950])]
    assert [v.kind for v in judge_ends(low, fast, crit)] == [BAD, GOOD]
    assert [v.kind for v in judge_ends(fast, [_ok(0.89, [990, 1050])], crit)] == [GOOD, GOOD]
    assert [v.kind for v in judge_ends(fast, slow, Criteria())] == [GOOD, GOOD]   # no criterion: status only
