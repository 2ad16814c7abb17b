"""Per package, the frontier: the newest release up to the target that keeps the baseline's
status and values, found by bisect's own search (`bisect_search.search`, bisect's cells and its oracle).

One difference from `bisect`, and why: a release that cannot be installed beside the user's
other pins is *bad* here, not skipped -- for someone upgrading it blocks exactly as a crash
does (numpy 2 beside a TensorFlow built for numpy 1), and its pip reason is the evidence.
Then, for a change that the target shows too, where it ends: the first newer release that
mends it, if the index has one past the target (the same search, its ends asked to differ
that way)."""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from rich.console import Console

from harness import status
from harness.cells import Cell, Environment
from harness.index import releases
from harness.investigate import bisect, bisect_judge, bisect_search
from harness.investigate.bisect import ReleaseCells
from harness.investigate.bisect_judge import Criteria
from harness.investigate.bisect_search import BAD, BROKE, GOOD, MENDED, SKIP, Verdict
from harness.terminal import shown

BREAK, VALUE, ACCURACY, SPEED, UNAVAILABLE = "break", "value", "accuracy", "speed", "unavailable"
# Runs of each side before a change of value (accuracy, speed) is claimed: one run has no spread, and a
# script's value from one run may be its unseeded draws. A search runs `--repeats` (1 by default) to
# tell statuses apart; a release that differs from its reference in value alone is run again, both
# sides, this many times, and the change claimed only when its runs lie outside the reference's.
SPREAD_RUNS = 3
# A cell's stderr line that warns of a change to come; the last lines of a log are read, at most
WARNING_RE = re.compile(r"Warning\b|deprecat|will be removed|no longer be supported", re.I)
WARNING_LINES = 2000
# A signature's head, "import: ImportError at train.py:17 in <module>: ...": the error's family
SIGNATURE_HEAD = re.compile(r"^\w+: (\S+ at \S+ in \S+): ")


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
        self.repeats = repeats
        self.results, self.console, self.criteria, self.resolver = results, console, criteria, resolver
        self.cells_for = ReleaseCells(base_cells, package, resolver, repeats, True, releases.CUTOFF_MARGIN_DAYS)
        self.unavailable: set[str] = set()
        self.rounds: list = []
        self.spread_cells = ReleaseCells(base_cells, package, resolver, max(repeats or 1, SPREAD_RUNS), True,
                                         releases.CUTOFF_MARGIN_DAYS)
        self.outside_rounds = {"cells": 0, "ran": 0}  # cells run outside the search rounds (spread, moved_with)
        self.opened: dict[tuple, ReleaseCells] = {}   # pins left open with a release (`moved_with`)
        self.moved: dict[str, dict] = {}             # release -> the pins that moved with it

    def releases(self, spec: str) -> list[str]:
        python = self.base_cells[0].environment.python
        found = self.resolver.expand(self.package, spec, python, releases.Options())
        return sorted({*found.versions}, key=Version)

    def find(self, versions: list[str], expect: str | None = None) -> bisect_search.Found:
        rounds = bisect.Rounds(self.m, self.cells_for, versions, self.engine, self.results, self.console,
                                self.criteria, None, None)
        self.rounds.append(rounds)

        ends: dict[str, Verdict] = {}

        def oracle(asked: list[str]) -> dict[str, Verdict]:
            out = {}
            for v, verdict in rounds.oracle(asked).items():
                if verdict.kind == SKIP and v != versions[0] and self.held_back(verdict.why):
                    verdict = self.moved_with(v, self.held_back(verdict.why), rounds.good_evidence)
                if verdict.kind == SKIP and v != versions[0]:  # blocks an upgrade as a crash does
                    self.unavailable.add(v)
                    verdict = Verdict(BAD, f"cannot be installed beside the other pins: {verdict.why}",
                                      evidence=verdict.evidence)
                if v in (versions[0], versions[-1]):
                    ends[v] = verdict
                reference = next((e for e in (versions[0], versions[-1]) if e != v and e in ends
                                  and ends[e].kind == GOOD), None)
                if reference is not None and in_value_alone(verdict) and len(verdict.evidence["cells"]) < SPREAD_RUNS:
                    verdict = self.with_spread(v, reference)
                    if v in ends:
                        ends[v] = verdict
                out[v] = verdict
            return out
        return bisect_search.search(versions, oracle, on_step=rounds.show_step, expect=expect)

    def held_back(self, why: str) -> list[str]:
        """The project's own pins that an installer names as what a release cannot be installed
        beside (numpy==1.23.5 for a TensorFlow that needs numpy>=1.26): they move with it."""
        return pins_named(why, [Requirement(p).name for p in self.base_cells[0].environment.packages], self.package)

    def moved_with(self, version: str, held: list[str], good: dict | None) -> Verdict:
        """`version` with the pins it cannot be installed beside left to resolve with it (as of its
        release, as its users met it): the joint move, judged as the release alone would be."""
        key = tuple(held)
        if key not in self.opened:
            # left open, not dropped: the project needs them installed (numpy 2 moves with the TensorFlow
            # beside it), at whichever release resolves with this one as of its upload
            cells = [dataclasses.replace(c, environment=dataclasses.replace(
                left_open(c.environment, held),
                name=f"{c.environment.name}-with-{'-'.join(canonicalize_name(n) for n in held)}"))
                for c in self.base_cells]
            self.opened[key] = ReleaseCells(cells, self.package, self.resolver, self.repeats, True,
                                            releases.CUTOFF_MARGIN_DAYS)
        self.console.print(f"  {shown(self.package)} {shown(version)} cannot be installed beside "
                           f"{shown(', '.join(held))} as pinned: trying it with them moved too", highlight=False)
        cells = self.opened[key](version)
        got = run_cells(self.m, cells, self.engine, self.results, self.console, self.outside_rounds)
        verdict = bisect_judge.judge([got[c.id] for c in cells if c.id in got], good, self.criteria)
        self.moved[version] = {"with": held, "cells": verdict.evidence.get("cells", []),
                               "resolved": _resolved(got, held)}
        moved = ", ".join(f"{n} {self.moved[version]['resolved'].get(n) or '(resolved)'}" for n in held)
        return dataclasses.replace(verdict, why=f"with {moved} moved too: {verdict.why}")

    def with_spread(self, version: str, reference: str) -> Verdict:
        """`version` judged against `reference` from SPREAD_RUNS runs of each (`values_compared`)."""
        self.console.print(f"  {shown(self.package)} {shown(version)} differs from {shown(reference)} in value "
                           f"alone: {SPREAD_RUNS} runs of each before that is claimed", highlight=False)
        ref, new = self.spread_cells(reference), self.spread_cells(version)
        got = run_cells(self.m, ref + new, self.engine, self.results, self.console, self.outside_rounds)
        return values_compared([got[c.id] for c in new if c.id in got], [got[c.id] for c in ref if c.id in got],
                               self.criteria)

    def messages(self, version: str) -> list[str]:
        """What `version`'s failed cells said: each error's message, else its failure line."""
        out = []
        for rounds in self.rounds:
            for r in rounds.results_of.get(version, []):
                if r.status != status.OK:
                    out.append((r.error or {}).get("message") or r.failure_text)
        return out

    def warnings(self, version: str) -> list[dict]:
        """What `version`'s cells warned of on their stderr (a deprecation, a removal to come): each
        distinct warning line with the cell that printed it, for `announced` to match against the
        name the next release's error gives."""
        seen, out = set(), []
        for rounds in self.rounds:
            for r in rounds.results_of.get(version, []):
                log = self.results / self.m.name / r.cell / "stderr.log"
                try:
                    lines = log.read_text(errors="replace").splitlines()[-WARNING_LINES:]
                except OSError:
                    continue
                for line in lines:
                    text = line.strip()
                    if WARNING_RE.search(text) and text not in seen:
                        seen.add(text)
                        out.append({"line": text[:600], "cell": r.cell})
        return out

    def first_error(self, version: str) -> dict | None:
        """The first failed cell of `version`, as a maintainer reads it: the error's family (its type,
        file and line, from the signature), its own message unmasked, and the cell."""
        for rounds in self.rounds:
            for r in rounds.results_of.get(version, []):
                if r.status != status.OK and r.error:
                    family = SIGNATURE_HEAD.match(r.error.get("signature") or "")
                    return {"status": r.status, "kind": r.error.get("kind"),
                            "family": family.group(1) if family else None,
                            "message": (r.error.get("message") or "")[:1000], "cell": r.cell}
        return None

    def cost(self) -> tuple[int, int]:
        return (sum(r.runs["cells"] for r in self.rounds) + self.outside_rounds["cells"],
                sum(r.runs["ran"] for r in self.rounds) + self.outside_rounds["ran"])


def pins_named(why: str, pinned: list[str], package: str) -> list[str]:
    """Of the names `pinned`, those an installer's reason names as pinned (``NAME==``), other than
    `package` itself: what a release cannot be installed beside."""
    by_key = {canonicalize_name(n): n for n in pinned}
    named = {canonicalize_name(n) for n in re.findall(r"([A-Za-z0-9][A-Za-z0-9._-]*)==", why)}
    return sorted(by_key[n] for n in named & set(by_key) if n != canonicalize_name(package))


def _resolved(got: dict, names: list[str]) -> dict[str, str]:
    """The versions these packages resolved to in the cells that ran (what the cells saw)."""
    out = {}
    for r in got.values():
        venv = (r.get("provenance") or {}).get("venv")  # a container's lock stays in its image: not named
        lock = Path(venv) / "requirements.lock" if venv else None
        for line in (lock.read_text().splitlines() if lock and lock.is_file() else []):
            name, _, version = line.partition("==")
            if version and canonicalize_name(name) in {canonicalize_name(n) for n in names}:
                out[next(n for n in names if canonicalize_name(n) == canonicalize_name(name))] = version
    return out


def in_value_alone(verdict: Verdict) -> bool:
    """A bad verdict whose cells ran as the reference's did and missed no expected value: only a
    number (accuracy, speed) moved."""
    ev = verdict.evidence
    return verdict.kind == BAD and ev.get("status") == status.OK and not ev.get("unmet") and \
        not ev.get("statuses", {}).keys() - {status.OK}


def values_compared(results: list, reference: list, criteria: Criteria) -> Verdict:
    """A release's runs against a reference's, a change of value claimed only with its spread: past
    the criteria's floor or the reference's own spread, whichever is wider, and with every run
    outside the reference's range. Runs that overlap are the same within noise, and say so."""
    good = bisect_judge.evidence(reference)
    acc = good.get("val_accuracy")
    widened = Criteria(max(criteria.accuracy_drop or 0.0, (acc.hi - acc.lo) if acc else 0.0)
                       if criteria.accuracy_drop is not None else None, criteria.speed_drop)
    verdict = bisect_judge.judge(results, good, widened)
    now = verdict.evidence.get("val_accuracy")
    if not (now and acc) or verdict.kind != GOOD and not in_value_alone(verdict):
        return verdict
    if verdict.kind == GOOD or (verdict.why.startswith("val_accuracy") and now.hi >= acc.lo):
        # inside its floor, or its runs overlap the reference's: no change of accuracy can be claimed
        return Verdict(GOOD, f"val_accuracy {now.fmt(3)} against the reference's {acc.fmt(3)}: the same within "
                             f"the spread of {now.n} and {acc.n} runs", evidence=verdict.evidence)
    return verdict


def run_cells(m, cells: list[Cell], engine, results: Path, console: Console, runs: dict | None = None) -> dict:
    """Cells outside a search's rounds, run through the ordinary runner: their results by id."""
    # deferred: the runner loads the report with it, and `harness upgrade`'s verb module imports
    # this one as the CLI starts
    from harness.run.runner import Runner

    runner = Runner(dataclasses.replace(m, cells=[]), engine, results, console)
    if runs is not None:
        runs["cells"] += len(cells)
        runs["ran"] += sum(1 for c in cells if runner.store.needs_run(c))
    return {r.cell: r for r in runner.complete(cells)}


def left_open(environment: Environment, names) -> Environment:
    """`environment` with the pins of `names` left open (the bare name, not dropped: the project
    needs them installed), to resolve beside the release that moves them, as of its day."""
    drop = {canonicalize_name(n) for n in names}
    return dataclasses.replace(environment, packages=tuple(
        Requirement(p).name if canonicalize_name(Requirement(p).name) in drop else p for p in environment.packages))


def frontier(search: Search, current: str, target: str, newest: str) -> tuple[Answer, bisect_search.Found | None]:
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
            answer.tested[v] = {"verdict": t.kind, "why": t.why, "cells": t.evidence.get("cells", []),
                                **({"moved_with": search.moved[v]} if v in search.moved else {})}
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
                              "warnings": found.warnings,
                              **({"moved_with": search.moved[after]} if after in search.moved else {})}
        else:
            answer.problem = found.problem or "no change found between the ends"
    answer.cells, answer.ran = search.cost()
    answer.seconds = round(time.monotonic() - started, 1)
    return answer, found


def mend_by_release(search: Search, answer: Answer) -> dict | None:
    """The first release past the target that does what the baseline does again, when the index
    has a newer one and that one holds (its ends: the target, bad, and the newest, good)."""
    if not answer.blocker:
        return None
    versions = search.releases(f">={answer.target},<={answer.newest}")
    if Version(answer.newest) <= Version(answer.target) or len(versions) < 2:
        # the target is the newest release, and it still shows the change: none up to it mends it
        return {"found": False, "newest": answer.target, "why": f"the target {answer.target} still shows it",
                "cells": answer.tested.get(answer.target, {}).get("cells", [])}
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
    got = run_cells(m, cells, engine, results, console)
    return bisect_judge.judge([got[c.id] for c in cells if c.id in got], yardstick, criteria)


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

