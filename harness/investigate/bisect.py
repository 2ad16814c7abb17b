"""`harness bisect`: the first release of a package where a cell changes, whichever way.

git bisect searches commits, asv's `find` a benchmark over commits; this
searches a package's *releases* from the index (harness.index.releases), running
each tested release's cells through the ordinary Runner and results store,
so a bisect resumes where it stopped and shares finished cells with `run`.

A change goes either way. Someone upgrading asks where their cells broke;
someone stuck on a broken stack asks which release mends it (git bisect's
old/new terms, cargo-bisect-rustc's `--regress=success`). The ends answer
which question it is: each is judged by what it does (`judge_ends`), and
the search looks for the first release that does what the newer end does --
the first bad one when the older end works and the newer fails (it *broke*),
the first good one when the older end fails and the newer works (it was
*mended*). A value or speed shift between two working ends goes the same
way: the worse end is the bad one. Which end a user called good is a claim;
what the ends do decides, and the answer says when the two disagree.

Its parts: the search over versions and an oracle (``bisect_search``, pure), a release's
verdict (``bisect_judge``), the ends as the command line names them (``bisect_ends``). This
module drives them: the cells that test each release, the rounds that run them (through the
ordinary Runner, or as Slurm array tasks), the search below the releases through a nightly
distribution's builds, and the answer's bundle and record.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

from packaging.utils import canonicalize_name
from rich.console import Console

from harness import status
from harness.cells import Cell
from harness.errors import UserError
from harness.files.paths import inside
from harness.index import nightly as nightly_mod
from harness.index import releases
from harness.investigate.bisect_judge import DEFAULT_CRITERIA, Criteria, evidence_line, judge, judge_ends
from harness.investigate.bisect_search import BAD, BROKE, GOOD, MENDED, SKIP, Found, Step, Verdict, search, where, words
from harness.matrix.release_cells import derivation, derived_cell, with_nightly, with_release
from harness.names import file_name
from harness.results.result import Result
from harness.results.store import ResultStore
from harness.stats import Spread
from harness.terminal import shown


def run(*, m, base_cells: list[Cell], package: str, versions: list[str], engine, results_root: Path,
        console: Console, jobs: int = 1, repeats: int | None = None, criteria: Criteria = DEFAULT_CRITERIA,
        cutoff: bool = True, margin_days: float = releases.CUTOFF_MARGIN_DAYS, bundles: Path = Path("bundles"),
        resolver: releases.Resolver | None = None, slurm=None, engine_args: dict | None = None,
        nightly: str | None = None, as_of: str | None = None, said: str | None = None,
        verdicts=None) -> tuple[Found, Path | None]:
    """Search `versions` of `package` for the first release where `base_cells` change, whichever
    way the ends say; each round's cells run on this host, or with `slurm` (SlurmOptions) as array
    tasks (`_on_slurm`). With `nightly` (a nightly distribution's name), go on below the releases
    (`below`). `said`: the direction the command line's --good/--bad claimed, to say so when the
    ends show the other. `verdicts(version, results) -> Verdict`: another question's own judge of a
    release (portability's: how a reader judges one file), instead of `bisect_judge`'s."""
    resolver = resolver or releases.Resolver()
    cells = ReleaseCells(base_cells, package, resolver, repeats, cutoff, margin_days)
    rounds = Rounds(m, cells, versions, engine, results_root, console, criteria, slurm, engine_args, verdicts)
    started = time.monotonic()
    found = search(versions, rounds.oracle, jobs=jobs, on_step=rounds.show_step)
    if said and found.direction and found.direction != said:
        named = {BROKE: (versions[0], versions[-1]), MENDED: (versions[-1], versions[0])}[said]
        found.warnings.append(f"--good {named[0]} and --bad {named[1]} are the other way round here: "
                              f"{versions[0]} is {found.tested[versions[0]].kind} and {versions[-1]} "
                              f"{found.tested[versions[-1]].kind}, so the search looked for {where(found.direction)}")
    console.rule("bisect")
    bundle = None
    if found.problem:
        console.print(f"[red]no answer[/]: {shown(found.problem)}", highlight=False)
    else:
        _show_answer(found, package, console)
        console.print(f"{len(found.tested)} of {len(versions)} releases tested, {rounds.runs['cells']} cell(s) "
                      f"({rounds.runs['ran']} run now, {rounds.runs['cells'] - rounds.runs['ran']} reused from "
                      f"earlier runs); a linear sweep tests all {len(versions)} releases; "
                      f"{time.monotonic() - started:.0f} s")
        bundle = _bundle_after(found, rounds, engine, results_root / m.name, bundles, console)
        if nightly and found.after:
            try:
                found.nightly = below(found, ReleaseCells(base_cells, package, resolver, repeats, cutoff, margin_days,
                                                          nightly=nightly),
                                      lambda cells_for, nights: Rounds(m, cells_for, nights, engine, results_root,
                                                                        console, criteria, None, None),
                                      console, jobs, as_of)
            except UserError as exc:  # no night to search: the release answer stands, and says so
                found.nightly = {"nightly": nightly, "problem": str(exc)}
                console.print(f"[red]no night searched[/]: {shown(str(exc))}", highlight=False)
    _record(found, package, results_root / m.name, rounds.runs, bundle)
    return found, bundle


def below(found: Found, cells_for: ReleaseCells, rounds_of, console: Console, jobs: int, as_of: str | None) -> dict:
    """The first night that changed the cells the way the releases did (harness/index/nightly.py), between
    the release before the change and the one after it: the same search, over the nightly
    distribution's builds, as of the same cut-off, its ends asked to differ that way."""
    package, name = cells_for.package, cells_for.nightly
    python = cells_for.template.python
    win = nightly_mod.window(package, name, found.before, found.after, python,
                             offline=cells_for.resolver.offline, as_of=as_of)
    console.rule(f"below the releases: {name}")
    console.print(f"{len(win.nights)} builds of {name} for Python {python}, {win.day(win.nights[0])} to "
                  f"{win.day(win.nights[-1])}: between {package} {win.old} ({win.since[:10]}) and {win.new} "
                  f"({win.until[:10]}), and the nearest build on each side", highlight=False)
    rounds = rounds_of(cells_for, win.nights)
    got = search(win.nights, rounds.oracle, jobs=jobs, on_step=rounds.show_step, expect=found.direction)
    out = {"nightly": name, "window": win.nights, "uploaded": win.uploaded, **got.answer(),
           "candidates": got.candidates, "problem": got.problem, "history": None}
    if got.problem:
        out["problem"] += (" -- the change is not between two nights of the main branch: it may have reached the "
                           "release through its release branch (a cherry-pick, or a change of the branch alone)")
        console.print(f"[red]no night found[/]: {shown(out['problem'])}", highlight=False)
        return out
    before_word, after_word = words(got.direction)
    after = got.after or got.candidates[-1]
    out["history"] = nightly_mod.history_url(package, win.day(got.before), win.day(after))
    console.print(f"[bold]{after_word} night: {shown(name)} {shown(after)}[/] (uploaded {win.day(after)})   "
                  f"{before_word} night: {shown(got.before)} ({win.day(got.before)})", highlight=False)
    if out["history"]:
        console.print(f"the upstream history of those days: {shown(out['history'])}", highlight=False)
    return out


class ReleaseCells:
    """The cells that test one release of `package`: each base cell with the release pinned
    (and, with a cut-off, the other packages as of its upload), built once per release; `derived`
    says how a Slurm task rebuilds each of them from the matrix."""

    def __init__(self, base_cells: list[Cell], package: str, resolver: releases.Resolver,
                 repeats: int | None, cutoff: bool, margin_days: float, nightly: str | None = None):
        self.base_cells, self.package, self.resolver, self.nightly = base_cells, package, resolver, nightly
        self.repeats, self.cutoff, self.margin_days = repeats, cutoff, margin_days
        self.template = base_cells[0].environment
        self.of: dict[str, list[Cell]] = {}
        self.derived: dict[str, dict] = {}  # cell id -> how a Slurm task rebuilds it

    def __call__(self, version: str) -> list[Cell]:
        if version not in self.of:
            env = (with_nightly(self.template, self.package, self.nightly, version, None) if self.nightly
                   else with_release(self.template, self.package, version, None))
            cut = (releases.cutoff_of([self.resolver.uploaded(p, v) for p, v in releases.exact_pins(env)],
                                      self.margin_days) if self.cutoff else None)
            out = {}
            for c in self.base_cells:
                for r in (range(self.repeats) if self.repeats else [c.repeat]):
                    cell = derived_cell(c, self.package, version, cut, r, nightly=self.nightly)
                    out.setdefault(cell.id, cell)
                    self.derived.setdefault(cell.id, derivation(cell, c, self.package, version))
            self.of[version] = list(out.values())
        return self.of[version]


class Rounds:
    """The search's oracle: one round runs the asked releases' cells (here through the Runner,
    or on Slurm), keeps their results, and judges each release -- the two ends by what each
    does (`judge_ends`), then the others against the end that works."""

    def __init__(self, m, cells_for: ReleaseCells, versions: list[str], engine, results_root: Path,
                 console: Console, criteria: Criteria, slurm, engine_args: dict | None, verdicts=None):
        self.matrix = dataclasses.replace(m, cells=[])
        self.verdicts = verdicts   # a question's own judge of a release, else the status and criteria
        self.cells_for, self.versions, self.engine, self.results_root = cells_for, versions, engine, results_root
        self.console, self.criteria, self.slurm, self.engine_args = console, criteria, slurm, engine_args
        self.package = cells_for.nightly or cells_for.package  # what the steps name: a night is its build
        self.unit = "night" if cells_for.nightly else "release"
        self.results_of: dict[str, list[Result]] = {}
        self.good_evidence: dict | None = None  # the working end's: the yardstick
        self.runs = {"cells": 0, "ran": 0}

    def oracle(self, asked: list[str]) -> dict[str, Verdict]:
        cells = [c for v in asked for c in self.cells_for(v)]
        self.console.rule(f"testing {shown(self.package)} {shown(', '.join(asked))}")
        got = self._run(cells)
        self.runs["cells"] += len(cells)
        out = {}
        for v in asked:
            self.results_of[v] = [got[c.id] for c in self.cells_for(v) if c.id in got]
        if self.verdicts is not None:
            return {v: self.verdicts(v, self.results_of[v]) for v in asked}
        ends = (self.versions[0], self.versions[-1])
        if all(v in asked for v in ends):  # the ends: each by what it does, then the working one the yardstick
            out.update(zip(ends, judge_ends(self.results_of[ends[0]], self.results_of[ends[1]], self.criteria),
                           strict=True))
            working = [out[v] for v in ends if out[v].kind == GOOD]
            self.good_evidence = working[0].evidence if len(working) == 1 else None
        for v in asked:
            if v not in out:
                out[v] = judge(self.results_of[v], self.good_evidence, self.criteria)
        return out

    def _run(self, cells: list[Cell]) -> dict[str, Result]:
        """The cells' results by id, run here or on Slurm; counts the cells that ran now."""
        # deferred: the runner loads the report with it, and `harness upgrade`'s verb module imports
        # this one as the CLI starts
        from harness.run.runner import Runner

        # timings are compared only within one run: a speed criterion measures every release afresh
        rerun = frozenset({"all"}) if self.criteria.speed_drop is not None else frozenset()
        if self.slurm is None:
            runner = Runner(self.matrix, self.engine, self.results_root, self.console, rerun=rerun)
            self.runs["ran"] += sum(1 for c in cells if runner.store.needs_run(c, rerun))
            return {r.cell: r for r in runner.complete(cells)}
        got, submitted = _on_slurm(self.matrix, cells, {c.id: self.cells_for.derived[c.id] for c in cells},
                                   self.engine, self.results_root, self.console, self.slurm, rerun, self.engine_args)
        self.runs["ran"] += submitted
        return got

    def show_step(self, step: Step) -> None:
        for v, verdict in step.tested:
            colour = {GOOD: "green", BAD: "red", SKIP: "yellow"}[verdict.kind]
            flaky = " (flaky)" if verdict.flaky else ""
            self.console.print(f"  {shown(self.package)} {shown(v)}: [{colour}]{verdict.kind}[/]{flaky}  "
                               f"{shown(verdict.why)}", highlight=False)
        if step.round == 0 and step.direction:
            old, new = step.tested[0][1].kind, step.tested[-1][1].kind
            self.console.print(f"{shown(self.package)} {shown(step.before)} is {old} and {shown(step.after)} {new}: "
                               f"looking for the {words(step.direction)[1]} {self.unit} ({where(step.direction)})",
                               highlight=False)
        before_word, after_word = words(step.direction)
        self.console.print(f"[bold]step {step.round}[/]: {before_word} {shown(step.before)}, {after_word} "
                           f"{shown(step.after)}, {step.left} untested release(s) between", highlight=False)


def _show_answer(found: Found, package: str, console: Console) -> None:
    """The first changed release (or the candidates), both sides' evidence, and the search's warnings."""
    before_word, after_word = words(found.direction)
    if found.after:
        console.print(f"[bold]{after_word}: {shown(package)} {shown(found.after)}[/]   {before_word}: "
                      f"{shown(package)} {shown(found.before)}", highlight=False)
    else:
        console.print(f"[bold]{after_word} is one of: {shown(', '.join(found.candidates))}[/] (the others cannot "
                      f"be installed); {before_word}: {shown(package)} {shown(found.before)}", highlight=False)
    for label, v in ((before_word, found.before), (after_word, found.candidates[-1])):
        ev = found.tested[v].evidence
        console.print(f"  {label} {shown(v)}: {shown(evidence_line(ev))}", highlight=False)
        for cell_id in ev.get("cells", [])[:3]:
            console.print(f"    {shown(cell_id)}", highlight=False)
    for w in found.warnings:
        console.print(f"[yellow]warning[/]: {shown(w)}", highlight=False)


def _bundle_after(found: Found, rounds: Rounds, engine, run_dir: Path, bundles: Path,
                  console: Console) -> Path | None:
    """The first changed release's cell as a repro bundle, with every attempt's own folder (result,
    events, logs) under attempts/: a break's failing cell, the report upstream asks for; a mend's
    working cell, the environment to move to, pinned. None when it left no result."""
    # deferred: repro imports the runner (see `Rounds._run`)
    from harness.investigate.repro import write_bundle

    after = found.candidates[-1]
    results = rounds.results_of.get(after) or []
    shown_cell = next((r for r in results if r.status != status.OK), results[0] if results else None)
    if not shown_cell:
        return None
    cell = next(c for c in rounds.cells_for(after) if c.id == shown_cell.cell)
    bundle = inside(bundles, bundles / file_name(cell.id))  # as repro names its bundles
    write_bundle(bundle, cell, engine, shown_cell.provenance, results)
    attempts = bundle / "attempts"
    shutil.rmtree(attempts, ignore_errors=True)
    for n, r in enumerate(results, 1):  # the evidence itself: result, events and logs
        folder = run_dir / r.cell
        if folder.is_dir():
            shutil.copytree(folder, attempts / str(n))
    console.print(f"bundle of the {words(found.direction)[1]} cell: {shown(bundle)}", highlight=False)
    return bundle


ROUND_WAIT_SECONDS = 7 * 24 * 3600.0  # a round waits for its tasks as long as the queue keeps them


def _on_slurm(m, cells: list[Cell], derived: dict[str, dict], engine, results_root: Path, console: Console,
              opts, rerun: frozenset[str], engine_args: dict | None) -> tuple[dict[str, Result], int]:
    """One round as array tasks: submit the cells that need a run (each task rebuilds its cell
    from the matrix and `derived`, harness/run/executors/slurm/task.py), watch the queue until none
    is queued or running, and read the results. Returns them and how many cells were submitted."""
    # only a Slurm round needs these: the CLI, which imports this module for `upgrade`, starts without them
    from harness.run.executors.slurm.board import status as board_status
    from harness.run.executors.slurm.submit import submit

    round_matrix = dataclasses.replace(m, cells=cells)
    submitted = submit(round_matrix, cells, engine, results_root, opts, console, rerun=rerun,
                       engine_args=engine_args, derived=derived)
    board_status(round_matrix, results_root, console, wait=ROUND_WAIT_SECONDS)
    store = ResultStore(results_root.resolve(), m.name)
    found = {c.id: store.existing(c) for c in cells}
    return {k: r for k, r in found.items() if r is not None}, submitted


def record_path(run_dir: Path, package: str, first: str, last: str) -> Path:
    """Where a bisect of `package` between the releases `first` and `last` keeps its record, beside
    the results of the matrix it ran (`run_dir`: the results folder / the matrix's name)."""
    return run_dir / ".bisect" / f"{canonicalize_name(package)}-{first}-{last}.json"


def _record(found: Found, package: str, run_dir: Path, runs: dict, bundle: Path | None = None) -> Path:
    """What this bisect did, beside the results it ran (readable by hand and by tools)."""
    path = record_path(run_dir, package, found.versions[0], found.versions[-1])
    path.parent.mkdir(parents=True, exist_ok=True)

    def plain(ev: dict) -> dict:
        return {k: (v.as_dict() if isinstance(v, Spread) else v) for k, v in ev.items()}

    data = {"package": package, "versions": found.versions, **found.answer(),
            "candidates": found.candidates, "problem": found.problem,
            "warnings": found.warnings, "cells": runs["cells"], "cells_run": runs["ran"],
            "bundle": str(bundle) if bundle else None, "nightly": found.nightly,
            "tested": {v: {"verdict": t.kind, "why": t.why, "flaky": t.flaky, "evidence": plain(t.evidence)}
                       for v, t in found.tested.items()},
            "steps": [{"round": s.round, "tested": [v for v, _ in s.tested], "before": s.before,
                       "after": s.after, "left": s.left} for s in found.steps]}
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    return path
