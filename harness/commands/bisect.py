"""``harness bisect``: the first release of a package where a cell changes, either way."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for, load
from harness.errors import UserError
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.index import releases
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
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness.investigate import bisect, bisect_ends
    from harness.investigate.bisect_judge import Criteria

    nightly = bisect_ends.checked(args)
    old, new, said = bisect_ends.ends(args)
    m = load(args, console)
    slurm = None
    if args.executor == "slurm":
        slurm = SlurmOptions.merged(m.slurm, args)
    cells = select(m.cells, args.cell)
    if not cells:
        raise UserError(f"no cell of {args.matrix} matches --cell {' '.join(args.cell or [])}")
    env = cells[0].environment
    cells = [c for c in cells if c.environment == env]
    check_writable(Path(args.results), "--results")
    if slurm and m.resolver:  # a task loads the matrix offline: its ranges as this host expanded them
        m.resolver.record(Path(args.results) / m.name)
    check_output_folder(Path(args.out), "--out", [Path(args.results)])  # bundles never land among results
    check_writable(Path(args.out), "--out")
    resolver = releases.Resolver(offline=args.offline)
    versions = bisect_ends.bounds(args.package, env.python, good=old, bad=new, spec=args.spec, pre=args.pre,
                             resolver=resolver)
    console.print(f"bisecting {args.package} over {len(versions)} releases ({versions[0]} ... {versions[-1]}) for "
                  f"{len(cells)} cell(s) of {env.name} (Python {env.python}), {args.jobs} release(s) per round")
    with engine_for(args, console) as engine:
        found, _ = bisect.run(m=m, base_cells=cells, package=args.package, versions=versions, engine=engine,
                              results_root=Path(args.results), console=console, jobs=args.jobs,
                              repeats=args.repeats, cutoff=not args.no_cutoff, bundles=Path(args.out),
                              criteria=Criteria(args.accuracy_drop, args.speed_drop), resolver=resolver,
                              slurm=slurm, engine_args={"pythons": pythons(args.python), "ca_bundle": args.ca_bundle},
                              nightly=nightly, said=said)
    return exits.OK if not found.problem else exits.CHANGED
