"""``harness verdict``: what a dependency bump -- the pull request that moves TensorFlow, Keras, JAX or
NumPy -- does to the project's own script and the model files it keeps: safe, breaks, changes
values, cannot install, each with its evidence. Exit 0: safe (or nothing to judge); 1: breaks,
changes values, cannot install, or the base does not run; 2: the input cannot be used.
Its course is harness/verdict/course.py, imported when the verb runs: the CLI starts without it."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.errors import UserError
from harness.options.engine import add_engine_args, pythons
from harness.options.shared import add_out, add_results
from harness.options.types import whole
from harness.terminal import shown
from harness.verdict import DEFAULT_REPEATS


def add(sub) -> None:
    p = sub.add_parser("verdict", help="what a dependency bump does to the project's script and model files",
                       description="Read the project's pins at two revisions (a pull request's base and head) or "
                                   "from two pin files, run its script (or model factory) on both stacks with "
                                   "repeats, read its model files on both, and judge: safe, breaks, changes values, "
                                   "cannot install. Writes COMMENT.md and verdict.json under --out, and the job "
                                   "summary where $GITHUB_STEP_SUMMARY names one.")
    p.add_argument("project", nargs="?", default=".", metavar="PROJECT", help="the project's folder (default: .)")
    p.add_argument("--base", metavar="REV", help="the revision before the bump (the pull request's base)")
    p.add_argument("--head", metavar="REV", help="the revision with the bump (default: HEAD)")
    p.add_argument("--base-pins", metavar="FILE", help="instead of revisions: the pins before the bump")
    p.add_argument("--head-pins", metavar="FILE", help="with --base-pins: the pins after it")
    p.add_argument("--requirements", metavar="FILE",
                   help="the pin file's path in the project (default: the first of requirements.txt, "
                        "requirements.lock, uv.lock, poetry.lock, pyproject.toml)")
    p.add_argument("--script", metavar="FILE", help="the training script (relative to PROJECT)")
    p.add_argument("--args", nargs="*", metavar="ARG", help="the script's arguments")
    p.add_argument("--factory", metavar="MODULE:FUNCTION", help="instead of --script: the model factory")
    p.add_argument("--data", metavar="MODULE:FUNCTION", help="with --factory: the data")
    p.add_argument("--repeats", type=whole(1, 100), default=DEFAULT_REPEATS, metavar="R",
                   help=f"runs of each side: values are judged against the base's spread (default {DEFAULT_REPEATS})")
    p.add_argument("--python-version", metavar="X.Y",
                   help="the project's Python (default: the newest that every pinned release has files for)")
    p.add_argument("--accuracy-drop", type=float, metavar="X",
                   help="an accuracy change counts past X or the base's spread, whichever is wider (default 0.01)")
    p.add_argument("--no-models", action="store_true", help="do not read the project's model files")
    p.add_argument("--no-reduce", action="store_true", help="no reduced script for a break")
    p.add_argument("--budget", type=float, default=120.0, metavar="SECONDS", help="reduce: each candidate's time")
    add_results(p)
    add_out(p, "verdict", "where COMMENT.md and verdict.json go")
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    p.add_argument("--audit", action="store_true",
                   help="judge nothing: hold --out's COMMENT.md against its verdict.json, line by line "
                        "(exit 1 names each line the record does not make)")
    add_engine_args(p)


def command(args, console: Console) -> int:
    if args.audit:
        return _audit(Path(args.out), console)
    from harness.verdict import course  # the verb's work is imported when the verb runs: not at CLI start

    req = course.Request(project=Path(args.project), base=args.base, head=args.head, base_pins=args.base_pins,
                         head_pins=args.head_pins, requirements=args.requirements, script=args.script,
                         script_args=args.args or [], factory=args.factory, data=args.data, repeats=args.repeats,
                         python_version=args.python_version, accuracy_drop=args.accuracy_drop, engine=args.engine,
                         pythons=pythons(args.python), ca_bundle=args.ca_bundle, results=Path(args.results),
                         out=Path(args.out), reduce=not args.no_reduce, budget=args.budget,
                         read_models=not args.no_models, offline=args.offline)
    _, code = course.run(req, console)
    return code


def _audit(out: Path, console: Console) -> int:
    """`verdict --audit`: the comment against its record; 0 when every line is the record's."""
    from harness.verdict import writers  # deferred, as the course: the CLI starts without the verdict's modules

    try:
        found = writers.audit(out)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for line in found:
        console.print(f"[red]comment[/] {shown(line)}", highlight=False)
    console.print(f"{len(found)} line(s) of {shown(str(out / 'COMMENT.md'))} its record does not make"
                  if found else f"{shown(str(out / 'COMMENT.md'))}: every line is its record's", highlight=False)
    return exits.CHANGED if found else exits.OK
