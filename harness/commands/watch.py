"""``harness watch``: run what is new in a matrix, find changes, publish them."""

from __future__ import annotations

import traceback
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import engine_for
from harness.errors import UserError
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.options.engine import add_engine_args
from harness.options.shared import add_matrix, add_results, positive


def add(sub) -> None:
    p = sub.add_parser("watch", help="run what is new in a matrix since its last watch, find changes, publish them",
                       description="Expand MATRIX's version ranges against the index now (or --as-of a date), "
                                   "run only the cells without a result (new releases, new code), append them to "
                                   "the matrix's history (RESULTS/<matrix>/.watch/), find changes along the "
                                   "releases with statistics, bisect a new break or mend, and publish a history page, "
                                   "JSON and Atom feeds and badges under --site. Exit 0: nothing new changed; "
                                   "1: new changes; 2: bad input or a harness error; 3: another watch of this "
                                   "matrix is running (nothing done).")
    add_matrix(p, required=True)
    add_results(p)
    p.add_argument("--as-of", metavar="DATE",
                   help="replay the index as it stood then (a date or a UTC time): only releases uploaded "
                        "before it, nothing resolved later than it")
    p.add_argument("--no-bisect", action="store_true", help="do not bisect a new break or mend")
    p.add_argument("--bisect-jobs", type=positive, default=1, metavar="N",
                   help="releases a bisect tests per round (k-ary search; default 1)")
    p.add_argument("--site", default="site", metavar="DIR",
                   help="where the history page, feeds and badges go (default: site; the report's site)")
    p.add_argument("--home-url", metavar="URL", help="where the site will be served: the feeds' absolute links")
    p.add_argument("--bundles", default="bundles", metavar="DIR", help="where a bisect leaves its bundle")
    p.add_argument("--wait", action="store_true",
                   help="when another watch of this matrix runs, wait for it (default: exit 3 at once)")
    p.add_argument("--fresh", action="store_true", help="every cell in a new interpreter (as run --fresh)")
    p.add_argument("--jobs", "-j", type=positive, metavar="N", help="run at most N cells at once")
    p.add_argument("--offline", action="store_true", help="list releases from the cache only")
    add_engine_args(p)


def command(args, console: Console) -> int:
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness.investigate.watcher import command as watch_once
    from harness.watch.publish import check_home_url

    check_home_url(args.home_url)
    check_output_folder(Path(args.site), "--site", [Path(args.results)])
    check_output_folder(Path(args.bundles), "--bundles", [Path(args.results)])  # bundles never land among results
    check_writable(Path(args.site), "--site")

    def engine():
        return engine_for(args, console)
    try:
        return watch_once(args, console, engine)
    except (UserError, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception:  # a harness bug: exit 2 (never 1, which a schedule reads as "new changes"), traceback kept
        traceback.print_exc()
        Console(stderr=True).print("[bold red]error:[/] the watch failed (above); exit 2", highlight=False)
        return exits.USER_ERROR
