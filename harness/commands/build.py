"""``harness build``: prepare every environment of a matrix without running a cell."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits, status
from harness.commands.common import engine_for, load_selected
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args
from harness.options.shared import add_matrix, add_release_args, add_results


def add(sub) -> None:
    p = sub.add_parser("build", help="prepare every environment of a matrix (GPU ones too) without running cells",
                       description="Build or reuse every environment of MATRIX -- GPU ones included, on any "
                                   "host -- and self-check the GPU ones (CUDA / cuDNN libraries present and "
                                   "loading; GPU operations where a GPU is). One line per environment; exit 1 "
                                   "if any is unavailable.")
    add_matrix(p)
    p.add_argument("--only", action="append", metavar="GLOB",
                   help="only environments of cells whose id matches (repeatable)")
    add_results(p, what="results folder; build logs go to DIR/<matrix>/.build")
    p.add_argument("--export", metavar="DIR",
                   help="docker engine: also 'docker save' each image into DIR, with the Apptainer / enroot "
                        "commands that turn the archives into what a cluster runs")
    add_engine_args(p)
    add_release_args(p)


def command(args, console: Console) -> int:
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api

    m, _ = load_selected(args, console)   # an --only that selects nothing: exit 2, in the flag's words
    if m.resolver:  # the checks in the flags' words; api.build records the ranges it builds
        check_writable(Path(args.results), "--results")
    if args.export:
        check_output_folder(Path(args.export), "--export", [Path(args.results)])
    with engine_for(args, console) as engine:   # the engine the flags name; the build itself is the API's
        outcomes = api.build(m, results=args.results, engine=engine, only=args.only, export=args.export,
                             console=console)
    missing = [o for o in outcomes if o.status == status.UNAVAILABLE]
    console.print(f"{len(outcomes) - len(missing)} of {len(outcomes)} environment(s) usable ({engine.name})")
    return exits.CHANGED if missing else exits.OK
