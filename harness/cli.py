"""Command line: ``python -m harness COMMAND ...`` (list, run, build, status, repro, report, bisect,
diverge, certify, reduce, watch, upgrade, verdict, atlas, portability).

Errors a user can fix (a bad matrix, no engine) print one clear message and
exit 2; Ctrl-C keeps every finished result and exits 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from rich.console import Console

from harness import exits
from harness.commands import (
    atlas,
    audit,
    bisect,
    build,
    certify,
    diverge,
    listing,
    portability,
    reduce,
    report,
    repro,
    run,
    status,
    upgrade,
    verdict,
    watch,
)
from harness.errors import UserError
from harness.files import outputroots
from harness.terminal import shown

# Each verb's module (`add`, `command`), in the order --help lists them
VERBS = {"list": listing, "run": run, "status": status, "build": build, "repro": repro, "bisect": bisect,
         "diverge": diverge, "certify": certify, "reduce": reduce, "watch": watch, "report": report,
         "upgrade": upgrade, "verdict": verdict, "atlas": atlas, "portability": portability,
         "audit": audit}


def build_parser() -> argparse.ArgumentParser:
    """The command line: each verb adds its own parser and arguments (`VERBS`), so a verb reads (and
    changes) in one place."""
    parser = argparse.ArgumentParser(prog="python -m harness",
                                     description="Run TF/Keras multi-device version matrices and report them.")
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS.values():
        verb.add(sub)
    return parser


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
            return VERBS[args.command].command(args, console)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {shown(str(exc), lines=True)}", highlight=False, markup=True)
        return exits.USER_ERROR
    except BrokenPipeError:  # `python -m harness list M | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exits.OK
    except KeyboardInterrupt:
        err.print("\ninterrupted: every finished cell's result is kept; run the same command again to resume")
        return exits.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
