"""Benchmark: what a divergence costs beside the two cells it explains.

    python bench/diverge.py [MATRIX] [CELL_A] [CELL_B] [--engine venv] [--rounds 3]

The environments are prepared first (not timed). Then, alternating, `rounds` times each, in
one invocation: the two cells as a user runs them (`harness run MATRIX --only A --only B
--rerun all`), and `harness diverge MATRIX A B --rerun` (its three sides run again: the
reference, the floor and the other side). Printed: each command's wall time (median
[min-max]) and the ratio diverge / run per round, with its median and range.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from _common import harness, spread


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrix", nargs="?", default="matrices/diverge.yaml")
    p.add_argument("cell_a", nargs="?", default="tf2.15/gru-2x32/none-c1/b128/r0")
    p.add_argument("cell_b", nargs="?", default="tf2.21-keras3.15.1/gru-2x32/none-c1/b128/r0")
    p.add_argument("--engine", default="venv")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-diverge-") as tmp:
        results, out = Path(tmp) / "results", Path(tmp) / "diverge"
        cells = ["--only", args.cell_a, "--only", args.cell_b]
        harness("build", args.matrix, "--engine", args.engine, *cells)  # not timed: the environments
        runs, diverges = [], []
        for _ in range(args.rounds):
            runs.append(harness("run", args.matrix, "--engine", args.engine, "--results", str(results), *cells,
                                "--rerun", "all"))
            diverges.append(harness("diverge", args.matrix, args.cell_a, args.cell_b, "--engine", args.engine,
                                    "--out", str(out), "--results", str(results), "--rerun"))
    ratios = [d / r for d, r in zip(diverges, runs, strict=True)]
    print(f"{args.cell_a}  vs  {args.cell_b}  ({args.engine}, {args.rounds} rounds)")
    print(f"the two cells (run):   {spread(runs)} s")
    print(f"their divergence:      {spread(diverges)} s")
    print(f"ratio diverge / run:   {statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")


if __name__ == "__main__":
    main()
