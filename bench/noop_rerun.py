"""Benchmark (c): a no-op re-run of a finished matrix (every cell skipped).

    python bench/noop_rerun.py [MATRIX] [--engine venv] [--rounds 5]

Runs the matrix once (not timed), then `rounds` more times; each of those
finds every result and runs nothing. Printed: median [min-max] wall time of
the re-runs (target <= 3 s), as `python -m harness run` from process start
to exit.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import harness, results, spread


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrix", nargs="?", default="matrices/faults.yaml")
    p.add_argument("--engine", default="venv")
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", a.matrix, "--engine", a.engine, "--results", tmp]
        harness(*args)
        n = len(results(Path(tmp)))
        walls = [harness(*args) for _ in range(a.rounds)]
        print(f"matrix {a.matrix}: {n} finished cells; no-op re-run wall {spread(walls)} s (target <= 3 s)")


if __name__ == "__main__":
    main()
