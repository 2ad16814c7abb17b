"""The change-point method's false-alarm rate and power, in one table.

    python bench/changes.py [--trials 200] [--seed 0] [--record FILE]

Each trial is a replayed series of 6-10 releases with 3-5 repeats each, lognormal noise of
the given CV per repeat, and optionally a run-to-run offset per release (lognormal, its own
CV: two runs of one release never match exactly). "false alarms" = share of pure-noise trials
where anything was reported; "power N %" = share of trials with an N % slow-down planted at
a random release where a slow-down was reported at that release. Pure Python, seconds to a
minute; with --record FILE it keeps the table's figures as JSON (``harness-bench-changes/1``), and
docs/explanation/change-detection.md quotes the newest record under bench/records/changes/ through
bench/figures.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.watch.changes import Point, find_shifts  # noqa: E402

SCHEMA = "harness-bench-changes/1"
EFFECTS = (0.05, 0.10, 0.15, 0.25)
NOISE = ((0.02, 0.0), (0.05, 0.0), (0.02, 0.02), (0.03, 0.03))   # (repeat CV, run-to-run CV)


def series(rng: random.Random, cv: float, run_cv: float, step: float):
    n, repeats = rng.randint(6, 10), rng.randint(3, 5)
    at = rng.randint(1, n - 1)
    points = []
    for i in range(n):
        level = 1000.0 * (1 - step if i >= at else 1.0) * (rng.lognormvariate(0, run_cv) if run_cv else 1.0)
        points.append(Point(f"r{i}", tuple(level * rng.lognormvariate(0, cv) for _ in range(repeats))))
    return points, at


def rate(trials: int, seed: int, cv: float, run_cv: float, step: float) -> float:
    rng = random.Random(seed)
    hits = 0
    for t in range(trials):
        points, at = series(rng, cv, run_cv, step)
        shifts = find_shifts(points, seed=t)
        if step == 0:
            hits += bool(shifts)
        else:
            hits += any(s.index == at and s.ratio < 1 for s in shifts)
    return hits / trials


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record", metavar="FILE", help="also keep the figures as JSON in FILE")
    a = p.parse_args(argv)
    start = time.monotonic()
    head = ["repeat CV", "run-to-run CV", "false alarms"] + [f"power {e:.0%}" for e in EFFECTS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows = []
    for cv, run_cv in NOISE:
        row = {"repeat_cv": cv, "run_cv": run_cv, "false_alarms": rate(a.trials, a.seed, cv, run_cv, 0),
               "power": {f"{e:.2f}": rate(a.trials, a.seed + 1, cv, run_cv, e) for e in EFFECTS}}
        rows.append(row)
        print("| " + " | ".join(table_row(row)) + " |")
    seconds = time.monotonic() - start
    print(f"\n{a.trials} trials a cell, 6-10 releases x 3-5 repeats, alpha 0.05, min_effect 5 %; {seconds:.0f} s")
    if a.record:
        record = {"schema": SCHEMA, "command": ["python", "bench/changes.py", *(argv or sys.argv[1:])],
                  "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "python": platform.python_version(), "trials": a.trials, "seed": a.seed, "rows": rows}
        Path(a.record).parent.mkdir(parents=True, exist_ok=True)
        Path(a.record).write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded: {a.record}")


def table_row(row: dict) -> list[str]:
    """One row of the table, as printed and as docs/explanation/change-detection.md shows it."""
    return ([f"{row['repeat_cv']:.0%}", f"{row['run_cv']:.0%}" if row["run_cv"] else "none",
             f"{row['false_alarms']:.1%}"] + [f"{row['power'][f'{e:.2f}']:.1%}" for e in EFFECTS])


if __name__ == "__main__":
    main()
