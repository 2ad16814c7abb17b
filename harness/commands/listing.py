"""``harness list``: the cell ids a matrix expands to."""

from __future__ import annotations

from rich.console import Console

from harness.commands.common import load
from harness.options.shared import DEFAULT_MATRIX, DEFAULT_RESULTS, add_release_args


def add(sub) -> None:
    p = sub.add_parser("list", help="print the cell ids a matrix expands to")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR",
                   help="results folder whose recorded range expansion to use (default: results)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="version ranges: name every release and cut-off date (by default a long range is "
                        "summarised: first ... last, count, and one line per reason releases were left out)")
    add_release_args(p)


def command(args, console: Console) -> int:
    m = load(args, Console(stderr=True, soft_wrap=True))
    for cell in m.cells:
        print(cell.id)
    return 0
