"""`harness reduce`: the smallest script that still shows a break -- on both sides.

`bisect` names the release that broke a user's script; upstream's issue templates then ask
for *standalone code to reproduce it*. `reduce` takes the two cells the break lies between
(the last good and the first bad: two environments of one matrix, as `diverge` takes them)
and shrinks the user's script while **both sides hold**: the bad side still fails in the
same family (status, exception type and message; not the line, which moves as lines go) --
or, for a value, still misses the matrix's expectation -- and the good side still passes.
A one-sided reduction is not a repro of a regression.

- **The reducer** is pysource-minimize, an AST-level Python reducer: every candidate it
  asks about parses (no time spent on broken syntax), and it removes statements, branches,
  arguments and expressions, not lines. shrinkray (the other one made for this) has no
  usable release on the package index -- its PyPI project is a 0.0.2 placeholder -- so it
  cannot be pinned in this project's lock.
- **Candidates run as cells** through the ordinary Runner, both sides at once on the host's
  slots, each bounded by `--budget` seconds (a hang or an interpreter crash is a rejected
  candidate, its time the budget). They are *trial* cells (launch.is_trial): a script trial
  forks from its stack's warm launcher, run as ``__main__`` in the forked child, so a
  candidate pays no import. The answer is then checked again fresh, as every script runs.
- **Candidates are confined** (confinement.py): a candidate may run a branch the script never
  took -- the reducer replaces an `if` with its body -- so each writes only in its own cell
  folder and temporary space (Landlock or a mount namespace on the venv and local engines, the
  container on Docker), and the command says which before it starts; where the host offers
  none it refuses unless told `--unconfined`. Everything stays readable: the user's data too.
- **Nothing of the user's is lost**: the original file is never written; candidates live in
  the output folder; the answer's bundle holds the reduced script alone when it holds
  without the rest of the code folder, and says which files it still needs when not (the
  user's data never travels unless the reduced script cannot do without it, and then the
  draft says so).

Its parts: what a candidate's source alone decides, before any run (``reduce_source``), and
what the answer tells -- the versions each side ran, the draft for upstream, the summary
(``reduce_report``). This module runs the candidates and writes the answer.

Written under `--out`: `reduced/<script>`, `original/<script>`, `good/` and `bad/` bundles
(each a `run.sh` that needs no harness, as `repro` writes them), `ISSUE.md` (a draft for the
upstream tracker) and `reduce.json` (what was tried, kept, and how long it took).
"""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pysource_minimize import minimize
from rich.console import Console

from harness import status, usercode
from harness.cells import Cell
from harness.errors import UserError
from harness.files.ownfiles import link_or_copy
from harness.files.paths import inside
from harness.index import releases
from harness.investigate.bisect import ReleaseCells
from harness.investigate.bisect_ends import bounds
from harness.investigate.diverge import one_cell
from harness.investigate.reduce_report import also_changed, issue, stack_of
from harness.investigate.reduce_source import not_worth_a_run, seeders, unseeded
from harness.investigate.repro import write_bundle
from harness.launch.confinement import for_reduce
from harness.names import file_name
from harness.results.result import Result
from harness.run.runner import Runner

RECORD = "reduce.json"
DEFAULT_BUDGET = 120.0


@dataclass
class Family:
    """What the bad side must keep showing: its status and its failure without the place."""

    status: str
    text: str

    @classmethod
    def of(cls, result: Result) -> Family:
        if result.status == status.OK and result.met is False:  # a value: which ones it missed, not the numbers
            exp = result.get("expectation") or {}
            missed = sorted(v.get("metric") or "?" for v in exp.get("values") or [] if v.get("met") is False)
            return cls(status.DRIFTED, ", ".join(missed))
        error = result.error or {}
        sig = error.get("signature") or result.reason or ""
        where = error.get("where")
        if where:
            sig = sig.replace(f" at {where}", "")
        return cls(result.status, sig)

    @staticmethod
    def passes(result: Result, values: bool = True) -> bool:
        """ok, and (`values`) every value the matrix expects of it met."""
        return result.status == status.OK and (not values or result.met is not False)

    def __str__(self) -> str:
        return f"{self.status}: {self.text}" if self.text else self.status


@dataclass
class Tally:
    tried: int = 0
    rejected: dict = field(default_factory=dict)   # why -> count
    seconds: float = 0.0
    forked: int = 0
    cell_runs: int = 0
    fresh_notes: dict = field(default_factory=dict)  # why trials started fresh -> how many
    repeated: int = 0   # candidates the reducer asked about again (answered from memory)


def sides(m, args) -> tuple[Cell, Cell]:
    """The good and the bad cell: two cells named, or one cell on two releases of a package (the
    cells `bisect` ran for its last good and first bad release, made the same way)."""
    by_release = (args.package, args.good, args.bad)
    if len(args.cells) == 2:
        if any(by_release):
            raise UserError("give GOOD_CELL BAD_CELL, or one CELL with --package, --good and --bad; not both")
        return (one_cell(args.cells[0], m.cells, "GOOD_CELL", args.matrix),
                one_cell(args.cells[1], m.cells, "BAD_CELL", args.matrix))
    if len(args.cells) != 1 or not all(by_release):
        raise UserError("give GOOD_CELL BAD_CELL, or one CELL with --package, --good and --bad")
    cell = one_cell(args.cells[0], m.cells, "CELL", args.matrix)
    resolver = releases.Resolver(offline=getattr(args, "offline", False))
    listed = bounds(args.package, cell.environment.python, good=args.good, bad=args.bad, spec=None, pre=False,
                    resolver=resolver)  # both are releases of the package, the good one older
    made = ReleaseCells([cell], args.package, resolver, None, cutoff=True, margin_days=releases.CUTOFF_MARGIN_DAYS)
    return made(listed[0])[0], made(listed[-1])[0]


def script_of(cell: Cell) -> Path:
    if cell.workload.model != "script" or cell.workload.code is None:
        raise UserError(f"{cell.id}: reduce shrinks a user's script (a `script:` workload); this cell's workload "
                        f"is '{cell.workload.model}'")
    return Path(cell.workload.code.source) / cell.workload.params["script"]


class Trials:
    """Runs one version of the script on both sides and says whether the break still holds."""

    def __init__(self, m, good: Cell, bad: Cell, engine, work: Path, budget: float, console: Console,
                 original: str = ""):
        self.m, self.good, self.bad, self.engine, self.work = m, good, bad, engine, work
        self.budget, self.console = budget, console
        self.script = good.workload.params["script"]
        self.folder = Path(good.workload.code.source)
        self.tally = Tally()
        self.family: Family | None = None
        self.answers: dict[str, bool] = {}  # candidate source -> whether it held
        self.original = original            # the script as the user wrote it
        self.kept: list[str] = []           # the candidates that held, in the order they were kept
        self.fallback = 0                   # kept candidates given back because the smallest held by chance
        self.seeded: set[str] = set()       # the random-number seeders the original calls with a seed (start)
        self._n = 0
        # one runner for every candidate: one run, so its cells' variables (the run's id among them)
        # stay the same and each side's warm launcher serves every candidate, not one each
        self.runner = Runner(dataclasses.replace(m, cells=[]), engine, work / "cells",
                             Console(file=io.StringIO(), soft_wrap=True), rerun=frozenset({"all"}))

    def cells(self, source: str, alone: bool, trial: bool) -> tuple[Cell, Cell]:
        """The two sides with `source` as the script: in a copy of the code folder, or (`alone`)
        in a folder that holds the script only."""
        self._n += 1
        folder = self.work / "candidates" / str(self._n)
        shutil.rmtree(self.work / "candidates" / str(self._n - 2), ignore_errors=True)  # what ran before last
        shutil.rmtree(folder, ignore_errors=True)
        if alone:
            folder.mkdir(parents=True)
        else:  # the folder's other files as links: a data file is not copied once per candidate; as the
            # hash walks it, so never the harness's own output (this folder, when --out lies inside it)
            usercode.copy_files(self.folder, folder, copy=link_or_copy)
            (folder / self.script).unlink(missing_ok=True)  # written below, never through a link
        target = folder / self.script
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
        code = usercode.load(folder, folder)
        out = []
        for cell in (self.good, self.bad):
            params = {**cell.workload.params, "code": code.spec()}
            params.pop("trial", None)
            if trial:
                params["trial"] = True
            workload = dataclasses.replace(cell.workload, code=code, params=params)
            limits = dataclasses.replace(cell.limits, wall=min(cell.limits.wall, self.budget),
                                         progress=min(cell.limits.progress, self.budget))
            out.append(dataclasses.replace(cell, workload=workload, limits=limits, expect=cell.expect))
        return out[0], out[1]

    def run(self, source: str, alone: bool = False, trial: bool = True) -> tuple[Result | None, Result | None]:
        good, bad = self.cells(source, alone, trial)
        got = {r.cell: r for r in self.runner.complete([good, bad])}
        self.tally.cell_runs += 2
        results = got.get(good.id), got.get(bad.id)
        for r in results:
            if r is None:
                continue
            if r.warmth and r.warmth.launch == "warm":
                self.tally.forked += 1
            elif trial:  # why a trial did not fork (said once per reason)
                for note in (r.get("exit") or {}).get("launch_notes") or []:
                    self.tally.fresh_notes[note] = self.tally.fresh_notes.get(note, 0) + 1
        return results

    def holds(self, source: str) -> bool:
        """pysource-minimize's question: does this candidate still show the break on both sides?
        A source asked about again is answered from memory, not run again; one that only moves a
        float to an unround value or cuts a string short is answered no without a run
        (`not_worth_a_run`)."""
        if source in self.answers:
            self.tally.repeated += 1
            return self.answers[source]
        why = not_worth_a_run(self.kept[-1] if self.kept else self.original, source)
        if why:
            self.tally.rejected[why] = self.tally.rejected.get(why, 0) + 1
            return False
        self.answers[source] = answer = self._holds(source)
        return answer

    def _holds(self, source: str) -> bool:
        started = time.monotonic()
        self.tally.tried += 1
        if self.seeded and unseeded(source, self.seeded):
            why = "it drops a seed the original gives"   # it would hold, or not, by chance: never run
        else:
            why = self.why_not(*self.run(source))
        if why is None:  # once more: a cut that leaves the script's randomness to chance another way
            why = self.why_not(*self.run(source)) and "it held once, not twice (by chance)"
        self.tally.seconds += time.monotonic() - started
        if why is None:
            self.kept.append(source)
        else:
            self.tally.rejected[why] = self.tally.rejected.get(why, 0) + 1
        if self.tally.tried % 10 == 0:
            self.console.print(f"  {self.tally.tried} candidates tried, {len(self.kept)} kept, "
                               f"{self.tally.seconds:.0f} s", highlight=False)
        return why is None

    def why_not(self, good: Result | None, bad: Result | None) -> str | None:
        if good is None or bad is None:
            return "no result"
        if bad.status == status.TIMEOUT or good.status == status.TIMEOUT:
            return "over its time budget"
        # the good side must pass as the break is judged: with its values for a value that moved, and
        # only by running for a failure (a script cut down to its failing call need not compute the rest)
        values = self.family is None or self.family.status == status.DRIFTED
        if not Family.passes(good, values):
            return f"the good side {good.status if good.status != status.OK else status.DRIFTED}"
        if self.family is not None and Family.of(bad) != self.family:
            return "the bad side " + ("passes" if Family.passes(bad) else "fails otherwise")
        return None


def start(trials: Trials, source: str) -> Family:
    """The original on both sides: the bad side must fail (or miss its value) and the good side
    pass, or there is nothing to reduce; the family the bad side shows is what must hold."""
    good, bad = trials.run(source, trial=False)
    if bad is None or good is None:
        raise UserError("the two sides left no result (interrupted?); run the command again")
    values = Family.passes(bad) or Family.of(bad).status == status.DRIFTED  # as `why_not` judges the good side
    if not Family.passes(good, values):
        swapped = " (and the bad side passes: are the two swapped?)" if Family.passes(bad) else ""
        raise UserError(f"the good side {trials.good.id} does not pass with the original script: it ended "
                        f"{Family.of(good)}{swapped}; a reduction needs one side that passes")
    if Family.passes(bad):
        raise UserError(f"the bad side {trials.bad.id} does not fail with the original script (it ended ok, its "
                        "values as expected): nothing to reduce; is it the cell the bisect named?")
    if bad.status in (status.UNAVAILABLE, status.UNSUPPORTED):
        raise UserError(f"the bad side {trials.bad.id} could not run ({bad.status}: {bad.reason})")
    return Family.of(bad)


def reduce(m, good: Cell, bad: Cell, engine, out: Path, console: Console, budget: float = DEFAULT_BUDGET,
           unconfined: bool = False) -> dict:
    """Shrink the script of `good`/`bad` (one script, two environments); write the bundle. Its
    candidates are confined (`unconfined`: the user said not to), and it says how before any runs."""
    path = script_of(good)
    if script_of(bad) != path:
        raise UserError(f"{good.id} and {bad.id} run different scripts ({path} and {script_of(bad)}): reduce takes "
                        "one script in two environments")
    source = path.read_text()
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: the reducer cannot parse the script ({exc.msg})") from None
    engine.confine, said = for_reduce(engine, unconfined)  # no confinement: a UserError, unless `unconfined`
    console.print(said, highlight=False)
    folder = inside(out, out / file_name(bad.id))
    work = folder / ".work"
    trials = Trials(m, good, bad, engine, work, budget, console, original=source)
    began = time.monotonic()
    console.print(f"checking the original on both sides: {good.id} (good) and {bad.id} (bad)", highlight=False)
    trials.family = start(trials, source)
    trials.seeded = seeders(source)
    console.print(f"the break to keep: {trials.family}", highlight=False)
    reduced = minimize(source, trials.holds)
    answer = _fresh(trials, reduced)
    if isinstance(answer, str):
        answer = _last_that_holds(trials, source, answer)
    reduced, alone, good_r, bad_r = answer
    record = _write(folder, trials, source, reduced, alone, good_r, bad_r, time.monotonic() - began)
    return record


FRESH_CHECKS = 3  # the answer holds fresh this many times in a row, or it held by chance


def _fresh(trials: Trials, source: str) -> tuple[str, bool, Result, Result] | str:
    """The answer checked as every script runs (fresh, FRESH_CHECKS times), alone if it can be,
    else with its folder: (source, alone, good, bad), or why it does not hold."""
    why = "no run"
    for alone in (True, False):
        for _ in range(FRESH_CHECKS):
            good_r, bad_r = trials.run(source, alone=alone, trial=False)
            why = trials.why_not(good_r, bad_r)
            if why is not None:
                break
        else:
            return source, alone, good_r, bad_r
    return why


def _last_that_holds(trials: Trials, original: str, why: str) -> tuple[str, bool, Result, Result]:
    """The smallest candidate held only by chance (a cut that left the script's randomness
    unseeded passes some runs): search the candidates kept on the way, by halves, for the last
    that holds fresh -- the original held at the start -- and say so."""
    chain = [original, *trials.kept]
    trials.console.print(f"[yellow]the smallest candidate does not hold when run fresh[/] ({why}): it held by chance; "
                         f"looking back over the {len(trials.kept)} kept on the way", highlight=False)
    good, bad = 0, len(chain) - 1   # chain[good] holds (the original held), chain[bad] does not
    found = None
    while bad - good > 1:
        mid = (good + bad) // 2
        answer = _fresh(trials, chain[mid])
        if isinstance(answer, str):
            bad = mid
        else:
            good, found = mid, answer
    if found is None:
        found = _fresh(trials, original)
        if isinstance(found, str):
            raise UserError(f"the original script does not hold when run fresh ({found}): it shows the break only "
                            f"by chance; the candidates are under {trials.work}")
    trials.fallback = len(trials.kept) - good
    return found


def _needs(folder: Path, script: str, reduced: str) -> list[str]:
    """The other files of the code folder the reduced script names (a string equal to a path)."""
    names = {node.value for node in ast.walk(ast.parse(reduced)) if isinstance(node, ast.Constant)
             and isinstance(node.value, str)}
    have = [p.relative_to(folder).as_posix() for p, _size in usercode.walk(folder)]  # the code's, not our output
    return sorted(h for h in have if h != script and (h in names or Path(h).name in names or Path(h).stem in names))


def _write(folder: Path, trials: Trials, original: str, reduced: str, alone: bool, good: Result, bad: Result,
           seconds: float) -> dict:
    script = trials.script
    for part, text in (("original", original), ("reduced", reduced)):
        (folder / part / script).parent.mkdir(parents=True, exist_ok=True)
        (folder / part / script).write_text(text)
    cells = trials.cells(reduced, alone, trial=False)
    for side, cell, result in (("good", cells[0], good), ("bad", cells[1], bad)):
        write_bundle(folder / side, cell, trials.engine, result.provenance, [result])
    lines = lambda text: len([x for x in text.splitlines() if x.strip()])  # noqa: E731 - one use, named
    t = trials.tally
    stacks = {"good": stack_of(good), "bad": stack_of(bad)}
    record = {"good": trials.good.id, "bad": trials.bad.id, "script": script, "family": str(trials.family),
              "lines": {"original": lines(original), "reduced": lines(reduced)},
              "alone": alone, "needs": [] if alone else _needs(trials.folder, script, reduced),
              "confinement": (bad.exit or {}).get("confinement"),   # what its candidates ran under
              "candidates": {"tried": t.tried, "kept": len(trials.kept), "rejected": t.rejected,
                             "forked_cell_runs": t.forked, "cell_runs": t.cell_runs, "fresh_because": t.fresh_notes,
                             "asked_again": t.repeated, "given_back": trials.fallback},
              "seconds": round(seconds, 1), "candidate_seconds": round(t.seconds, 1),
              "stacks": stacks, "also_changed": also_changed(stacks, folder),
              "resolved": {"good": good.resolution, "bad": bad.resolution},  # as each side's record says
              "signature": bad.failure_text or str(trials.family),
              "good_status": str(Family.of(good)) if trials.family.status == status.DRIFTED else good.status,
              "bad_status": str(Family.of(bad))}
    exp = (bad.get("expectation") or {}) if trials.family.status == status.DRIFTED else {}
    record["values"] = [{"metric": v.get("metric"), "expected": v.get("want"),
                         "good": (good.metrics or {}).get(v.get("metric")), "bad": v.get("got")}
                        for v in exp.get("values") or [] if v.get("met") is False]
    record["what"] = str((bad.error or {}).get("type") or "").rsplit(".", 1)[-1] or trials.family.status
    (folder / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    (folder / "ISSUE.md").write_text(issue(record, reduced))
    shutil.rmtree(folder / ".work" / "candidates", ignore_errors=True)
    return {**record, "folder": str(folder)}

