"""Per package, the frontier: the newest release up to the target that keeps the baseline's
status and values, found by bisect's own search (`bisect.search`, its cells and its oracle).

One difference from `bisect`, and why: a release that cannot be installed beside the user's
other pins is *bad* here, not skipped -- for someone upgrading it blocks exactly as a crash
does (numpy 2 beside a TensorFlow built for numpy 1), and its pip reason is the evidence.
Then, for a change that the target shows too, where it ends: the first newer release that
mends it, if the index has one past the target (the same search, its ends asked to differ
that way)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version
from rich.console import Console

from .. import bisect, releases, status
from ..bisect import BAD, BROKE, GOOD, MENDED, SKIP, Criteria, ReleaseCells, Verdict
from ..cells import Cell
from ..terminal import shown

BREAK, VALUE, ACCURACY, SPEED, UNAVAILABLE = "break", "value", "accuracy", "speed", "unavailable"


@dataclass
class Answer:
    package: str
    current: str
    target: str
    newest: str
    frontier: str | None = None       # the newest release tested and found to hold (None: not even the current)
    holds: bool = False               # the target itself holds
    blocker: dict | None = None       # the first release that does not, and its evidence
    problem: str = ""                 # why there is no answer
    tested: dict = field(default_factory=dict)   # release -> {verdict, why, cells}
    cells: int = 0
    ran: int = 0
    seconds: float = 0.0


def kind_of(verdict: Verdict, unavailable: bool) -> str:
    """What sort of change a bad release shows, for the report and for which evidence fits it."""
    ev = verdict.evidence
    if unavailable:
        return UNAVAILABLE
    if ev.get("status") != status.OK:
        return BREAK
    if ev.get("unmet"):
        return VALUE
    return ACCURACY if verdict.why.startswith("val_accuracy") else SPEED


class Search:
    """One package's search: its cells (bisect's `ReleaseCells`) and rounds (bisect's oracle),
    which run through the ordinary runner, so every release is a cell any later command reuses."""

    def __init__(self, m, base_cells: list[Cell], package: str, engine, results: Path, console: Console,
                 criteria: Criteria, resolver: releases.Resolver, repeats: int | None):
        self.m, self.base_cells, self.package, self.engine = m, base_cells, package, engine
        self.results, self.console, self.criteria, self.resolver = results, console, criteria, resolver
        self.cells_for = ReleaseCells(base_cells, package, resolver, repeats, True, releases.CUTOFF_MARGIN_DAYS)
        self.unavailable: set[str] = set()
        self.rounds: list = []

    def releases(self, spec: str) -> list[str]:
        python = self.base_cells[0].environment.python
        found = self.resolver.expand(self.package, spec, python, releases.Options())
        return sorted({*found.versions}, key=Version)

    def find(self, versions: list[str], expect: str | None = None) -> bisect.Found:
        rounds = bisect._Rounds(self.m, self.cells_for, versions, self.engine, self.results, self.console,
                                self.criteria, None, None)
        self.rounds.append(rounds)

        def oracle(asked: list[str]) -> dict[str, Verdict]:
            out = {}
            for v, verdict in rounds.oracle(asked).items():
                if verdict.kind == SKIP and v != versions[0]:  # blocks an upgrade as a crash does
                    self.unavailable.add(v)
                    verdict = Verdict(BAD, f"cannot be installed beside the other pins: {verdict.why}",
                                      evidence=verdict.evidence)
                out[v] = verdict
            return out
        return bisect.search(versions, oracle, on_step=rounds.show_step, expect=expect)

    def cost(self) -> tuple[int, int]:
        return sum(r.runs["cells"] for r in self.rounds), sum(r.runs["ran"] for r in self.rounds)


def frontier(search: Search, current: str, target: str, newest: str) -> tuple[Answer, bisect.Found | None]:
    """The package's answer: the target holds, or the last release before the first that does not."""
    started = time.monotonic()
    answer = Answer(search.package, current, target, newest)
    versions = search.releases(f">={current},<={target}")
    if current not in versions:
        versions = sorted({current, *versions}, key=Version)
    found = None
    if len(versions) < 2:
        answer.frontier, answer.holds = current, True
    else:
        found = search.find(versions)
        for v, t in found.tested.items():
            answer.tested[v] = {"verdict": t.kind, "why": t.why, "cells": t.evidence.get("cells", [])}
        old, new = found.tested[versions[0]], found.tested[versions[-1]]
        if old.kind != GOOD:
            answer.problem = f"the baseline {search.package} {current} does not run here: {old.why}"
        elif new.kind == GOOD:
            answer.frontier, answer.holds = target, True
        elif found.direction == BROKE:
            after = found.after or found.candidates[-1]
            verdict = found.tested[after]
            answer.frontier = found.before
            answer.blocker = {"first_bad": after, "last_good": found.before, "candidates": found.candidates,
                              "kind": kind_of(verdict, after in search.unavailable), "why": verdict.why,
                              "cells": verdict.evidence.get("cells", []),
                              "good_cells": found.tested[found.before].evidence.get("cells", []),
                              "warnings": found.warnings}
        else:
            answer.problem = found.problem or "no change found between the ends"
    answer.cells, answer.ran = search.cost()
    answer.seconds = round(time.monotonic() - started, 1)
    return answer, found


def mend_by_release(search: Search, answer: Answer) -> dict | None:
    """The first release past the target that does what the baseline does again, when the index
    has a newer one and that one holds (its ends: the target, bad, and the newest, good)."""
    if not answer.blocker or Version(answer.newest) <= Version(answer.target):
        return None
    versions = search.releases(f">={answer.target},<={answer.newest}")
    if len(versions) < 2:
        return None
    found = search.find(versions, expect=MENDED)
    if found.problem or found.direction != MENDED:
        newest = found.tested.get(versions[-1])
        return {"found": False, "why": found.problem, "newest": versions[-1],
                "cells": newest.evidence.get("cells", []) if newest else []}
    first = found.after or found.candidates[-1]
    return {"found": True, "newest": versions[-1], "first_good": first, "last_bad": found.before,
            "why": found.tested[first].why,
            "cells": found.tested[first].evidence.get("cells", [])}


def judged(m, cells: list[Cell], engine, results: Path, console: Console, yardstick: dict | None,
           criteria: Criteria) -> Verdict:
    """Cells outside a search (a setting, the combined stack) run and judged as a release is."""
    from ..runner import Runner

    runner = Runner(dataclasses.replace(m, cells=[]), engine, results, console)
    got = {r.cell: r for r in runner.run(cells)}
    return bisect.judge([got[c.id] for c in cells if c.id in got], yardstick, criteria)


def show(answer: Answer, console: Console) -> None:
    cost = f"{answer.cells} cell(s), {answer.ran} run now, {answer.seconds:.0f} s"
    if answer.problem:
        console.print(f"[red]{shown(answer.package)}: no answer[/]: {shown(answer.problem)} ({cost})", highlight=False)
    elif answer.holds:
        console.print(f"[green]{shown(answer.package)} {answer.current} -> {answer.target}: holds[/] ({cost})",
                      highlight=False)
    else:
        b = answer.blocker
        console.print(f"[yellow]{shown(answer.package)} {answer.current} -> {answer.target}: newest safe "
                      f"{answer.frontier}, blocked at {b['first_bad']} ({b['kind']}: {shown(b['why'][:200])})[/] "
                      f"({cost})", highlight=False)

