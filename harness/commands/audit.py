"""``harness audit``: everything published, held to its record (``harness.publications``)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.claims.findings import tell
from harness.options.shared import add_results

DEFAULT = ("docs/atlas", "docs/portability")   # what this repository publishes
ATLAS_MATRICES = "matrices/atlas"              # the matrices its atlas is of


def add(sub) -> None:
    p = sub.add_parser("audit", help="hold every publication (atlas, portability grid, watch site, verdict, "
                                     "upgrade report) to its record",
                       description="Each folder is known by the record it holds: atlas.json (its page beside "
                                   "the folder), portability.json, verdict.json, upgrade.json, or a watch's "
                                   "feeds (its record beside the results: --results). Every file the "
                                   "record renders is rendered again in a copy and compared with what is "
                                   "published (`rendered`); the atlas is also held to its own audit (`atlas "
                                   "audit`, with the cells its matrices owe). Exit 0: nothing contradicts; 1: "
                                   "each finding named, with its file and place; 2: a record that cannot be read.")
    p.add_argument("folders", nargs="*", metavar="FOLDER",
                   help=f"publications to audit (default: {', '.join(DEFAULT)})")
    p.add_argument("--matrices", metavar="PATH",
                   help=f"the atlas matrices whose every cell the atlas data must hold or its page name (default: "
                        f"{ATLAS_MATRICES} for the default folders; none for folders named)")
    add_results(p, None, "where the records lie: the results folder whose recorded expansions `atlas run` uses "
                         "(default: results/atlas), the one a watch's site was published from (default: results)")
    p.add_argument("--json", action="store_true", help="the findings as JSON")


def command(args, console: Console) -> int:
    from harness import publications  # imported when the verb runs: the CLI starts without it

    named = [Path(f) for f in args.folders]
    folders = named or [Path(f) for f in DEFAULT if Path(f).is_dir()]
    matrices = args.matrices or (None if named else ATLAS_MATRICES)
    pubs = [publications.known(f) for f in folders]   # every folder read once, before any is audited
    found = publications.audit(*pubs, matrices=matrices, results=args.results)  # results None: each kind's own
    said = ", ".join(f"{p.kind} {p.folder}" for p in pubs)
    return tell(found, console, as_json=args.json, noun=f"finding(s) in {said}",
                clean="each says only what its record holds")
