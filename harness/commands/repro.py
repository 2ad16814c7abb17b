"""``harness repro``: one cell again, N times, and a bundle anyone can rerun."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from harness.commands.common import engine_for
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args
from harness.options.shared import add_out, add_results
from harness.options.types import whole


def add(sub) -> None:
    p = sub.add_parser("repro", help="reproduce one cell N times and write a self-contained bundle",
                       description="Reproduce the cells matching CELL (an id, a prefix or a glob) from the "
                                   "matrices: reuse or build only their environment, run them --repeat times "
                                   "with live logs, report k/N failures and write a bundle (recipe, pins, "
                                   "workloads, spec, run.sh, logs, results).")
    p.add_argument("cell", metavar="CELL")
    p.add_argument("--matrix", action="append", default=[], metavar="FILE",
                   help="matrix to look the cell up in (repeatable; default: every matrices/*.yaml)")
    p.add_argument("--repeat", type=whole(1, 1_000), default=1, metavar="N", help="attempts (default 1)")
    add_out(p, "bundles", "where bundles go")
    add_results(p, what="the run's results folder: version ranges expand as that run recorded them")
    p.add_argument("--shell", action="store_true", help="open a shell in the cell's environment instead of running")
    p.add_argument("--command", dest="shell_command", metavar="CMD",
                   help="with --shell: run CMD (bash -c) in the cell's environment instead of an interactive "
                        "shell; the exit status is CMD's")
    add_engine_args(p)


def command(args, console: Console) -> int:
    """Each cell the id names, reproduced by the API (`api.repro`); or a shell in its environment."""
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api, exits
    from harness.investigate.repro import cells_named, shell, summary
    from harness.terminal import shown

    check_output_folder(Path(args.out), "--out")
    check_writable(Path(args.out), "--out")
    with engine_for(args, console) as engine:
        found = cells_named(args)
        if args.shell or getattr(args, "shell_command", None):
            shell(args, console, engine, found[0][0])   # does not return: the shell is this process now
        for cell, m in found:
            started = time.monotonic()
            bundle, results = api.repro(m, cell.id, repeat=args.repeat, out=args.out, engine=engine, console=console)
            console.rule()
            console.print(f"[bold]{shown(cell.id)}[/]: {shown(summary(results))}", highlight=False)
            how = ("./run.sh reproduces it without the harness" if (bundle / "run.sh").exists()
                   else "no run.sh: the environment could not be had; see attempts/ for the build log")
            console.print(f"bundle: {shown(bundle)}  ({how}; {time.monotonic() - started:.0f} s)")
    return exits.OK
