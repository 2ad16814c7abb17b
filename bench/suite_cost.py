"""The test suite's cost as a figure that travels between machines: the tests' time summed over the
workers, with the CPU it ran on.

    python bench/suite_cost.py LOG|- [--record [FILE]] [--commit REV] [--date YYYY-MM-DD]
    python bench/suite_cost.py --run [--record [FILE]] [--log FILE] [-- PYTEST ARGS]
    python bench/suite_cost.py --table | --write-docs

Why the summed time and not the wall: the wall of a run is set by how many workers it had (a
worker per core and one more, at most four: ``tests/conftest.py``) and by when its slowest file
started and ended (``--dist loadfile`` keeps a file on one worker), so two machines with other core
counts, or one run whose last file started late, give walls that say little about the work. The
sum of every test's own time over all workers is the work itself: it moves with the code and with
the machine's speed, not with the layout. The machine's speed is the other half -- the same commit
has taken more than twice the test-minutes on one machine of a pool as on another of the same size --
so each figure is kept with the CPU model, whether it has AVX-512, and the cores, and only figures
of like machines are compared.

What it reads: a log as ``.ci/run`` prints it (a file, or ``-`` for stdin), or, with ``--run``, the
output of ``nox -s tests`` it runs itself (extra arguments after ``--`` go to pytest). From the end
of the suite's output (``tests/suite_timing.py``): the per-file table, whose seconds it sums; the
environments built, by engine; the machine line (CPU, AVX-512, cores, workers); and pytest's
summary line (counts, and the suite's wall, ``in S s``). From ``.ci/run``'s own lines, where the log
has them: CI's wall and phases, how busy the cores were, the disk. A log from before the machine
line names no machine: then the machine is the one running this script, and the record says so.

``--record`` writes the figures as JSON (by default ``bench/records/suite/DATE-COMMIT.json``, the
commit from ``git rev-parse HEAD`` unless ``--commit`` names the one that ran; ``--from-nothing`` when
the run started with every cache empty, ``--tier quick`` for ``-m quick``); ``--table`` prints the
Markdown table of every record there. The pages quote the records through this module's generators
-- the table of runs, what each slow file promises (``bench/suite_promises.py``) with its seconds, the
README's sentence, the tiers, the ratio between machines -- in ``figures`` blocks that
``--write-docs`` (``python bench/figures.py --write``) makes again, and the audit
(``bench/figures.py``, run by ``tests/test_figures.py``) holds them to the records. Standard library
only: it reads logs on any machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "records" / "suite"
DOC = ROOT / "docs" / "reference" / "tests.md"
FROM_LOG = "parsed from a log"
ENGINE_WORDS = {"docker": "images", "venv": "virtualenvs"}  # the ledger's engine names, as the docs say them

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SECTION = re.compile(r"^=+ where the time went =+$")
_FILE_ROW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+-?\d+(?:\.\d+)?%\s+(\d+)\s+(\S.*?)\s*$")
_CELLS = re.compile(r"^cells run: (\d+), (\d+) s held; of it (\d+) s \(\d+%\) starting .*?, (\d+) s \(\d+%\) in first")
_CPU = re.compile(r"^CPU of the tests' own processes: (\d+(?:\.\d+)?) (min|s)\b")
_CPU_ROW = re.compile(r"^\s*(\d+(?:\.\d+)?) cpu-s  (\S.*?)\s*$")
_CELLS_ROW = re.compile(r"^\s*(\d+(?:\.\d+)?) held-s\s+(\d+) cells  (\S.*?)\s*$")
_BUILT = re.compile(r"^environments built: (\d+), (\d+) s of building")
_BUILT_NONE = re.compile(r"^environments built: none\b")
_ENGINE = re.compile(r"^\s+(\S+): (\d+), (\d+) s; slowest:")
_MACHINE = re.compile(r"^machine: (.+?); AVX-512 (yes|no); (\d+) cores?(?:; (\d+) workers?)?\s*$")
_SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in (\d+(?:\.\d+)?)s\b")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|rerun)\b")
_XDIST = re.compile(r"^(\d+) workers? \[\d+ items?\]")  # xdist's status line, once every worker collected
_CI = re.compile(r"^== where CI's (\d+) s went$")
_PHASE = re.compile(r"^\s*(\d+) s  (.+)$")
_BUSY = re.compile(r"^== the cores were busy (-?\d+) % of the tests' time \((\d+) cores\)$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S+::\S.*?)\s*$")   # pytest's --durations
SLOWEST_KEPT = 10.0   # seconds: a test phase at least this long is kept in the record (the profile of a run)
_DISK = re.compile(r"^== disk: (\d+) GB free at the start, (\d+) GB at the least, (\d+) GB at the end$")


def this_machine() -> dict:
    """The CPU of the machine running this, and the cores it may use: the suite's machine line
    (tests/suite_timing.py) prints it, and for a log that names none it is the best this script
    knows, marked as such in the record."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity to ask (not Linux): the machine's count
        cores = os.cpu_count() or 0
    return {"cpu": model or platform.processor() or platform.machine() or "unknown",
            "avx512": "avx512f" in flags, "cores": cores}


def parse(text: str) -> dict:
    """The figures a log holds; a figure the log does not hold is None (or absent from its table)."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if _SECTION.match(line)]
    files: dict[str, float] = {}
    tests_per_file: dict[str, int] = {}
    environments: dict | None = None
    cells: dict | None = None
    machine: dict | None = None
    workers: int | None = None
    cpu: dict | None = None
    for line in lines[starts[-1] + 1:] if starts else []:  # the last run's section, if a log holds two
        if line.startswith("=") or _SUMMARY.match(line):
            break
        if found := _FILE_ROW.match(line):
            files[found.group(3)] = float(found.group(1))
            tests_per_file[found.group(3)] = int(found.group(2))
        elif found := _CPU.match(line):
            amount = float(found.group(1))
            cpu = {"seconds": round(amount * 60 if found.group(2) == "min" else amount), "by_file": {}}
        elif (found := _CPU_ROW.match(line)) and cpu is not None:
            cpu["by_file"][found.group(2)] = float(found.group(1))
        elif _BUILT_NONE.match(line):
            environments = {"count": 0, "seconds": 0, "by_engine": {}}
        elif found := _BUILT.match(line):
            environments = {"count": int(found.group(1)), "seconds": int(found.group(2)), "by_engine": {}}
        elif (found := _ENGINE.match(line)) and environments is not None:
            environments["by_engine"][found.group(1)] = {"count": int(found.group(2)),
                                                         "seconds": int(found.group(3))}
        elif found := _CELLS.match(line):
            cells = dict(zip(("count", "seconds", "starting", "first_epoch"), map(int, found.groups()), strict=True))
        elif (found := _CELLS_ROW.match(line)) and cells is not None:
            cells.setdefault("by_file", {})[found.group(3)] = {"cells": int(found.group(2)),
                                                               "held_seconds": float(found.group(1))}
        elif found := _MACHINE.match(line):
            machine = {"cpu": found.group(1), "avx512": found.group(2) == "yes", "cores": int(found.group(3))}
            workers = int(found.group(4)) if found.group(4) else None
    results: dict[str, int] = {}
    suite_wall = None
    for line in reversed(lines):
        if found := _SUMMARY.match(line):
            for count, word in _COUNT.findall(found.group(1)):
                results["errors" if word.startswith("error") else word] = int(count)
            suite_wall = float(found.group(2))
            break
    if workers is None:  # a log from before the machine line: xdist's own line, where it printed one
        for line in lines:
            if found := _XDIST.match(line.strip()):
                workers = int(found.group(1))
    ci_wall, phases, busy, disk = None, [], None, None
    for i, line in enumerate(lines):
        if found := _CI.match(line):
            ci_wall, phases = int(found.group(1)), []
            for row in lines[i + 1:]:
                if not (phase := _PHASE.match(row)):
                    break
                phases.append({"seconds": int(phase.group(1)), "phase": phase.group(2)})
        elif found := _BUSY.match(line):
            busy = {"percent": int(found.group(1)), "cores": int(found.group(2))}
        elif found := _DISK.match(line):
            disk = dict(zip(("start", "least", "end"), map(int, found.groups()), strict=True))
    # the slowest test phases, as pytest's --durations listed them (all of them with --durations=0):
    # where a cut would land, test by test, beside the per-file sums
    slowest = [{"seconds": float(m.group(1)), "phase": m.group(2), "test": m.group(3)}
               for line in lines if (m := _DURATION.match(line)) and float(m.group(1)) >= SLOWEST_KEPT]
    return {"test_seconds": round(sum(files.values()), 1) if files else None,
            "suite_wall_seconds": suite_wall, "ci_wall_seconds": ci_wall, "results": results,
            "workers": workers, "machine": machine, "environments": environments, "cells": cells,
            "cores_busy": busy, "disk_gb": disk, "phases": phases, **({"cpu": cpu} if cpu else {}),
            "files": dict(sorted(files.items(), key=lambda kv: -kv[1])), "tests_per_file": tests_per_file,
            **({"slowest": sorted(slowest, key=lambda d: -d["seconds"])} if slowest else {})}


def commit_of(rev: str = "HEAD") -> str | None:
    """`rev` as this checkout's full hash (``git rev-parse``); a rev git does not know stays as given,
    and HEAD without git or a repository is None."""
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                              capture_output=True, text=True)
    except OSError:
        proc = None
    if proc is not None and proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip()
    return None if rev == "HEAD" else rev


def record(parsed: dict, *, commit: str | None, date: str, from_nothing: bool = False,
           tier: str = "everything") -> dict:
    """A record of one run: the parsed figures, the commit and date, and the machine -- the log's own,
    or, where the log names none, this one's, said so. `from_nothing`: the run started with no
    harness, uv or pip cache and no Docker image, as its recorder says (a log cannot tell a cache it
    found from one it filled); only such runs are quoted as the suite's cost. `tier`: ``everything``
    or ``quick`` (``-m quick``)."""
    machine = parsed["machine"]
    if machine is not None:
        machine = {**machine, "from": "the log"}
    else:
        machine = {**this_machine(), "from": "the machine that read the log (the log names none)"}
    figures = {k: v for k, v in parsed.items() if k != "machine"}
    # when it was recorded: two runs of one day are ordered by it (a commit's hash says nothing of when)
    recorded = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"commit": commit, "date": date, "recorded_at": recorded, "source": FROM_LOG, "tier": tier,
            "from_nothing": from_nothing, "machine": machine, **figures}


def _minutes(seconds: float | None) -> str:
    return "--" if seconds is None else f"{seconds / 60:.1f} min"


def _results(rec: dict) -> str:
    counts = rec.get("results") or {}
    order = ["failed", "errors", "passed", "skipped",  # as pytest orders them
             "xfailed", "xpassed", "deselected", "rerun"]
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "--"


def _environments(rec: dict) -> str:
    env = rec.get("environments")
    if env is None:
        return "--"
    if not env["count"]:
        return "none (all reused)"
    engines = "; ".join(f"{v['count']} {ENGINE_WORDS.get(k, k)} {v['seconds']:,} s"
                        for k, v in sorted(env.get("by_engine", {}).items()))
    return f"{env['count']} in {env['seconds']:,} s" + (f" ({engines})" if engines else "")


def _summed(rec: dict) -> str:
    """The tests' summed time in test-minutes, to the precision it was stated (a record's own, or 0.1)."""
    seconds = rec.get("test_seconds")
    if seconds is None:
        return "--"
    if rec.get("test_seconds_precision") == "stated to the minute":
        return f"{seconds / 60:.0f} test-min"
    return f"{seconds / 60:.1f} test-min"


def _machine(rec: dict) -> str:
    m = rec.get("machine") or {}
    if not m.get("cpu"):
        return "not recorded"
    avx = {True: "AVX-512", False: "no AVX-512"}.get(m.get("avx512"), "AVX-512 not recorded")
    cores = f", {m['cores']} cores" if m.get("cores") else ""
    return f"{m['cpu']} ({avx}{cores})"


def summary(rec: dict) -> str:
    """A few lines for a person: the summed time first, as the figure to compare."""
    commit = (rec.get("commit") or "no commit")[:7]
    workers = rec.get("workers")
    lines = [f"{commit} ({rec.get('date')}) on {_machine(rec)}, "
             + (f"{workers} worker{'s' if workers != 1 else ''}" if workers else "workers not recorded") + ":"]
    if (rec.get("machine") or {}).get("from", "the log") != "the log":
        lines.append(f"  (the machine: {rec['machine']['from']})")
    test_seconds = rec.get("test_seconds")
    lines.append(f"  the tests summed over the workers: {_summed(rec)}"
                 + (f" ({test_seconds:,.0f} s)" if test_seconds is not None else "")
                 + "  <- the figure to compare, on like machines")
    wall = rec.get("suite_wall_seconds")
    ci = rec.get("ci_wall_seconds")
    lines.append(f"  suite wall {_minutes(wall)}" + (f" ({wall:,.0f} s)" if wall is not None else "")
                 + (f"; CI wall {_minutes(ci)} ({ci:,} s)" if ci is not None else "; no CI phases in the log"))
    if cpu := rec.get("cpu"):
        lines.append(f"  CPU of the tests' own processes: {_minutes(cpu['seconds'])} ({cpu['seconds']:,} s; "
                     "containers' not counted)")
    lines.append(f"  {_results(rec)}")
    lines.append(f"  environments built: {_environments(rec)}")
    if c := rec.get("cells"):
        lines.append(f"  cells run: {c['count']:,}, {c['seconds']:,} s held; {c['starting']:,} s of it starting "
                     f"interpreters and importing stacks, {c['first_epoch']:,} s in first epochs")
    if rec.get("cores_busy"):
        lines.append(f"  the cores were busy {rec['cores_busy']['percent']} % of the tests' time")
    return "\n".join(lines)


def load_records(folder: Path = RECORDS) -> list[dict]:
    """Every record under `folder`, oldest first (by date, then by file name). Each carries the file
    it was read from under ``_file`` (relative to the project where it lies inside it): a page that
    quotes it names it (``bench/figures.py``)."""
    found = []
    for path in folder.glob("*.json"):
        rec = json.loads(path.read_text())
        try:
            rec["_file"] = str(path.resolve().relative_to(ROOT))
        except ValueError:
            rec["_file"] = str(path)
        # within a day, by when each was recorded (a record from before `recorded_at` first), then by
        # file name (DATE-COMMIT before DATE-COMMIT-2)
        found.append((str(rec.get("date") or ""), str(rec.get("recorded_at") or ""), path.stem, rec))
    return [rec for *_, rec in sorted(found, key=lambda t: t[:3])]


def tier_of(rec: dict) -> str:
    """A record's tier: ``everything`` unless it says ``quick`` (records before the field were all
    of the whole suite)."""
    return rec.get("tier") or "everything"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(records: list[dict]) -> str:
    """The Markdown table of the records, one row a run, as docs/reference/tests.md shows it."""
    rows = ["| date | commit | machine | workers | tests summed over the workers | their processes' CPU | suite wall "
            "| CI wall | result | environments built | from |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in (r for r in records if tier_of(r) == "everything"):
        source = rec.get("source") or FROM_LOG
        if source == FROM_LOG and (rec.get("machine") or {}).get("from") not in (None, "the log"):
            source += "; machine: " + rec["machine"]["from"]
        if not rec.get("from_nothing"):
            source += "; not said to be from nothing"
        date = rec.get("date") or "--"
        if str(rec.get("date_from", "")).startswith("the commit's"):
            date += " (the commit's)"
        cells = [date, (rec.get("commit") or "--")[:7], _machine(rec),
                 str(rec["workers"]) if rec.get("workers") else "--",
                 f"**{_summed(rec)}**" if rec.get("test_seconds") is not None else "--",
                 _minutes((rec.get("cpu") or {}).get("seconds")),
                 _minutes(rec.get("suite_wall_seconds")),
                 _minutes(rec.get("ci_wall_seconds")) if rec.get("ci_wall_seconds") is not None else "--",
                 _results(rec), _environments(rec), source]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def _newest(records: list[dict], tier: str = "everything", keeps: str = "test_seconds") -> dict | None:
    """The newest record of `tier` that holds `keeps`, from nothing where one is (a run whose caches
    were full says less of the suite's cost); failing that, the newest that holds it."""
    kept = [r for r in records if tier_of(r) == tier and r.get(keeps)]
    empty = [r for r in kept if r.get("from_nothing")]
    return (empty or kept or [None])[-1]


def newest_with_files(records: list[dict]) -> dict | None:
    """The run whose per-file seconds the promise table shows: what a file costs where the suite's
    budget is set."""
    return _newest(records, keeps="files")


def promise_table(records: list[dict]) -> str:
    """What each slow file promises (bench/suite_promises.py), with its seconds and share in the newest
    record that kept them: the figures from the record, the words from the table of promises."""
    try:   # deferred: the log reader needs no page data
        from bench.suite_promises import PROMISES
    except ImportError:   # run as a script: bench/ is on the path, the project's root may not be
        from suite_promises import PROMISES

    rec = newest_with_files(records)
    if rec is None:
        return "no record keeps its per-file seconds yet"
    files, total = rec["files"], rec.get("test_seconds") or sum(rec["files"].values())
    rows = [f"Seconds: {(rec.get('commit') or '--')[:7]} ({rec.get('date') or '--'}) on {_machine(rec)}, "
            f"summed over its {rec.get('workers') or '--'} workers.", "",
            "| file | seconds (share) | what it keeps | the run that proves it | the least run that would |",
            "|---|---|---|---|---|"]
    for entry in sorted(PROMISES, key=lambda e: -files.get(e["file"], 0)):
        seconds = files.get(entry["file"])
        figure = f"{seconds:,.0f} ({seconds / total:.1%})" if seconds is not None else "--"
        ran = ((rec.get("cells") or {}).get("by_file") or {}).get(entry["file"])
        if ran:   # a record from before the ledger named each cell's test file has none
            figure += f"; {ran['cells']:,} cells, {ran['held_seconds']:,.0f} s held"
        cells = [f"`{entry['file'].removeprefix('tests/')}`", figure, entry["keeps"], entry["run"], entry["least"]]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def _runs_from_nothing(records: list[dict], tier: str = "everything") -> list[dict]:
    """The newest run of `tier` from nothing on each kind of machine that the records name (the CPU
    and its AVX-512), the slowest kind first: what a page may quote as the suite's cost."""
    newest: dict[str, dict] = {}
    for rec in records:   # oldest first: a later run of a kind replaces an earlier one
        if tier_of(rec) == tier and rec.get("from_nothing") and (rec.get("machine") or {}).get("cpu"):
            newest[_machine(rec)] = rec
    return sorted(newest.values(), key=lambda r: -(r.get("test_seconds") or 0))


def _latest(runs: list[dict]) -> dict:
    """The newest of `runs` by its day, then when it was recorded, then its file's name (as
    `load_records` orders them)."""
    return max(runs, key=lambda r: (r.get("date") or "", r.get("recorded_at") or "", r["_file"]))


def _summed_words(rec: dict) -> str:
    return _summed(rec).replace("test-min", "test-minutes")


def _run_said(rec: dict) -> str:
    return (f"{_minutes(rec.get('suite_wall_seconds'))} of wall and {_summed_words(rec)} summed over "
            f"{rec.get('workers') or 'its'} workers at {(rec.get('commit') or '--')[:7]} ({rec.get('date')}) on "
            f"{_machine(rec)}" + ("" if rec.get("from_nothing") else ", its caches not emptied first"))


def _disk(rec: dict) -> str:
    d = rec.get("disk_gb")
    return f"the disk's free space fell by {d['start'] - d['least']} GB at its least" if d else "no disk figure"


def _count(rec: dict) -> int:
    return sum((rec.get("results") or {}).values())


def door_sentence(records: list[dict]) -> str:
    """The README's sentence on the suite's cost: the newest run from nothing on each kind of
    machine, what the newest built, and the quick tier's newest run."""
    runs = _runs_from_nothing(records)
    if not runs:
        return "No run of the suite from nothing is recorded yet."
    newest = _latest(runs)
    env = newest.get("environments")
    by_engine = sorted((env or {}).get("by_engine", {}).items())
    engines = "; ".join(f"{v['count']} {ENGINE_WORDS.get(k, k)}" for k, v in by_engine)
    built = (f"{env['count']} environments in {env['seconds']:,} s" + (f" ({engines})" if engines else "")
             if env and env.get("count") else "its environments")
    said = "; ".join(_run_said(r) for r in runs)
    text = (f"From nothing (the harness's, uv's and pip's caches empty, no Docker image) the newest recorded "
            f"run on each kind of machine took {said}. The newest built {built}, and {_disk(newest)} "
            f"([the runs](docs/reference/tests.md#where-the-time-goes)).")
    quick = _newest(records, "quick")
    if quick is None:
        return text + " The quick tier, whose time is not recorded yet, needs no Docker, Slurm or TensorFlow:"
    return (text + f" The quick tier ({_count(quick)} tests; {_run_said(quick)}) needs no Docker, Slurm or "
            "TensorFlow:")


def tiers_table(records: list[dict]) -> str:
    """docs/reference/tests.md's table of the tiers, each with its newest recorded cost."""
    quick, runs = _newest(records, "quick"), _runs_from_nothing(records)
    ci = [r for r in runs if r.get("ci_wall_seconds") is not None]
    whole = _latest(runs) if runs else None
    rows = ["| tier | command | what it runs | its cost, as recorded |", "|---|---|---|---|",
            "| quick | `nox -s tests -- -m quick` | "
            + (f"{_count(quick)} tests" if quick else "the tests")
            + " of the pure decisions, the matrix checker, hostile input, the docs' structure, and planted packages "
              "in real virtualenvs (bisect's mends, `upgrade`, the installer, the atlas and its watch): no Docker, "
              "Slurm or TensorFlow to build | "
            + (_run_said(quick) if quick else "not recorded yet") + " |",
            "| everything | `nox -s tests` | "
            + (f"all {_count(whole)} tests at {(whole.get('commit') or '--')[:7]}" if whole else "every test")
            + ", every real part | from nothing, the newest run on each kind of machine: "
            + ("; ".join(_run_said(r) for r in runs) if runs else "not recorded yet")
            + " ([the runs](#where-the-time-goes)) |",
            "| CI | `.ci/run` | installs, Docker, Slurm, lint, docs, then everything | from nothing (no harness, uv "
            "or pip cache, no Docker image or build cache): "
            + ("; ".join(f"{_minutes(r['ci_wall_seconds'])} at {(r.get('commit') or '--')[:7]} on {_machine(r)}, "
                         f"{_disk(r)}" for r in ci) if ci else "not recorded yet") + " |"]
    return "\n".join(rows)


def machines_sentence(records: list[dict]) -> str:
    """How far apart the pool's machines are: the newest commit recorded on two machines, its
    summed times on each and their ratio."""
    by_commit: dict[str, list[dict]] = {}
    for rec in records:
        if tier_of(rec) == "everything" and rec.get("test_seconds") and rec.get("commit"):
            by_commit.setdefault(rec["commit"], []).append(rec)
    pairs = [(c, rs) for c, rs in by_commit.items() if len({_machine(r) for r in rs}) > 1]
    if not pairs:
        return "No commit is recorded on two machines yet, so no ratio between machines is known."
    commit, rs = max(pairs, key=lambda p: max(r.get("date") or "" for r in p[1]))
    rs = sorted(rs, key=lambda r: -r["test_seconds"])
    slow, fast = rs[0], rs[-1]

    def on(rec: dict) -> str:
        if (rec.get("machine") or {}).get("cpu"):
            return _machine(rec)
        return "a machine whose CPU its record does not name"

    return (f"{commit[:7]} took {_summed_words(slow)} on {on(slow)} and {_summed_words(fast)} on {on(fast)}: "
            f"{slow['test_seconds'] / fast['test_seconds']:.1f} x.")


def _nox() -> list[str]:
    """How to start nox: from this interpreter, CI's own (``.ci/run``'s virtualenv), or the one on PATH."""
    if importlib.util.find_spec("nox") is not None:
        return [sys.executable, "-m", "nox"]
    ci = ROOT / ".nox" / "_ci-tools" / "bin" / "python"
    if ci.exists():
        return [str(ci), "-m", "nox"]
    found = shutil.which("nox")
    if not found:
        sys.exit("--run needs nox: none here (`python -m pip install nox`, or `.ci/run` once)")
    return [found]


def run_suite(pytest_args: list[str], log: Path | None) -> tuple[str, int]:
    """Run ``nox -s tests -- ARGS``, its output shown as it comes and kept; return it and its exit status."""
    argv = [*_nox(), "-s", "tests", "--", *pytest_args]
    out: list[str] = []
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            out.append(line)
    text = "".join(out)
    if log is not None:
        log.write_text(text)
    return text, proc.returncode


def _record_path(rec: dict) -> Path:
    stem = f"{rec['date']}-{(rec.get('commit') or 'nocommit')[:7]}"
    path, n = RECORDS / f"{stem}.json", 2
    while path.exists():
        path, n = RECORDS / f"{stem}-{n}.json", n + 1
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", nargs="?", help="a CI log as .ci/run prints it, or - for stdin")
    parser.add_argument("--run", action="store_true", help="run `nox -s tests` (arguments after -- go to pytest)")
    parser.add_argument("--log", dest="keep_log", type=Path, help="with --run: keep its output in this file")
    parser.add_argument("--record", nargs="?", const="", metavar="FILE",
                        help="write the figures as JSON (default: bench/records/suite/DATE-COMMIT.json)")
    parser.add_argument("--commit", help="the commit that ran (default: git rev-parse HEAD of this checkout)")
    parser.add_argument("--date", help="the day it ran, YYYY-MM-DD (default: the log file's time, or today)")
    parser.add_argument("--from-nothing", action="store_true",
                        help="the run started with no harness, uv or pip cache and no Docker image (only such "
                             "runs are quoted as the suite's cost)")
    parser.add_argument("--tier", choices=("everything", "quick"), default="everything",
                        help="which tier ran (quick: -m quick)")
    parser.add_argument("--json", action="store_true", help="print the record as JSON instead of the summary")
    parser.add_argument("--table", action="store_true", help="print the Markdown table of the records")
    parser.add_argument("--write-docs", action="store_true",
                        help="make every page's figures blocks again from the records (bench/figures.py --write)")
    args = parser.parse_args(argv)
    if args.table or args.write_docs:
        records = load_records()
        made = table(records)
        if args.write_docs:
            try:   # deferred: the figures' writer quotes this module's generators
                from bench import figures
            except ImportError:   # run as a script: bench/ is on the path
                import figures
            changed = figures.write()
            print(f"made every figures block again from the {len(records)} records: "
                  + (", ".join(changed) if changed else "no page changed"))
        if args.table:
            print(made)
        return 0
    if args.run == bool(args.log):
        parser.error("give a log (a file, or - for stdin) or --run, one of them")
    if pytest_args and not args.run:
        parser.error("arguments after -- are pytest's, for --run")
    code = 0
    if args.run:
        text, code = run_suite(pytest_args, args.keep_log)
        day = dt.date.today()
    elif args.log == "-":
        text, day = sys.stdin.read(), dt.date.today()
    else:
        path = Path(args.log)
        text = path.read_text(errors="replace")
        day = dt.date.fromtimestamp(path.stat().st_mtime)  # last written as the run ended
    parsed = parse(text)
    if parsed["test_seconds"] is None:
        print("no per-file table (tests/suite_timing.py's `where the time went`) in this output", file=sys.stderr)
        return code or 1
    rec = record(parsed, commit=commit_of(args.commit or "HEAD"), date=args.date or day.isoformat(),
                 from_nothing=args.from_nothing, tier=args.tier)
    print(json.dumps(rec, indent=1) if args.json else summary(rec))
    if args.record is not None:
        path = Path(args.record) if args.record else _record_path(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"record: {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
