"""Command line: ``python -m harness COMMAND ...`` (list, run, build, status, repro, report, bisect,
diverge, reduce, watch, upgrade, atlas).

Errors a user can fix (a bad matrix, no engine) print one clear message and
exit 2; Ctrl-C keeps every finished result and exits 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from rich.console import Console

from . import argtypes, outputroots, status, values
from . import matrix as matrix_mod
from .atlas import command as atlas
from .engine_args import add_engine_args as _add_engine_args
from .engine_args import pythons as _pythons
from .errors import UserError
from .outputs import check_apart, check_output_folder
from .paths import check_writable
from .store import scan
from .terminal import shown, visible
from .upgrade import command as upgrade

DEFAULT_MATRIX = "matrices/smoke.yaml"
DEFAULT_RESULTS = "results"
STATUSES = (*status.ALL, "all")


def _add_release_args(p: argparse.ArgumentParser, results: bool = False) -> None:
    """How version ranges expand; with `results`, also --results (the run whose expansion is reused)."""
    if results:
        p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR",
                       help="version ranges expand as this results folder recorded them (default: results)")
    p.add_argument("--refresh-releases", action="store_true",
                   help="version ranges: ask the package index again instead of reusing the expansion this "
                        "results folder recorded (new releases become new cells)")
    p.add_argument("--offline", action="store_true",
                   help="version ranges: expand from the cached release lists only, never the index")


def _load(args, console: Console | None = None) -> matrix_mod.Matrix:
    """The matrix, its version ranges expanded as this results folder recorded them
    (else from the cache or the index); the expansion is printed to stderr."""
    from . import releases
    resolver = releases.Resolver(Path(getattr(args, "results", DEFAULT_RESULTS)),
                                 refresh=getattr(args, "refresh_releases", False),
                                 offline=getattr(args, "offline", False))
    m = matrix_mod.load(args.matrix, resolver=resolver)
    if m.resolver and console is not None:
        verbose = getattr(args, "verbose", False)
        for line in releases.describe(m.resolver, verbose=verbose):
            console.print(f"[dim]{shown(line)}[/]", highlight=False)
        by_date: dict[str, list[str]] = {}
        for e in m.environments:
            if e.uploaded_before:
                by_date.setdefault(e.uploaded_before, []).append(e.name)
        cut = [f"as of {when}: {names[0]}" + (f" ... {names[-1]} ({len(names)})" if len(names) > 1 else "")
               for when, names in by_date.items()]
        if len(cut) > releases.SHOWN and not verbose:  # one date per release of a long range: the span
            dates = sorted(by_date)
            cut = [f"{len(dates)} cut-off dates, from {dates[0]} ({by_date[dates[0]][0]}) to {dates[-1]} "
                   f"({by_date[dates[-1]][0]}); each one: `list --verbose`"]
        if cut:
            console.print(f"[dim]the rest of each environment resolves as of its newest pinned release's upload "
                          f"(+ margin): {shown('; '.join(cut))}[/]", highlight=False)
    return m


_whole, _seconds, _gpu_list = argtypes.whole, argtypes.seconds, argtypes.gpu_list
_positive = _whole(1, 4_096)  # cells at once, cores per cell


def _add_resource_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", "-j", type=_positive, metavar="N",
                   help="run at most N cells at once (default: as many as the host's cores and GPUs allow; "
                        "--jobs 1 runs one cell at a time with every core)")
    p.add_argument("--gpus", metavar="IDS", type=_gpu_list,
                   help="the GPUs cells may use, e.g. 0,1,2,3 (default: CUDA_VISIBLE_DEVICES if set, "
                        "else every GPU NVML lists); each GPU cell is given its own")
    p.add_argument("--cpus-per-cell", type=_positive, metavar="K",
                   help="cores pinned to each CPU cell (default: the host's cores divided by --jobs)")


def _add_slurm_args(p: argparse.ArgumentParser,
                    how: str = "one Slurm job-array task per cell (submits and returns)") -> None:
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help=f"where cells run: this host, or {how}")
    from .slurm_options import add_arguments
    add_arguments(p.add_argument_group("slurm executor (override the matrix's slurm: section)"))


def build_parser() -> argparse.ArgumentParser:
    """The command line: one function per subcommand (`SUBCOMMANDS`), each adding its own parser
    and arguments, so a subcommand reads (and changes) in one place."""
    parser = argparse.ArgumentParser(prog="python -m harness",
                                     description="Run TF/Keras multi-device version matrices and report them.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _subcommand_list(sub) -> None:
    p = sub.add_parser("list", help="print the cell ids a matrix expands to")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR",
                   help="results folder whose recorded range expansion to use (default: results)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="version ranges: name every release and cut-off date (by default a long range is "
                        "summarised: first ... last, count, and one line per reason releases were left out)")
    _add_release_args(p)


def _subcommand_run(sub) -> None:
    p = sub.add_parser("run", help="run a matrix and write results")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR", help="results folder (default: results)")
    p.add_argument("--only", action="append", metavar="GLOB", help="run only cells whose id matches (repeatable)")
    p.add_argument("--rerun", action="append", choices=STATUSES, default=[], metavar="STATUS",
                   help="run finished cells with this status again (repeatable; 'all' for every cell)")
    p.add_argument("--fresh", action="store_true",
                   help="clean-room run: every cell in a new interpreter, no compile or data caches, no "
                        "unsupported verdicts decided before launch (default: warm where safe; README)")
    _add_engine_args(p)
    _add_resource_args(p)
    _add_slurm_args(p)
    _add_release_args(p)


def _subcommand_status(sub) -> None:
    p = sub.add_parser("status", help="queued / running / finished cells of a matrix (Slurm queue and results)")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR", help="results folder (default: results)")
    p.add_argument("--wait", type=_seconds, metavar="SECONDS",
                   help="poll until nothing is queued or running, at most this long")


def _subcommand_build(sub) -> None:
    p = sub.add_parser("build", help="prepare every environment of a matrix (GPU ones too) without running cells",
                       description="Build or reuse every environment of MATRIX -- GPU ones included, on any "
                                   "host -- and self-check the GPU ones (CUDA / cuDNN libraries present and "
                                   "loading; GPU operations where a GPU is). One line per environment; exit 1 "
                                   "if any is unavailable.")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
    p.add_argument("--only", action="append", metavar="GLOB",
                   help="only environments of cells whose id matches (repeatable)")
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR",
                   help="results folder; build logs go to DIR/<matrix>/.build (default: results)")
    p.add_argument("--export", metavar="DIR",
                   help="docker engine: also 'docker save' each image into DIR, with the Apptainer / enroot "
                        "commands that turn the archives into what a cluster runs")
    _add_engine_args(p)
    _add_release_args(p)


def _subcommand_repro(sub) -> None:
    p = sub.add_parser("repro", help="reproduce one cell N times and write a self-contained bundle",
                       description="Reproduce the cells matching CELL (an id, a prefix or a glob) from the "
                                   "matrices: reuse or build only their environment, run them --repeat times "
                                   "with live logs, report k/N failures and write a bundle (recipe, pins, "
                                   "workloads, spec, run.sh, logs, results).")
    p.add_argument("cell", metavar="CELL")
    p.add_argument("--matrix", action="append", default=[], metavar="FILE",
                   help="matrix to look the cell up in (repeatable; default: every matrices/*.yaml)")
    p.add_argument("--repeat", type=_whole(1, 1_000), default=1, metavar="N", help="attempts (default 1)")
    p.add_argument("--out", default="bundles", metavar="DIR", help="where bundles go (default: bundles)")
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR",
                   help="the run's results folder: version ranges expand as that run recorded them "
                        f"(default: {DEFAULT_RESULTS})")
    p.add_argument("--shell", action="store_true", help="open a shell in the cell's environment instead of running")
    p.add_argument("--command", dest="shell_command", metavar="CMD",
                   help="with --shell: run CMD (bash -c) in the cell's environment instead of an interactive "
                        "shell; the exit status is CMD's")
    _add_engine_args(p)


def _subcommand_bisect(sub) -> None:
    p = sub.add_parser("bisect", help="find the first release of a package where a cell changes, either way",
                       description="Test the cells of MATRIX (or --cell) with releases of --package between two "
                                   "ends (--good/--bad, --old/--new or --range) and find the first release where "
                                   "their outcome changes, whichever way the ends show: the first bad release, or "
                                   "the first good one (the mend); with the options, accuracy or speed shifts too. "
                                   "Finished cells are reused; the changed release's cell is left as a bundle.")
    p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)
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
    p.add_argument("--jobs", "-j", type=_positive, default=1, metavar="N",
                   help="releases tested per round (k-ary search; default 1: plain bisection)")
    p.add_argument("--repeats", type=_positive, metavar="R", help="repeats per release (default: the matrix's)")
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
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR", help="results folder (default: results)")
    p.add_argument("--out", default="bundles", metavar="DIR", help="where the changed release's cell is bundled")
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    _add_engine_args(p)
    _add_slurm_args(p, "one Slurm job-array task per cell, each round submitted and waited for")


def _subcommand_diverge(sub) -> None:
    p = sub.add_parser("diverge", help="where two cells' models part, layer by layer",
                       description="Compare cell A's and cell B's models layer by layer (configurations, weights, "
                                   "outputs, gradients, a short training) above a floor measured on A's own stack. "
                                   "Exit 0: no divergence above the floor; 1: a divergence; 2: an error.")
    p.add_argument("matrix", metavar="MATRIX")
    p.add_argument("cell_a", metavar="CELL_A", help="the reference cell: an id, a prefix or a glob naming one cell")
    p.add_argument("cell_b", metavar="CELL_B", help="the cell compared with it")
    p.add_argument("--rows", type=_whole(1, 65_536), metavar="N",
                   help="rows of the batch compared (default: cell A's batch size)")
    p.add_argument("--epochs", type=_whole(1, 1_000), metavar="N",
                   help="epochs of the training compared (default: cell A's)")
    p.add_argument("--out", default="diverge", metavar="DIR",
                   help="where the sides' cells, the record and the page go (default: diverge)")
    p.add_argument("--rerun", action="store_true", help="run the sides again instead of reusing finished ones")
    p.add_argument("--json", action="store_true", help="print the record as JSON instead of the table")
    _add_engine_args(p)
    _add_release_args(p, results=True)


def _subcommand_reduce(sub) -> None:
    p = sub.add_parser("reduce", help="shrink a script while it still passes on one cell and breaks on the other; "
                                      "write a bundle and an upstream issue draft",
                       description="Shrink the script of two cells (the last good and the first bad release) while "
                                   "both sides hold; write the reduced script, run.sh per side and ISSUE.md under "
                                   "--out. The original file is never written.")
    p.add_argument("matrix", metavar="MATRIX")
    p.add_argument("cells", nargs="+", metavar="CELL",
                   help="GOOD_CELL BAD_CELL (each an id, a prefix or a glob naming one cell); or one CELL with "
                        "--package, --good and --bad: that cell on the two releases (as bisect names them)")
    p.add_argument("--package", metavar="NAME", help="with one CELL: the package whose releases differ")
    p.add_argument("--good", metavar="VERSION", help="with --package: the last good release")
    p.add_argument("--bad", metavar="VERSION", help="with --package: the first bad release")
    p.add_argument("--budget", type=_seconds, default=120.0, metavar="SECONDS",
                   help="each candidate's time on each side: over it, the candidate is rejected (default 120)")
    p.add_argument("--fresh", action="store_true",
                   help="start every candidate in a new interpreter instead of forking it from a warm launcher")
    p.add_argument("--unconfined", action="store_true", help="let candidates write anywhere you can, not only in "
                   "their own folders")
    p.add_argument("--out", default="reduced", metavar="DIR", help="where the result goes (default: reduced)")
    _add_engine_args(p)
    _add_release_args(p, results=True)


def _subcommand_watch(sub) -> None:
    p = sub.add_parser("watch", help="run what is new in a matrix since its last watch, find changes, publish them",
                       description="Expand MATRIX's version ranges against the index now (or --as-of a date), "
                                   "run only the cells without a result (new releases, new code), append them to "
                                   "the matrix's history (RESULTS/<matrix>/.watch/), find changes along the "
                                   "releases with statistics, bisect a new break or mend, and publish a history page, "
                                   "JSON and Atom feeds and badges under --site. Exit 0: nothing new changed; "
                                   "1: new changes; 2: bad input or a harness error; 3: another watch of this "
                                   "matrix is running (nothing done).")
    p.add_argument("matrix", metavar="MATRIX")
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="DIR", help="results folder (default: results)")
    p.add_argument("--as-of", metavar="DATE",
                   help="replay the index as it stood then (a date or a UTC time): only releases uploaded "
                        "before it, nothing resolved later than it")
    p.add_argument("--no-bisect", action="store_true", help="do not bisect a new break or mend")
    p.add_argument("--bisect-jobs", type=_positive, default=1, metavar="N",
                   help="releases a bisect tests per round (k-ary search; default 1)")
    p.add_argument("--site", default="site", metavar="DIR",
                   help="where the history page, feeds and badges go (default: site; the report's site)")
    p.add_argument("--home-url", metavar="URL", help="where the site will be served: the feeds' absolute links")
    p.add_argument("--bundles", default="bundles", metavar="DIR", help="where a bisect leaves its bundle")
    p.add_argument("--wait", action="store_true",
                   help="when another watch of this matrix runs, wait for it (default: exit 3 at once)")
    p.add_argument("--fresh", action="store_true", help="every cell in a new interpreter (as run --fresh)")
    p.add_argument("--jobs", "-j", type=_positive, metavar="N", help="run at most N cells at once")
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    _add_engine_args(p)


def _subcommand_report(sub) -> None:
    p = sub.add_parser("report", help="publish results: static site, Markdown, CSV and JSON "
                                      "('report compare RUN_A RUN_B' sets two runs side by side)",
                       description="Publish the results below RESULTS folders (default: results) as a static "
                                   "site with plots, Markdown, CSV and JSON. 'report compare RUN_A RUN_B' "
                                   "prints regressions and fixes from A to B and exits 1 if there are regressions.")
    p.add_argument("results", nargs="*", default=[DEFAULT_RESULTS], metavar="RESULTS")
    p.add_argument("--out", default="site", metavar="DIR", help="where the site goes (default: site)")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report here, plots beside it")
    p.add_argument("--title", default="Compatibility report")
    p.add_argument("--diverge", default="diverge", metavar="DIR",
                   help="also publish a page for every `diverge` record below DIR (default: diverge, if present)")


# The subcommands' parsers, in the order --help lists them: a new subcommand is one function and one line here.
SUBCOMMANDS = (
    _subcommand_list,
    _subcommand_run,
    _subcommand_status,
    _subcommand_build,
    _subcommand_repro,
    _subcommand_bisect,
    _subcommand_diverge,
    _subcommand_reduce,
    _subcommand_watch,
    _subcommand_report,
    upgrade.add,
    atlas.add,
)

def cmd_list(args, console: Console) -> int:
    m = _load(args, Console(stderr=True, soft_wrap=True))
    for cell in m.cells:
        print(cell.id)
    return 0


def cmd_run(args, console: Console) -> int:
    from .engines import select_engine
    from .report import tables
    from .report.plain import text_table
    from .runner import Runner, select

    m = _load(args, console)
    cells = select(m.cells, args.only)
    if not cells:
        raise UserError(f"no cell of {args.matrix} matches --only {' '.join(args.only)}")
    from .slurm_options import SlurmOptions
    SlurmOptions.merged(m.slurm, args)  # a bad Slurm flag is exit 2 whichever executor then runs
    check_writable(Path(args.results), "--results")
    if m.resolver:
        m.resolver.record(Path(args.results) / m.name)
    if args.executor == "slurm":
        return _submit_to_slurm(args, m, cells, console)
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        engine.warm = not args.fresh
        runner = Runner(m, engine, Path(args.results), console, rerun=frozenset(args.rerun), jobs=args.jobs,
                        gpus=args.gpus, cpus_per_cell=args.cpus_per_cell)
        results = runner.run(cells)
    console.print()
    print(visible("\n".join(text_table(t) for t in tables.summary(results)), lines=True))
    missed = [r for r in results if r.met is False]
    for r in missed:
        want = r.expectation
        for line in values.failed_lines(r):  # a value that differs (harness/values.py)
            console.print(f"[red]expectation not met[/]: {shown(r.cell)}: {shown(line)}", highlight=False)
        if want.get("status") and (r.status != want["status"] or values.failed_lines(r) == []):
            expected = want["status"] + (f" with '{want['signature']}'" if want.get("signature") else "")
            console.print(f"[red]expectation not met[/]: {shown(r.cell)} is {r.status} "
                          f"({shown(r.failure_text[:160])}), the matrix expects {shown(expected)}", highlight=False)
    for r in results:  # listed apart: the host could not run the cell (or its peer), no failure
        for line in values.not_judged_lines(r):
            console.print(f"[blue]not judged here[/]: {shown(r.cell)}: {shown(line)}", highlight=False)
    console.print(f"results: {shown(runner.store.run_dir)}", highlight=False)
    return 1 if missed else 0


def _submit_to_slurm(args, m, cells, console: Console) -> int:
    from .engines import select_engine
    from .executors.slurm.submit import submit
    from .slurm_options import SlurmOptions
    opts = SlurmOptions.merged(m.slurm, args)
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        submit(m, cells, engine, Path(args.results), opts, console, rerun=frozenset(args.rerun),
                     engine_args={"pythons": _pythons(args.python), "ca_bundle": args.ca_bundle}, fresh=args.fresh)
    console.print(f"follow it with: python -m harness status {args.matrix} --results {args.results}")
    return 0


def cmd_status(args, console: Console) -> int:
    from .executors.slurm.board import status as board_status
    entries = board_status(_load(args), Path(args.results), console, wait=args.wait)
    return 1 if any(e.drifted for e in entries) else 0


def cmd_build(args, console: Console) -> int:
    from .build import build
    from .engines import select_engine
    from .runner import select

    m = _load(args, console)
    cells = select(m.cells, args.only)
    if not cells:
        raise UserError(f"no cell of {args.matrix} matches --only {' '.join(args.only)}")
    if m.resolver:  # what is built is what a later run of this results folder runs
        check_writable(Path(args.results), "--results")
        m.resolver.record(Path(args.results) / m.name)
    if args.export:
        check_output_folder(Path(args.export), "--export", [Path(args.results)])
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        outcomes = build(cells, engine, Path(args.results) / m.name, console,
                         export=Path(args.export) if args.export else None)
    missing = [o for o in outcomes if o.status == status.UNAVAILABLE]
    console.print(f"{len(outcomes) - len(missing)} of {len(outcomes)} environment(s) usable ({engine.name})")
    return 1 if missing else 0


def cmd_report(args, console: Console) -> int:
    from . import report
    if args.results and args.results[0] == "compare":
        if len(args.results) != 3:
            raise UserError("usage: report compare RUN_A RUN_B (two results folders)")
        for folder in args.results[1:]:
            if not any(scan(Path(folder))):
                raise UserError(f"no result.json below {folder}")
        text, regressions = report.compare(Path(args.results[1]), Path(args.results[2]), notes=_quarantined(console))
        print(visible(text, lines=True))
        return 1 if regressions else 0
    roots = [Path(p) for p in args.results]
    if not any(True for root in roots for _ in scan(root)):
        raise UserError(f"no result.json below {', '.join(args.results)}")
    check_output_folder(Path(args.out), "--out", roots)
    if args.markdown:
        markdown = Path(args.markdown)  # the file, and its plots beside it
        check_output_folder(markdown.parent / f"{markdown.stem}-plots", "--markdown", roots)
    check_writable(Path(args.out), "--out")
    notes: list[str] = []
    with console.status("writing the report"):
        written = report.publish(roots, Path(args.out), title=args.title,
                                 markdown_path=Path(args.markdown) if args.markdown else None, notes=notes.append,
                                 divergences=[Path(args.diverge)])
    for note in notes:
        _quarantined(console)(note)
    for note in written["notes"]:
        console.print(f"[yellow]note[/]: {shown(note)}", highlight=False)
    console.print(f"{written['cells']} cells, {written['plots']} plots")
    console.print(f"site: {written['site']}  (open it in a browser; it works from disk)")
    console.print(f"markdown: {written['markdown']}" + (f", {written['markdown_copy']}"
                                                         if written.get("markdown_copy") else ""))
    console.print(f"csv/json: {Path(args.out) / 'results.csv'}, {Path(args.out) / 'results.json'}")
    return 0


def _quarantined(console: Console):
    """How a command tells of a file it left out because it is not what it claims to be."""
    def tell(note: str) -> None:
        console.print(f"[yellow]quarantined[/] {shown(note)}", highlight=False)
    return tell


def cmd_repro(args, console: Console) -> int:
    from .engines import select_engine
    from .repro import run_command
    check_output_folder(Path(args.out), "--out")
    check_writable(Path(args.out), "--out")
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        return run_command(args, console, engine)


def cmd_bisect(args, console: Console) -> int:

    from . import bisect, bisect_ends, releases
    from .engines import select_engine
    from .runner import select

    nightly = bisect_ends.checked(args)
    old, new, said = bisect_ends.ends(args)
    m = _load(args, console)
    slurm = None
    if args.executor == "slurm":
        from .slurm_options import SlurmOptions
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
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        found, _ = bisect.run(m=m, base_cells=cells, package=args.package, versions=versions, engine=engine,
                              results_root=Path(args.results), console=console, jobs=args.jobs,
                              repeats=args.repeats, cutoff=not args.no_cutoff, bundles=Path(args.out),
                              criteria=bisect.Criteria(args.accuracy_drop, args.speed_drop), resolver=resolver,
                              slurm=slurm, engine_args={"pythons": _pythons(args.python), "ca_bundle": args.ca_bundle},
                              nightly=nightly, said=said)
    return 0 if not found.problem else 1


def cmd_diverge(args, console: Console) -> int:
    from . import diverge
    from .engines import select_engine
    check_apart(Path(args.out), "--out", [Path(args.results)])  # its own cells live there, not among a run's
    check_writable(Path(args.out), "--out")
    talk = Console(stderr=True, soft_wrap=True) if args.json else console  # --json: stdout is the record's
    m = _load(args, talk)
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle, console=talk) as engine:
        return diverge.command(args, m, engine, console, talk)


def cmd_reduce(args, console: Console) -> int:
    from .engines import select_engine
    from .reduce import reduce, show, sides
    check_apart(Path(args.out), "--out", [Path(args.results)])  # its own cells live there
    check_writable(Path(args.out), "--out")
    m = _load(args, console)
    good, bad = sides(m, args)
    with select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle, console=console) as engine:
        engine.warm = engine.warm and not args.fresh
        found = reduce(m, good, bad, engine, Path(args.out), console, budget=args.budget, unconfined=args.unconfined)
        show(found, console)
    return 0


def cmd_watch(args, console: Console) -> int:
    from .engines import select_engine
    from .watch.publish import check_home_url
    from .watcher import command
    check_home_url(args.home_url)
    check_output_folder(Path(args.site), "--site", [Path(args.results)])
    check_output_folder(Path(args.bundles), "--bundles", [Path(args.results)])  # bundles never land among results
    check_writable(Path(args.site), "--site")

    def engine():
        return select_engine(args.engine, pythons=_pythons(args.python), ca_bundle=args.ca_bundle, console=console)
    try:
        return command(args, console, engine)
    except (UserError, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception:  # a harness bug: exit 2 (never 1, which a schedule reads as "new changes"), traceback kept
        import traceback
        traceback.print_exc()
        Console(stderr=True).print("[bold red]error:[/] the watch failed (above); exit 2", highlight=False)
        return 2


COMMANDS = {"list": cmd_list, "run": cmd_run, "build": cmd_build, "status": cmd_status, "repro": cmd_repro,
            "report": cmd_report, "bisect": cmd_bisect, "diverge": cmd_diverge,
            "reduce": cmd_reduce, "upgrade": upgrade.command, "atlas": atlas.command,
            "watch": cmd_watch}


def _terminate(signum, frame) -> None:
    """SIGTERM (a scheduler's, or `kill`) ends a run the way Ctrl-C does: finished cells
    kept, running ones stopped and left without a result, exit 130."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    args = build_parser().parse_args(argv)
    console = Console(soft_wrap=True)
    err = Console(stderr=True, soft_wrap=True)
    try:
        with outputroots.declared(args):  # its output folders are never taken for the user's code
            return COMMANDS[args.command](args, console)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {shown(str(exc), lines=True)}", highlight=False, markup=True)
        return 2
    except BrokenPipeError:  # `python -m harness list M | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        err.print("\ninterrupted: every finished cell's result is kept; run the same command again to resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
