"""How long `harness list` takes on the largest matrix the limits allow.

100,000 cells (1,000 repeats x 100 batch sizes) against the most rules a
matrix may hold (200 include, 200 exclude, 200 expect), each rule with
PATTERNS glob patterns: the case where matching every rule against every
cell once took more than a minute. Prints the median [min-max] wall time of
`python -m harness list` over RUNS runs (interpreter start-up included).

    python bench/list_bound.py [--runs 5] [--patterns 4]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

BASE = 'environments: [{python: "3.11", tensorflow: "2.15.0"}]\nworkloads: [{model: rnn}]\n'


def rules(key: str, per_rule: int, first: str = "", extra: str = "") -> str:
    """200 rules (the most a list may hold) naming `key`, each with `per_rule` glob patterns."""
    out = []
    for i in range(200):
        patterns = [f"'*{i}x{j}*[0-9]'" for j in range(per_rule)] + ([first] if i == 0 and first else [])
        out.append(f"{{{key}: [{', '.join(patterns)}]{extra}}}")
    return "[" + ", ".join(out) + "]"


def matrix(per_rule: int) -> str:
    """100,000 cells (the most a matrix may expand to) against 600 rules of `per_rule` patterns
    (tests/test_hostile_input.py lists the same matrix, under a bound)."""
    return (BASE + "repeats: 1000\nbatch_sizes: [" + ", ".join(str(b) for b in range(1, 101)) + "]\n"
            f"include: {rules('repeat', per_rule, first=chr(39) + '*' + chr(39))}\n"
            f"exclude: {rules('repeat', per_rule)}\n"
            f"expect: {rules('batch_size', per_rule, first=chr(39) + '1?' + chr(39), extra=', status: ok')}\n")


def main() -> None:
    from _common import harness, spread  # a script's helpers: the matrix above is importable alone

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--patterns", type=int, default=4, help="patterns per rule (4: just under the work cap)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bound.yaml"
        path.write_text(matrix(args.patterns))
        times = [harness("list", str(path)) for _ in range(args.runs)]
    print(f"harness list, 100,000 cells x 600 rules x {args.patterns} patterns: {spread(times)} s")


if __name__ == "__main__":
    main()
