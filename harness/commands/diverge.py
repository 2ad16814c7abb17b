"""``harness diverge``: where two cells' models part, layer by layer."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for, load
from harness.files.outputs import check_apart
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args
from harness.options.shared import add_matrix, add_out, add_release_args
from harness.options.types import whole


def add(sub) -> None:
    p = sub.add_parser("diverge", help="where two cells' models part, layer by layer",
                       description="Compare cell A's and cell B's models layer by layer (configurations, weights, "
                                   "outputs, gradients, a short training) above a floor measured on A's own stack. "
                                   "Exit 0: no divergence above the floor; 1: a divergence; 2: an error.")
    add_matrix(p, required=True)
    p.add_argument("cell_a", metavar="CELL_A", help="the reference cell: an id, a prefix or a glob naming one cell")
    p.add_argument("cell_b", metavar="CELL_B", help="the cell compared with it")
    p.add_argument("--rows", type=whole(1, 65_536), metavar="N",
                   help="rows of the batch compared (default: cell A's batch size)")
    p.add_argument("--epochs", type=whole(1, 1_000), metavar="N",
                   help="epochs of the training compared (default: cell A's)")
    add_out(p, "diverge", "where the sides' cells, the record and the page go")
    p.add_argument("--rerun", action="store_true", help="run the sides again instead of reusing finished ones")
    p.add_argument("--json", action="store_true", help="print the record as JSON instead of the table")
    add_engine_args(p)
    add_release_args(p, results=True)


def command(args, console: Console) -> int:
    """The API's diverge (`api.diverge`) with the flags' words in its errors; the record on stdout
    (--json) or the table."""
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api
    from harness.investigate.diverge import one_cell, show

    check_apart(Path(args.out), "--out", [Path(args.results)])  # its own cells live there, not among a run's
    check_writable(Path(args.out), "--out")
    talk = Console(stderr=True, soft_wrap=True) if args.json else console  # --json: stdout is the record's
    m = load(args, talk)
    # the cells as the user named them, in their words (the matrix as typed), before any engine starts
    a = one_cell(args.cell_a, m.cells, "CELL_A", args.matrix)
    b = one_cell(args.cell_b, m.cells, "CELL_B", args.matrix)
    with engine_for(args, talk) as engine:
        found, folder = api.diverge(m, a.id, b.id, out=args.out, results=args.results, engine=engine, rows=args.rows,
                                    epochs=args.epochs, rerun=args.rerun, console=talk)
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True, default=str))
    else:
        show(found, folder, console)
    return exits.CHANGED if found["diverges"] else exits.OK
