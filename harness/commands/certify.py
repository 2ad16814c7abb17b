"""``harness certify``: does a model train the same on N devices? The one-device cell against each
multi-device cell of the same stack, workload and batch, layer by layer above a floor, with the
controls that name an expected difference. Exit 0: every pair is equivalent or differs as expected;
1: a pair differs, fails or reports a metric out of range; 2: the input cannot be used.
Its course is harness/certify/course.py, imported when the verb runs."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.options.engine import add_engine_args
from harness.options.shared import add_matrix, add_out, add_results


def add(sub) -> None:
    p = sub.add_parser("certify", help="one device against N, layer by layer: equivalent, differs as expected, "
                                       "differs",
                       description="For every one-device cell and each multi-device cell of the same stack, workload "
                                   "and batch size: their ordinary runs (status, metrics in range) and diverge's "
                                   "comparison above the floor; a difference is 'as expected' only where a control "
                                   "(--control) agrees. Writes CERTIFICATE.md and certificate.json under --out.")
    add_matrix(p, required=True)
    p.add_argument("--only", action="append", metavar="GLOB", help="only these cells (repeatable)")
    p.add_argument("--control", action="append", default=[], metavar="WORKLOAD=CONTROL:KEY",
                   help="CONTROL is WORKLOAD without the part KEY names (batchnorm, dropout, reduction), or with "
                        "it frozen: where WORKLOAD differs and CONTROL agrees, the difference is the expected one")
    add_results(p)
    add_out(p, "certify", "where CERTIFICATE.md, certificate.json and diverge's folders go")
    add_engine_args(p)


def command(args, console: Console) -> int:
    from harness import api  # the matrix loader and the runner, imported when the verb runs
    from harness.certify import course  # the verb's work is imported when the verb runs

    controls = [course.Control.parse(t) for t in args.control]
    m = api.load_matrix(args.matrix)
    _, code = course.run(m, only=args.only, controls=controls, results=Path(args.results), out=Path(args.out),
                         engine=args.engine, console=console)
    return code
