"""``harness atlas``: ``run`` (every environment of the atlas matrices, resumable,
within a disk bound), ``publish`` (the compact data, the changes and the site pages),
``explain`` (each break and mend bisected), ``watch`` (one pass that keeps it current) and
``lookup`` (a project's pins against the atlas) and ``audit`` (the published atlas held against itself and
the projects' release notes).
Exit 0; 1 when a run left cells without a result; 2 for input that cannot be used (one line).
Each action's work lives in harness/atlas/ and is imported when the action runs: the CLI starts without it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.options.shared import add_out, add_results
from harness.options.types import whole
from harness.status import ALL

MATRICES = "matrices/atlas"
RESULTS = "results/atlas"
OUT = "docs/atlas"
STATUSES = (*ALL, "all")


def add(sub) -> None:
    p = sub.add_parser("atlas", help="the compatibility atlas: run it, publish it, look a project's pins up in it",
                       description="The seeds' workloads on every TensorFlow and Keras release (the matrices "
                                   f"under {MATRICES}): 'run' measures what is missing, 'publish' writes the data, "
                                   "the changes and the pages, 'explain' bisects each break and mend, 'lookup' "
                                   "answers for a project's pins.")
    acts = p.add_subparsers(dest="action", required=True)
    _add_run(acts)
    _add_publish(acts)
    _add_explain(acts)
    _add_watch(acts)
    _add_lookup(acts)
    _add_audit(acts)


def _add_data(p, what: str = "the atlas data") -> None:
    """`--data`: the committed atlas a verb reads (publish's own `--data` has no default: it chooses
    between results and data)."""
    p.add_argument("--data", default=f"{OUT}/atlas.json", metavar="FILE", help=f"{what} (default: {OUT}/atlas.json)")


def _add_run(acts) -> None:
    r = acts.add_parser("run", help="run every environment that owes cells, one at a time; resumable")
    r.add_argument("matrices", nargs="?", default=MATRICES, metavar="PATH",
                   help=f"a folder or one file (default: {MATRICES})")
    add_results(r, RESULTS)
    r.add_argument("--keep", action="store_true", help="keep each environment once its cells are done "
                                                       "(default: removed, so the disk holds about one)")
    r.add_argument("--only", action="append", metavar="GLOB",
                   help="only environments whose name matches (repeatable: any of them)")
    r.add_argument("--jobs", type=whole(1, 256), metavar="N", help="cells at once (as `run --jobs`)")
    r.add_argument("--rerun", action="append", default=[], choices=STATUSES, metavar="STATUS",
                   help="run finished cells with this status again, as `run --rerun` (after a harness fix)")
    r.add_argument("--executor", choices=("local", "slurm"), help="as `run --executor` (slurm: a cluster)")
    r.add_argument("--refresh-releases", action="store_true", help="ask the index for new releases first")
    _add_data(r, "the committed atlas: its measured cells are not run again (--rerun STATUS runs them)")
    r.add_argument("--yes", action="store_true", help="at a terminal, start without asking after the cost is said")
    r.add_argument("--publish", action="store_true",
                   help=f"then publish, as `atlas publish` does, into {OUT} (the exit status stays the run's)")


def _add_publish(acts) -> None:
    p = acts.add_parser("publish", help="the compact data (CSV, JSON), the changes, the pages and the feed")
    add_results(p, RESULTS)
    add_out(p, OUT, "where the data and pages go")
    p.add_argument("--data", metavar="FILE", help="publish from committed data (atlas.json) instead of results")


def _add_explain(acts) -> None:
    ex = acts.add_parser("explain", help="bisect each break, mend and changed failure to its release (and night)")
    _add_data(ex)
    ex.add_argument("--change", action="append", default=[], metavar="ID", help="only this change (repeatable)")
    ex.add_argument("--evidence", default=f"{OUT}/evidence", metavar="DIR",
                    help=f"where each change's bisect record goes (default: {OUT}/evidence)")
    add_results(ex, "results/atlas-explain", "the bisects' and comparisons' results folder")
    add_out(ex, "bundles/atlas-explain", "where the bisects' bundles (DIR/bundles) and the comparisons' sides and "
                                         "pages (DIR/diverge) go")
    ex.add_argument("--no-nightly", action="store_true", help="stop at the releases, no nightly search")
    ex.add_argument("--again", action="store_true", help="bisect changes that already have evidence too")


def _add_watch(acts) -> None:
    w = acts.add_parser("watch", help="one pass that keeps the atlas current: new releases run, published, "
                                      "their changes explained (run it daily)",
                        description="Ask the index for new releases, run every cell without a result (a new "
                                    "release's row), publish, explain the changes the last publication did not "
                                    "have, and publish again. Exit 0: nothing new changed; 1: new changes (named); "
                                    "2: bad input; 3: another atlas watch holds this results folder.")
    w.add_argument("matrices", nargs="?", default=MATRICES, metavar="PATH",
                   help=f"a folder or one file (default: {MATRICES})")
    add_results(w, RESULTS)
    add_out(w, OUT, "where the data and pages go")
    w.add_argument("--explain-results", default="results/atlas-explain", metavar="DIR",
                   help="the bisects' and comparisons' results folder (default: results/atlas-explain)")
    w.add_argument("--explain-out", default="bundles/atlas-explain", metavar="DIR",
                   help="their bundles and comparison pages (default: bundles/atlas-explain)")
    w.add_argument("--no-explain", action="store_true", help="publish the new changes without explaining them")
    w.add_argument("--no-nightly", action="store_true", help="explain to the release, no nightly search")
    w.add_argument("--jobs", type=whole(1, 256), metavar="N", help="cells at once (as `run --jobs`)")
    w.add_argument("--executor", choices=("local", "slurm"), help="as `run --executor` (slurm: a cluster)")
    w.add_argument("--offline", action="store_true", help="the releases the results folder recorded, no index")
    w.add_argument("--wait", action="store_true", help="when another atlas watch runs, wait for it (default: exit 3)")


def _add_lookup(acts) -> None:
    lk = acts.add_parser("lookup", help="the rows nearest a project's pins, and the changes up to a target",
                         description="A project's pins against the atlas: the measured rows nearest them, and "
                                     "every change the atlas knows between them and the newest row of their "
                                     "kind (or --target). Lines that pin nothing exactly (ranges) are named as "
                                     "ignored. Exit 0: nothing on the way breaks what the project's stack does; "
                                     "1: something does (each change is printed); 2: pins or data that cannot "
                                     "be used.")
    lk.add_argument("pins", nargs="*", metavar="PKG==VERSION", help="pins (besides or instead of -r)")
    lk.add_argument("-r", "--requirements", metavar="FILE", help="a requirements file, pyproject.toml or lock")
    lk.add_argument("--target", action="append", default=[], metavar="PKG==VERSION",
                    help="where the project wants to go (default: the newest measured row of its kind)")
    _add_data(lk)
    lk.add_argument("--json", action="store_true", help="the answer as JSON")


def _add_audit(acts) -> None:
    au = acts.add_parser("audit", help="hold the published atlas against itself and the projects' release notes",
                         description="Check the published data and page against themselves (counts and their "
                                     "units, devices asked and trained, one row per stack, verdicts against their "
                                     "evidence, like-for-like changes, claims about every row) and against a facts "
                                     "file of release-note truths with their sources. Exit 0: nothing contradicts; "
                                     "1: each contradiction named; 2: data or facts that cannot be read.")
    _add_data(au, "the atlas data; its changes.json and evidence/ beside it")
    au.add_argument("--page", metavar="FILE", help="the atlas page (default: the data folder's name + .md)")
    au.add_argument("--facts", metavar="FILE",
                    help="the facts held against it (default: the harness's own, harness/atlas/facts.yaml)")
    au.add_argument("--matrices", metavar="PATH",
                    help=f"the atlas matrices whose every cell the data must hold or the page name, their ranges "
                         f"expanded as `atlas run` expands them (default: {MATRICES}, when --data is left at its "
                         "default; otherwise none)")
    add_results(au, RESULTS, "the results folder whose recorded expansions `atlas run` uses")
    au.add_argument("--json", action="store_true", help="the contradictions as JSON")


def command(args, console: Console) -> int:
    if args.action == "run":
        return _run(args, console)
    if args.action == "publish":
        from harness.atlas import publish  # imported when the verb runs: the CLI starts without it
        return publish.command(args, console)
    if args.action == "explain":
        from harness.atlas import explain  # imported when the verb runs: the CLI starts without it
        return explain.command(args, console)
    if args.action == "audit":
        from harness.atlas import audit  # imported when the verb runs: the CLI starts without it
        if args.matrices is None and args.data == f"{OUT}/atlas.json":
            args.matrices = MATRICES
        return audit.command(args, console)
    if args.action == "watch":
        from harness.atlas import watch  # imported when the verb runs: the CLI starts without it
        return watch.command(args, console)
    from harness.atlas import lookup  # imported when the verb runs: the CLI starts without it
    return lookup.command(args, console)


def _run(args, console: Console) -> int:
    from harness.atlas import drive  # imported when the verb runs: the CLI starts without it
    left = drive.run(Path(args.matrices), Path(args.results), console, refresh=args.refresh_releases,
                     only=args.only, keep=args.keep, jobs=args.jobs, rerun=frozenset(args.rerun),
                     executor=args.executor, data=Path(args.data),
                     confirm=None if args.yes or not _at_a_terminal() else _ask)
    if args.publish:
        from harness.atlas import publish  # imported when the verb runs: the CLI starts without it
        publish.command(argparse.Namespace(results=args.results, out=OUT, data=None), console)
    return exits.CHANGED if left else exits.OK


def _at_a_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask(said: str) -> bool:
    """A long run is started by the person who was told its cost (`--yes` answers for them)."""
    try:
        return input("start it? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False
