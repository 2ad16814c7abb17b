"""What the verbs share beyond their options: the matrix loaded with its version ranges told,
the engine a verb's options name, and how a left-out file is told.

Each verb's module imports its work inside its `command`: building the parser imports every verb
module, and ``python -m harness list`` should not pay for the imports of bisect, reduce and the report."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import matrix as matrix_mod
from harness.engines import select_engine
from harness.errors import UserError
from harness.index import releases
from harness.options.engine import pythons
from harness.options.shared import DEFAULT_RESULTS
from harness.run.selection import select
from harness.terminal import shown


def load(args, console: Console | None = None) -> matrix_mod.Matrix:
    """The matrix, its version ranges expanded as this results folder recorded them
    (else from the cache or the index); the expansion is printed to stderr."""
    resolver = releases.Resolver(Path(getattr(args, "results", DEFAULT_RESULTS)),
                                 refresh=getattr(args, "refresh_releases", False),
                                 offline=getattr(args, "offline", False))
    m = matrix_mod.load(args.matrix, resolver=resolver)
    if m.resolver and console is not None and not getattr(args, "quiet", False):
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


def load_selected(args, console: Console) -> tuple[matrix_mod.Matrix, list]:
    """The matrix and its cells that --only selects; none is a user's error (exit 2)."""
    m = load(args, console)
    cells = select(m.cells, args.only)
    if not cells:
        raise UserError(f"no cell of {args.matrix} matches --only {' '.join(args.only)}")
    return m, cells


def engine_for(args, console: Console):
    """The engine the verb's --engine, --python and --ca-bundle name (a context manager)."""
    return select_engine(args.engine, pythons=pythons(args.python), ca_bundle=args.ca_bundle, console=console)


def quarantined(console: Console):
    """How a command tells of a file it left out because it is not what it claims to be."""
    def tell(note: str) -> None:
        console.print(f"[yellow]quarantined[/] {shown(note)}", highlight=False)
    return tell
