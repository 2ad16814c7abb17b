"""``harness reduce``: the smallest script that still breaks on one side and passes on the other."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for, load
from harness.files.outputs import check_apart
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args
from harness.options.shared import add_matrix, add_out, add_release_args
from harness.options.types import seconds


def add(sub) -> None:
    p = sub.add_parser("reduce", help="shrink a script while it still passes on one cell and breaks on the other; "
                                      "write a bundle and an upstream issue draft",
                       description="Shrink the script of two cells (the last good and the first bad release) while "
                                   "both sides hold; write the reduced script, run.sh per side and ISSUE.md under "
                                   "--out. The original file is never written.")
    add_matrix(p, required=True)
    p.add_argument("cells", nargs="+", metavar="CELL",
                   help="GOOD_CELL BAD_CELL (each an id, a prefix or a glob naming one cell); or one CELL with "
                        "--package, --good and --bad: that cell on the two releases (as bisect names them)")
    p.add_argument("--package", metavar="NAME", help="with one CELL: the package whose releases differ")
    p.add_argument("--good", metavar="VERSION", help="with --package: the last good release")
    p.add_argument("--bad", metavar="VERSION", help="with --package: the first bad release")
    p.add_argument("--budget", type=seconds, default=120.0, metavar="SECONDS",
                   help="each candidate's time on each side: over it, the candidate is rejected (default 120)")
    p.add_argument("--fresh", action="store_true",
                   help="start every candidate in a new interpreter instead of forking it from a warm launcher")
    p.add_argument("--unconfined", action="store_true", help="let candidates write anywhere you can, not only in "
                   "their own folders")
    add_out(p, "reduced", "where the result goes")
    add_engine_args(p)
    add_release_args(p, results=True)


def command(args, console: Console) -> int:
    """The API's reduce (`api.reduce`), its sides named as the flags name them."""
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api
    from harness.investigate.reduce import sides
    from harness.investigate.reduce_report import show

    check_apart(Path(args.out), "--out", [Path(args.results)])  # its own cells live there
    check_writable(Path(args.out), "--out")
    m = load(args, console)
    good, bad = sides(m, args)   # two cells, or one cell on two releases: in the flags' words
    with engine_for(args, console) as engine:
        found = api.reduce(m, good, bad, out=args.out, results=args.results, engine=engine, budget=args.budget,
                           unconfined=args.unconfined, fresh=args.fresh, console=console)
    show(found, console)
    return exits.OK
