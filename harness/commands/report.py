"""``harness report``: publish results (site, Markdown, CSV, JSON) or compare two runs."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import exits
from harness.commands.common import quarantined
from harness.errors import UserError
from harness.files.outputs import check_output_folder
from harness.files.paths import check_writable
from harness.options.shared import DEFAULT_RESULTS, add_out
from harness.results.store import scan
from harness.terminal import shown, visible


def add(sub) -> None:
    p = sub.add_parser("report", help="publish results: static site, Markdown, CSV and JSON "
                                      "('report compare RUN_A RUN_B' sets two runs side by side)",
                       description="Publish the results below RESULTS folders (default: results) as a static "
                                   "site with plots, Markdown, CSV and JSON. 'report compare RUN_A RUN_B' "
                                   "prints regressions and fixes from A to B and exits 1 if there are regressions.")
    p.add_argument("results", nargs="*", default=[DEFAULT_RESULTS], metavar="RESULTS")
    add_out(p, "site", "where the site goes")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report here, plots beside it")
    p.add_argument("--title", default="Compatibility report")
    p.add_argument("--diverge", default="diverge", metavar="DIR",
                   help="also publish a page for every `diverge` record below DIR (default: diverge, if present)")


def command(args, console: Console) -> int:
    # the verb's work is imported when the verb runs, so the CLI starts without it
    from harness import report

    if args.results and args.results[0] == "compare":
        if len(args.results) != 3:
            raise UserError("usage: report compare RUN_A RUN_B (two results folders)")
        for folder in args.results[1:]:
            if not any(scan(Path(folder))):
                raise UserError(f"no result.json below {folder}")
        text, regressions = report.compare(Path(args.results[1]), Path(args.results[2]), notes=quarantined(console))
        print(visible(text, lines=True))
        return exits.CHANGED if regressions else exits.OK
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
        quarantined(console)(note)
    for note in written["notes"]:
        console.print(f"[yellow]note[/]: {shown(note)}", highlight=False)
    console.print(f"{written['cells']} cells, {written['plots']} plots")
    console.print(f"site: {written['site']}  (open it in a browser; it works from disk)")
    console.print(f"markdown: {written['markdown']}" + (f", {written['markdown_copy']}"
                                                         if written.get("markdown_copy") else ""))
    console.print(f"csv/json: {Path(args.out) / 'results.csv'}, {Path(args.out) / 'results.json'}")
    return exits.OK
