"""``harness bisect``: the first release of a package where a cell changes, either way."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for, load
from harness.errors import UserError
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args, pythons
from harness.options.shared import add_matrix, add_out, add_results, add_slurm_args, positive
from harness.options.slurm import SlurmOptions
from harness.run.selection import select


def add(sub) -> None:
    p = sub.add_parser("bisect", help="find the first release of a package where a cell changes, either way",
                       description="Test the cells of MATRIX (or --cell) with releases of --package between two "
                                   "ends (--good/--bad, --old/--new or --range) and find the first release where "
                                   "their outcome changes, whichever way the ends show: the first bad release, or "
                                   "the first good one (the mend); with the options, accuracy or speed shifts too. "
                                   "Finished cells are reused; the changed release's cell is left as a bundle.")
    add_matrix(p)
    p.add_argument("--package", required=True, metavar="NAME",
                   help="the package whose releases are searched: tensorflow, keras, or any package")
    p.add_argument("--good", metavar="VERSION", help="a release known good (newer than --bad: where was it mended?)")
    p.add_argument("--bad", metavar="VERSION", help="a release known bad")
    p.add_argument("--old", metavar="VERSION", help="instead of --good/--bad: the older end, whatever it does")
    p.add_argument("--new", metavar="VERSION", help="with --old: the newer end")
    p.add_argument("--range", dest="spec", metavar="SPEC",
                   help="instead of the two ends: search these releases, e.g. '>=1.26,<2.1' (oldest, newest: the ends)")
    p.add_argument("--cell", action="append", metavar="GLOB",
                   help="only the cells whose id matches (repeatable; default: the matrix's first environment)")
    p.add_argument("--jobs", "-j", type=positive, default=1, metavar="N",
                   help="releases tested per round (k-ary search; default 1: plain bisection)")
    p.add_argument("--repeats", type=positive, metavar="R", help="repeats per release (default: the matrix's)")
    p.add_argument("--accuracy-drop", type=float, metavar="X",
                   help="also bad: validation accuracy more than X below the good end's median")
    p.add_argument("--speed-drop", type=float, metavar="PERCENT",
                   help="also bad: steady samples/s more than PERCENT %% below the good end's median and "
                        "outside its min-max range")
    p.add_argument("--pre", action="store_true", help="include pre-releases")
    p.add_argument("--nightly", nargs="?", const="auto", metavar="PACKAGE",
                   help="then search the nightly builds between the releases on either side of the change "
                        "(tf-nightly, keras-nightly, tf-keras-nightly; or the PACKAGE named)")
    p.add_argument("--no-cutoff", action="store_true", help="resolve the rest as of today, not each release's day")
    add_results(p)
    add_out(p, "bundles", "where the changed release's cell is bundled", tell_default=False)
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    add_engine_args(p)
    add_slurm_args(p, "one Slurm job-array task per cell, each round submitted and waited for")


def command(args, console: Console) -> int:
    """The API's bisect (`api.bisect`), with what the flags got wrong said in the flags' words first."""
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import api
    from harness.investigate import bisect_ends

    bisect_ends.checked(args)   # the ends and the criteria, before the matrix loads
    m = load(args, console)
    slurm = SlurmOptions.merged(m.slurm, args) if args.executor == "slurm" else None
    if not select(m.cells, args.cell):
        raise UserError(f"no cell of {args.matrix} matches --cell {' '.join(args.cell or [])}")
    check_writable(Path(args.results), "--results")
    check_output_folder(Path(args.out), "--out", [Path(args.results)])  # bundles never land among results
    check_writable(Path(args.out), "--out")
    with engine_for(args, console) as engine:
        answer = api.bisect(m, package=args.package, good=args.good, bad=args.bad, old=args.old, new=args.new,
                            spec=args.spec, cells=args.cell, results=args.results, out=args.out, engine=engine,
                            jobs=args.jobs, repeats=args.repeats, accuracy_drop=args.accuracy_drop,
                            speed_drop=args.speed_drop, pre=args.pre, nightly=args.nightly,
                            cutoff=not args.no_cutoff, offline=args.offline, pythons=pythons(args.python),
                            ca_bundle=args.ca_bundle, slurm=slurm, console=console)
    return exits.OK if not answer.found.problem else exits.CHANGED
