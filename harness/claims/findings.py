"""What an audit found: a claim a publication makes that its record or the facts do not hold.

One finding, whichever audit names it (the atlas's own checks, `harness audit`'s rendered
check), and one way of telling the findings, so a script reads the same lines and the same exit
status from `atlas audit` and from `harness audit`: one line per finding with its check, its file
and place, then a count by check; ``--json`` a list; exit 0 when there is none, 1 when there is.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass

from rich.console import Console

from harness import exits
from harness.terminal import shown


@dataclass(frozen=True)
class Finding:
    check: str   # which check names it: counts, devices, ..., owed (the atlas's), rendered
    where: str   # the file, and the line, record, change or sentence in it
    what: str    # what contradicts what, in one sentence


def tell(found: list[Finding], console: Console, *, as_json: bool, noun: str, clean: str) -> int:
    """The findings, printed (or as JSON), and the exit status they make. `noun`: what the count
    counts ("finding(s) in ..."); `clean`: what the count says when there is none."""
    if as_json:
        print(json.dumps([asdict(f) for f in found], indent=1))
        return exits.CHANGED if found else exits.OK
    for f in found:
        console.print(f"[red]{f.check}[/] {shown(f.where)}: {shown(f.what)}", highlight=False)
    by = Counter(f.check for f in found)
    console.print(f"{len(found)} {noun}" + (f" ({', '.join(f'{n} {k}' for k, n in by.items())})" if found
                                            else f": {clean}"), highlight=False)
    return exits.CHANGED if found else exits.OK
