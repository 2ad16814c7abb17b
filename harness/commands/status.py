"""``harness status``: where each cell of a matrix stands (Slurm queue and results)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import load
from harness.options.shared import add_matrix, add_results
from harness.options.types import seconds


def add(sub) -> None:
    p = sub.add_parser("status", help="queued / running / finished cells of a matrix (Slurm queue and results)")
    add_matrix(p)
    add_results(p)
    p.add_argument("--wait", type=seconds, metavar="SECONDS",
                   help="poll until nothing is queued or running, at most this long")


def command(args, console: Console) -> int:
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness.run.executors.slurm.board import status as board_status

    entries = board_status(load(args), Path(args.results), console, wait=args.wait)
    return exits.CHANGED if any(e.drifted for e in entries) else exits.OK
