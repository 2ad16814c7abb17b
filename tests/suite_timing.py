"""Where the suite's time goes, printed at the end of every run so that CI's log keeps it.

Two tables after pytest's own summary:

* **per test file**: the summed time of its tests (setup + call + teardown, where a module's
  shared fixture is charged to its first test), how many ran, and its share of the whole -- a
  sum of work, which a run on several workers spreads over less wall time;
* **environments built**: every environment this run built rather than reused, by engine, with
  its seconds, read from the harness's build ledger (``harness.environments.ledger``) of every cache the run
  used (the user's, and the temporary ones tests make under pytest's base folder); and the **cells
  run**, from the same ledgers: the seconds their processes held, and how much of it went to starting
  interpreters and importing stacks and to first epochs -- the fixed costs a real-stack test pays;
  and the cells **by file**: each test runs with the ledger's tag (``ledger.TAG_VARIABLE``) set to its
  file, so every line its harness runs write says whose it is (the ledgers of caches a passing
  test removed with its folder are gone by then: those cells are in no count).

Then one line naming the machine: its CPU model, whether it has AVX-512, the cores the run could
use and the workers. The same commit's summed time has differed more than twofold between machines
of one size (docs/reference/tests.md), so a figure from a log is comparable only with the machine it
ran on, which the log would otherwise not name; ``bench/suite_cost.py`` reads it back.

pytest's ``--durations`` (set in pyproject.toml) lists the slowest tests themselves.

The same figures order the next run: the suite runs on several workers with each file on
one worker (``--dist loadfile``), so the longest files start first and the workers finish
together instead of one of them starting a four-minute file last. The order comes from the
previous run's figures (pytest's cache) or, on a fresh checkout such as CI's, from
`LONG_FIRST`, measured on a 2-core machine.
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

from bench import suite_cost
from harness.environments import ledger
from harness.files.paths import cache_dir

# seconds per file on 2 cores, from nothing (CI's own table, three workers, 9da04f7 on an AMD EPYC without AVX-512;
# bench/records/suite/); a clean clone has no cache of its own, so this orders its files; only the order matters
LONG_FIRST = {"tests/test_user_workloads.py": 586, "tests/test_upgrade.py": 538, "tests/test_wrappers.py": 525,
              "tests/test_warm.py": 512, "tests/test_verdict_tf.py": 441, "tests/test_slurm.py": 347,
              "tests/test_toolchain.py": 321, "tests/test_portability.py": 300, "tests/test_trust.py": 296,
              "tests/test_held_out.py": 260, "tests/test_certify.py": 252, "tests/test_bisect_real.py": 235,
              "tests/test_atlas.py": 225, "tests/test_diverge.py": 216, "tests/test_build.py": 212,
              "tests/test_reduce.py": 210, "tests/test_controls.py": 157, "tests/test_releases.py": 152,
              "tests/test_reduce_confined.py": 136, "tests/test_programs_ahead.py": 134,
              "tests/test_repro.py": 133, "tests/test_readme_door.py": 125, "tests/test_smoke_real.py": 118,
              "tests/test_home.py": 112, "tests/test_scheduler.py": 106}
CACHE_KEY = "suite_timing/seconds_per_file"

_started = time.time()
_per_file: dict[str, float] = defaultdict(float)
_tests_per_file: dict[str, set[str]] = defaultdict(set)
_cpu_per_file: dict[str, float] = defaultdict(float)
_cpu_mark = 0.0


def _cpu() -> float:
    """CPU seconds of this worker and of every process it started and waited for (a harness
    run's cells among them, as the harness waits for them). A container's processes are the
    Docker daemon's children, not in it."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's file as the ledger's tag, for every harness run the test starts (its fixtures'
    too), restored after it: set around the whole test, so no test sees it change."""
    before = os.environ.get(ledger.TAG_VARIABLE)
    os.environ[ledger.TAG_VARIABLE] = item.nodeid.split("::", 1)[0]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ledger.TAG_VARIABLE, None)
        else:
            os.environ[ledger.TAG_VARIABLE] = before


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    global _cpu_mark
    _cpu_mark = _cpu()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's CPU, carried to the controller on its report (work, where the wall is also
    the waiting and the other workers' share of the cores)."""
    global _cpu_mark
    outcome = yield
    now = _cpu()
    outcome.get_result().user_properties.append(("cpu_seconds", round(now - _cpu_mark, 3)))
    _cpu_mark = now


def pytest_runtest_logreport(report) -> None:
    """Every phase of every test, on the controller too when tests run on several workers."""
    path = report.nodeid.split("::", 1)[0]
    _per_file[path] += report.duration
    _tests_per_file[path].add(report.nodeid)
    _cpu_per_file[path] += sum(v for k, v in report.user_properties if k == "cpu_seconds")


def pytest_collection_modifyitems(session, config, items) -> None:
    """Longest files first (stable within a file and among files of no known length)."""
    cache = getattr(config, "cache", None)
    known = cache.get(CACHE_KEY, None) if cache is not None else None
    seconds = known if isinstance(known, dict) and known else LONG_FIRST
    items.sort(key=lambda item: -float(seconds.get(item.nodeid.split("::", 1)[0], 0) or 0))


def _caches(config) -> list[Path]:
    """The harness's own cache and every cache a test made under pytest's base folder."""
    found = [cache_dir()]
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        try:
            base = factory.getbasetemp()
        except (OSError, ValueError):
            base = None
        if base is not None:  # the workers' base folders lie beside the controller's
            for root in {base, base.parent}:
                found += [p.parent for p in root.glob(f"**/{ledger.FILE}")]
    return list(dict.fromkeys(found))


def machine() -> dict:
    """The CPU this run ran on, as /proc/cpuinfo names it (where there is one), and the cores it
    could use: what the suite's summed time depends on, and what a log keeps no other trace of.
    bench/suite_cost.py owns the reading (it names a machine for a log that has no such line)."""
    return suite_cost.this_machine()


def machine_line(config) -> str:
    """The machine and the workers, in one line of the end-of-run output (``bench/suite_cost.py`` parses it)."""
    found = machine()
    asked = getattr(config.option, "numprocesses", 0)  # xdist's -n, `auto` resolved by now
    workers = asked if isinstance(asked, int) and asked > 0 else 1  # -n 0, or no xdist: one process
    return (f"machine: {found['cpu']}; AVX-512 {'yes' if found['avx512'] else 'no'}; {found['cores']} cores; "
            f"{workers} worker{'s' if workers != 1 else ''}")


def cells_by_file(cells: list[dict]) -> list[tuple[str, tuple[int, float]]]:
    """The ledger's cell lines by the test file that ran them (their tag), most held first."""
    by: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for entry in cells:
        slot = by[str(entry.get("tag") or "(no test named)")]
        slot[0] += 1
        slot[1] += float(entry.get("seconds") or 0)
    return sorted(((path, (n, round(s, 1))) for path, (n, s) in by.items()), key=lambda kv: -kv[1][1])


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config) -> None:
    if hasattr(config, "workerinput"):  # a worker: the controller prints for the whole run
        return
    write = terminalreporter.write_line
    wall = time.time() - _started
    total = sum(_per_file.values())
    if not total:
        return
    if getattr(config, "cache", None) is not None and not config.option.collectonly:
        config.cache.set(CACHE_KEY, {path: round(sec, 1) for path, sec in _per_file.items()})
    terminalreporter.section("where the time went")
    write(f"wall {_minutes(wall)}; the tests' own time summed over every worker {_minutes(total)}")
    write(f"{'seconds':>9} {'share':>6} {'tests':>6}  file")
    for path, seconds in sorted(_per_file.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:9.1f} {seconds / total:6.1%} {len(_tests_per_file[path]):6d}  {path}")
    cpu = sum(_cpu_per_file.values())
    if cpu:
        write("")
        write(f"CPU of the tests' own processes: {_minutes(cpu)} (containers' not counted); by file:")
        for path, seconds in sorted(_cpu_per_file.items(), key=lambda kv: -kv[1])[:25]:
            write(f"{seconds:9.1f} cpu-s  {path}")
    entries = [e for folder in _caches(config) for e in ledger.read(folder, since=_started)]
    builds = [e for e in entries if e.get("kind") == "build"]
    write("")
    if not builds:
        write("environments built: none (every one was reused from the caches)")
    else:
        by_engine: dict[str, list[dict]] = defaultdict(list)
        for entry in builds:
            by_engine[entry.get("engine", "?")].append(entry)
        write(f"environments built: {len(builds)}, {sum(e.get('seconds', 0) for e in builds):.0f} s of building "
              "(some of it beside tests)")
        for engine, made in sorted(by_engine.items()):
            slowest = sorted(made, key=lambda e: -e.get("seconds", 0))[:5]
            write(f"  {engine}: {len(made)}, {sum(e.get('seconds', 0) for e in made):.0f} s; slowest: "
                  + ", ".join(f"{e.get('environment')} {e.get('seconds', 0):.0f} s" for e in slowest))
    cells = [e for e in entries if e.get("kind") == "cell"]
    if cells:
        held = sum(e.get("seconds") or 0 for e in cells)
        starting = sum(e.get("starting") or 0 for e in cells)
        first = sum(e.get("first_epoch") or 0 for e in cells)
        write(f"cells run: {len(cells)}, {held:.0f} s held; of it {starting:.0f} s ({starting / held:.0%}) starting "
              f"interpreters and importing stacks, {first:.0f} s ({first / held:.0%}) in first epochs")
        write("cells by file (held seconds):")
        for path, (count, seconds) in cells_by_file(cells)[:25]:
            write(f"{seconds:9.1f} held-s {count:5d} cells  {path}")
    write("")
    write(machine_line(config))
