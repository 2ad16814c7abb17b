"""``harness list``: the cell ids a matrix expands to."""

from __future__ import annotations

from rich.console import Console

from harness import exits
from harness.commands.common import load
from harness.options.shared import add_matrix, add_release_args, add_results


def add(sub) -> None:
    p = sub.add_parser("list", help="print the cell ids a matrix expands to")
    add_matrix(p)
    add_results(p, what="results folder whose recorded range expansion to use")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="version ranges: name every release and cut-off date (by default a long range is "
                        "summarised: first ... last, count, and one line per reason releases were left out)")
    add_release_args(p)


def command(args, console: Console) -> int:
    m = load(args, Console(stderr=True, soft_wrap=True))
    for cell in m.cells:
        print(cell.id)
    return exits.OK
