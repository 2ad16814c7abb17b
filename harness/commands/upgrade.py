"""``harness upgrade``: how far a project's packages can move up, each blocker with its evidence.
Exit 0: every target holds, together; 1: something blocks (or the combination does not hold);
2: the input cannot be used (one line).
Its course is harness/upgrade/course.py, imported when the verb runs: the CLI starts without it."""

from __future__ import annotations

from rich.console import Console

from harness.options.engine import add_engine_args
from harness.options.shared import add_out, add_results
from harness.options.types import whole
from harness.upgrade import ACCURACY_FLOOR


def add(sub) -> None:
    p = sub.add_parser("upgrade", help="how far a project's packages can move up, each blocker with its evidence",
                       description="Run the project's pins (the baseline) and the newest releases (or those named) "
                                   "on its script or model factory -- or a matrix cell's environment and workload "
                                   "(--matrix, --cell); per package, bisect to the newest release that "
                                   "keeps the baseline's status and values, with each blocker's evidence; try the "
                                   "combined stack; write UPGRADE.md and upgrade.json under --out.")
    p.add_argument("project", nargs="?", metavar="PROJECT", help="the project's folder (default: .)")
    p.add_argument("--requirements", metavar="FILE",
                   help="the pins: requirements.txt, pyproject.toml, uv.lock or poetry.lock (default: found there)")
    p.add_argument("--script", metavar="FILE", help="the training script (relative to PROJECT)")
    p.add_argument("--args", nargs="*", metavar="ARG", help="the script's arguments")
    p.add_argument("--factory", metavar="MODULE:FUNCTION", help="instead of --script: the model factory")
    p.add_argument("--data", metavar="MODULE:FUNCTION", help="with --factory: the data")
    p.add_argument("--matrix", metavar="FILE", help="instead of a project: a matrix, with --cell")
    p.add_argument("--cell", metavar="GLOB", help="with --matrix: the cells (of one environment) whose environment "
                                                  "and workload are the baseline")
    p.add_argument("--package", action="append", default=[], metavar="NAME[==VERSION]",
                   help="a package to move, to its newest release or VERSION (repeatable; default: the ML stack "
                        "the project or the cell's environment pins)")
    p.add_argument("--python-version", metavar="X.Y",
                   help="the project's Python (default: the newest that every pinned release has files for, "
                        "within the project's requires-python)")
    p.add_argument("--repeats", type=whole(1, 100), metavar="R", help="repeats per release (default 1)")
    p.add_argument("--accuracy-drop", type=float, metavar="X",
                   help=f"an accuracy change counts past X or the baseline's spread (default {ACCURACY_FLOOR})")
    p.add_argument("--speed-drop", type=float, metavar="PERCENT",
                   help="also a blocker: steady samples/s more than PERCENT %% below the baseline and outside "
                        "its range (every release then runs afresh)")
    p.add_argument("--nightly", action="store_true", help="for each blocker, the first bad nightly build too")
    p.add_argument("--no-reduce", action="store_true", help="no reduced script for a break")
    p.add_argument("--no-diverge", action="store_true", help="no layer-by-layer comparison for a value shift")
    p.add_argument("--budget", type=float, default=120.0, metavar="SECONDS", help="reduce: each candidate's time")
    p.add_argument("--unconfined", action="store_true", help="reduce: candidates unconfined (as reduce --unconfined)")
    add_results(p)
    add_out(p, "upgrade", "where the report goes")
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    add_engine_args(p)


def command(args, console: Console) -> int:
    """The API's upgrade (`api.upgrade`), its keywords the flags; the report's exit status."""
    from harness import api  # the verb's work is imported when the verb runs: not at CLI start
    from harness.options.engine import pythons

    return api.upgrade(args.project, script=args.script, script_args=args.args or (), factory=args.factory,
                       data=args.data, requirements=args.requirements, matrix=args.matrix, cell=args.cell,
                       packages=args.package, python_version=args.python_version, repeats=args.repeats,
                       accuracy_drop=args.accuracy_drop, speed_drop=args.speed_drop, nightly=args.nightly,
                       reduce=not args.no_reduce, diverge=not args.no_diverge, budget=args.budget,
                       unconfined=args.unconfined, results=args.results, out=args.out, offline=args.offline,
                       engine=args.engine, pythons=pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console).exit_code
