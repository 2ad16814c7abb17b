"""``harness run``: run a matrix here, or submit it to Slurm, and say which expectations it missed."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for, load_selected
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args, pythons
from harness.options.shared import (
    STATUSES,
    add_matrix,
    add_release_args,
    add_resource_args,
    add_results,
    add_slurm_args,
)
from harness.options.slurm import SlurmOptions
from harness.status import values
from harness.terminal import shown, visible


def add(sub) -> None:
    p = sub.add_parser("run", help="run a matrix and write results")
    add_matrix(p)
    add_results(p)
    p.add_argument("--only", action="append", metavar="GLOB", help="run only cells whose id matches (repeatable)")
    p.add_argument("--rerun", action="append", choices=STATUSES, default=[], metavar="STATUS",
                   help="run finished cells with this status again (repeatable; 'all' for every cell)")
    p.add_argument("--fresh", action="store_true",
                   help="clean-room run: every cell in a new interpreter, no compile or data caches, no "
                        "unsupported verdicts decided before launch (default: warm where safe; README)")
    p.add_argument("--quiet", action="store_true",
                   help="each cell's line and what went wrong, without the release ranges and the table "
                        "(for a driver that runs a matrix a stack at a time and says those once)")
    add_engine_args(p)
    add_resource_args(p)
    add_slurm_args(p)
    add_release_args(p)


def command(args, console: Console) -> int:
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api
    from harness.report import tables
    from harness.report.plain import text_table

    m, cells = load_selected(args, console)
    SlurmOptions.merged(m.slurm, args)  # a bad Slurm flag is exit 2 whichever executor then runs
    check_writable(Path(args.results), "--results")   # in the flag's words; api.run records the ranges
    if args.executor == "slurm":
        if m.resolver:
            m.resolver.record(Path(args.results) / m.name)
        return _submit_to_slurm(args, m, cells, console)
    with engine_for(args, console) as engine:   # the engine the flags name; the run itself is the API's
        report = api.run(m, results=args.results, engine=engine, only=args.only, rerun=args.rerun, jobs=args.jobs,
                         gpus=args.gpus, cpus_per_cell=args.cpus_per_cell, fresh=args.fresh, console=console)
    results = report.results
    if not args.quiet:
        console.print()
        print(visible("\n".join(text_table(t) for t in tables.summary(results)), lines=True))
    missed = report.missed
    for r in missed:
        want = r.expectation
        for line in values.failed_lines(r):  # a value that differs (harness/status/values.py)
            console.print(f"[red]expectation not met[/]: {shown(r.cell)}: {shown(line)}", highlight=False)
        if want.get("status") and (r.status != want["status"] or values.failed_lines(r) == []):
            expected = want["status"] + (f" with '{want['signature']}'" if want.get("signature") else "")
            console.print(f"[red]expectation not met[/]: {shown(r.cell)} is {r.status} "
                          f"({shown(r.failure_text[:160])}), the matrix expects {shown(expected)}", highlight=False)
    for r in results:  # listed apart: the host could not run the cell (or its peer), no failure
        for line in values.not_judged_lines(r):
            console.print(f"[blue]not judged here[/]: {shown(r.cell)}: {shown(line)}", highlight=False)
    console.print(f"results: {shown(report.run_dir)}", highlight=False)
    return report.exit_code


def _submit_to_slurm(args, m, cells, console: Console) -> int:
    # only with --executor slurm: the submitter is imported when it submits, so the CLI starts without it
    from harness.run.executors.slurm.submit import submit

    opts = SlurmOptions.merged(m.slurm, args)
    with engine_for(args, console) as engine:
        submit(m, cells, engine, Path(args.results), opts, console, rerun=frozenset(args.rerun),
               engine_args={"pythons": pythons(args.python), "ca_bundle": args.ca_bundle}, fresh=args.fresh)
    console.print(f"follow it with: python -m harness status {args.matrix} --results {args.results}")
    return exits.OK
