"""What the verbs do, as functions: run, build, repro, bisect, diverge, reduce -- each takes a
loaded `Matrix` and keyword arguments, runs in this process (each cell still in a process of its
own), and returns a typed value.

Every argument a user can get wrong is checked here, before anything is built, and raises a
`UserError` in the words the command line prints; the verbs in ``harness/commands/`` parse their
flags and call these. Output goes to `console` (a rich Console); by default nothing is printed,
so a notebook or a fixture sees only what it returns.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Protocol

from rich.console import Console

from harness import status as statuses
from harness.cells import Cell
from harness.engines import CHOICES, select_engine
from harness.engines.base import Engine
from harness.errors import UserError
from harness.files import outputroots
from harness.files.outputs import check_apart, check_output_folder
from harness.files.paths import check_writable
from harness.investigate.bisect_search import Found, Verdict
from harness.matrix import Matrix
from harness.results.result import Result
from harness.run.selection import select

__all__ = ["Bisection", "Judge", "RunReport", "bisect", "board", "build", "diverge", "engine", "reduce", "repro", "run",
           "submit"]

RERUN_CHOICES = (*statuses.ALL, "all")


def quiet() -> Console:
    """A console that prints nothing: the API's default, a caller reads what it returns."""
    return Console(file=io.StringIO(), soft_wrap=True)


def engine(name: str = "auto", *, pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
           console: Console | None = None) -> Engine:
    """An engine by name -- ``auto`` (Docker where a daemon answers, else virtualenvs), ``docker``,
    ``venv`` or ``local`` -- as a context manager that releases what it holds on leaving.
    `pythons`: version -> interpreter for the venv and local engines ({"3.6": "/path/python3.6"})."""
    if name not in CHOICES:
        raise UserError(f"engine {name!r} is not one of {', '.join(CHOICES)}")
    for version, path in (pythons or {}).items():
        if not version or not path:
            raise UserError(f"pythons expects version -> interpreter (e.g. {{'3.6': '/opt/py36/bin/python3.6'}}), "
                            f"got {version!r}: {path!r}")
    return select_engine(name, pythons=pythons, ca_bundle=ca_bundle, console=console)


@contextlib.contextmanager
def _engine_of(given: Engine | str, console: Console, pythons, ca_bundle) -> Iterator[Engine]:
    """An engine a caller opened (kept open: theirs to close) or one named here (closed after)."""
    if isinstance(given, Engine):
        yield given
        return
    with engine(given, pythons=pythons, ca_bundle=ca_bundle, console=console) as opened:
        yield opened


def _outputs(**folders) -> contextlib.AbstractContextManager:
    """The folders this call writes, kept out of every workload's code (files.outputroots), as a
    command line's are."""
    return outputroots.declared(SimpleNamespace(**{k: str(v) for k, v in folders.items() if v is not None}))


def selected(m: Matrix, only: Iterable[str] | None, what: str = "only") -> list[Cell]:
    """The matrix's cells whose id matches one of the globs of `only` (all of them for None);
    none is the caller's error."""
    if isinstance(only, str):
        only = [only]
    only = list(only) if only is not None else None
    cells = select(m.cells, only)
    if not cells:
        raise UserError(f"no cell of {m.path} matches {what} {' '.join(only or [])}")
    return cells


def _rerun(rerun: Iterable[str]) -> frozenset[str]:
    rerun = frozenset([rerun] if isinstance(rerun, str) else rerun)
    wrong = sorted(rerun - set(RERUN_CHOICES))
    if wrong:
        raise UserError(f"rerun {', '.join(map(repr, wrong))}: expected statuses among {', '.join(RERUN_CHOICES)}")
    return rerun


@dataclass
class RunReport:
    """What a run left: every selected cell's result (those that have one), in the matrix's order."""
    matrix: Matrix
    results: list[Result]
    run_dir: Path
    engine: str

    @property
    def missed(self) -> list[Result]:
        """The results whose expectation (the matrix's `expect:`) was not met."""
        return [r for r in self.results if r.met is False]

    @property
    def by_cell(self) -> dict[str, Result]:
        return {r.cell: r for r in self.results}

    def __getitem__(self, cell: str) -> Result:
        """The result of the cell with this id (KeyError naming it when it has none)."""
        try:
            return self.by_cell[cell]
        except KeyError:
            raise KeyError(f"{cell!r} has no result in {self.run_dir}") from None

    @property
    def exit_code(self) -> int:
        """The exit status `harness run` gives this run: 1 when an expectation was missed, else 0."""
        from harness import exits  # the names of the exit codes
        return exits.CHANGED if self.missed else exits.OK


def run(m: Matrix, *, results: str | Path = "results", engine: Engine | str = "auto",
        only: Iterable[str] | None = None, rerun: Iterable[str] = (), jobs: int | None = None,
        gpus: str | None = None, cpus_per_cell: int | None = None, fresh: bool = False,
        pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
        console: Console | None = None) -> RunReport:
    """Run the cells of `m` that `only` selects (globs of cell ids; all by default) and have no result
    in `results` yet (or one of a status in `rerun`; "all" for every cell); return every selected
    cell's result. `engine`: a name (opened and closed here) or an engine the caller holds open.
    `fresh`: every cell in a new interpreter, no compile or data caches (the default is warm where
    safe). Interrupted (KeyboardInterrupt), every finished result is kept; run again to resume."""
    from harness.run.runner import Runner  # deferred: the runner loads the report with it

    console = console or quiet()
    cells = selected(m, only)
    rerun = _rerun(rerun)
    results = check_writable(Path(results), "results")
    if m.resolver:
        m.resolver.record(results / m.name)
    with _outputs(results=results), _engine_of(engine, console, pythons, ca_bundle) as opened:
        opened.warm = not fresh
        runner = Runner(m, opened, results, console, rerun=rerun, jobs=jobs, gpus=gpus, cpus_per_cell=cpus_per_cell)
        done = runner.complete(cells)
        return RunReport(m, done, runner.store.run_dir, opened.name)


def build(m: Matrix, *, results: str | Path = "results", engine: Engine | str = "auto",
          only: Iterable[str] | None = None, export: str | Path | None = None,
          pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
          console: Console | None = None) -> list:
    """Build or reuse every environment of the selected cells (GPU ones too, on any host) without
    running a cell; returns one outcome per environment (`status`: built, reused or unavailable)."""
    from harness.run.build import build as build_all  # deferred: imported when it builds

    console = console or quiet()
    cells = selected(m, only)
    results = Path(results)
    if m.resolver:  # what is built is what a later run of this results folder runs
        check_writable(results, "results")
        m.resolver.record(results / m.name)
    if export:
        check_output_folder(Path(export), "export", [results])
    with _outputs(results=results, export=export), _engine_of(engine, console, pythons, ca_bundle) as opened:
        return build_all(cells, opened, results / m.name, console, export=Path(export) if export else None)


def repro(m: Matrix, cell: str, *, repeat: int = 1, out: str | Path = "bundles", engine: Engine | str = "auto",
          pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
          console: Console | None = None) -> tuple[Path, list[Result]]:
    """Reproduce the one cell of `m` whose id matches `cell` (an id, a prefix or a glob), `repeat`
    times, each clean-room; returns the bundle (its run.sh replays the cell without the harness)
    and each attempt's result."""
    from harness.investigate.repro import reproduce  # deferred: repro imports the runner

    console = console or quiet()
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= 1000:
        raise UserError(f"repeat expects a whole number from 1 to 1000, got {repeat!r}")
    found = [c for c in m.cells if c.id == cell] or [c for c in selected(m, [cell, f"{cell}*"], "cell")]
    out = Path(out)
    check_output_folder(out, "out")
    check_writable(out, "out")
    with _outputs(out=out), _engine_of(engine, console, pythons, ca_bundle) as opened:
        return reproduce(found[0], m, opened, out, repeat, console)


class Judge(Protocol):
    """A question's own verdict on one release, from the results of that release's cells: GOOD,
    BAD or SKIP (``Verdict(kind, why, evidence=...)``). The default judge compares status,
    expected values and the criteria against the end that works; the portability grid's asks
    how a reader loads one file."""

    def __call__(self, version: str, results: list[Result]) -> Verdict: ...


@dataclass
class Bisection:
    """A bisect's answer: `found` (the first changed release and both sides' evidence; `problem`
    when the ends do not bracket a change), the bundle of the changed release's cell, and the
    record's path."""
    found: Found
    bundle: Path | None
    record: Path
    versions: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """`harness bisect`'s exit status: 0 for an answer, 1 for none."""
        from harness import exits  # the names of the exit codes
        return exits.CHANGED if self.found.problem else exits.OK


def bisect(m: Matrix, *, package: str, good: str | None = None, bad: str | None = None,
           old: str | None = None, new: str | None = None, spec: str | None = None,
           cells: Iterable[str] | None = None, results: str | Path = "results", out: str | Path = "bundles",
           engine: Engine | str = "auto", jobs: int = 1, repeats: int | None = None,
           accuracy_drop: float | None = None, speed_drop: float | None = None, pre: bool = False,
           nightly: str | None = None, cutoff: bool = True, offline: bool = False, judge: Judge | None = None,
           pythons: dict[str, str] | None = None, ca_bundle: str | None = None, slurm: dict | None = None,
           console: Console | None = None) -> Bisection:
    """The first release of `package` where the selected cells (`cells`: globs; by default the
    matrix's first environment's) change, whichever way the ends show. The ends: `good` and `bad`
    (either order), `old` and `new`, or `spec` (a range). `judge` replaces the default verdict on
    a release (`Judge`). Finished cells are reused; the record lies beside the results. `slurm`
    runs each round as a job array on a cluster: options over the matrix's `slurm:` section, by
    their matrix keys, as `submit` takes them (``{}`` for the matrix's own), or options the
    command line merged already (``SlurmOptions``)."""
    # deferred, all five: the bisect loads the runner when it runs, and `import harness.api` stays cheap
    from harness.index import releases
    from harness.investigate import bisect as bisecting
    from harness.investigate import bisect_ends
    from harness.investigate.bisect_judge import Criteria
    from harness.options.slurm import SlurmOptions

    console = console or quiet()
    if slurm is not None and not isinstance(slurm, SlurmOptions):
        slurm = SlurmOptions.merged(m.slurm, **slurm)  # a bad option is the caller's error, in its words
    asked = SimpleNamespace(package=package, good=good, bad=bad, old=old, new=new, spec=spec, nightly=nightly,
                            accuracy_drop=accuracy_drop, speed_drop=speed_drop,
                            executor="local" if slurm is None else "slurm")
    nightly = bisect_ends.checked(asked)  # the command line's checks, in its words
    first, last, said = bisect_ends.ends(asked)
    chosen = selected(m, cells, "cells")
    env = chosen[0].environment
    chosen = [c for c in chosen if c.environment == env]
    results, out = Path(results), Path(out)
    check_writable(results, "results")
    if slurm is not None and m.resolver:  # a task loads the matrix offline: its ranges as this host expanded them
        m.resolver.record(results / m.name)
    check_output_folder(out, "out", [results])  # bundles never land among results
    check_writable(out, "out")
    resolver = releases.Resolver(offline=offline)
    versions = bisect_ends.bounds(package, env.python, good=first, bad=last, spec=spec, pre=pre, resolver=resolver)
    console.print(f"bisecting {package} over {len(versions)} releases ({versions[0]} ... {versions[-1]}) for "
                  f"{len(chosen)} cell(s) of {env.name} (Python {env.python}), {jobs} release(s) per round")
    with _outputs(results=results, out=out), _engine_of(engine, console, pythons, ca_bundle) as opened:
        found, bundle = bisecting.run(m=m, base_cells=chosen, package=package, versions=versions, engine=opened,
                                      results_root=results, console=console, jobs=jobs, repeats=repeats,
                                      cutoff=cutoff, bundles=out, criteria=Criteria(accuracy_drop, speed_drop),
                                      resolver=resolver, nightly=nightly, said=said, verdicts=judge, slurm=slurm,
                                      engine_args={"pythons": pythons or {}, "ca_bundle": ca_bundle})
    record = bisecting.record_path(results / m.name, package, versions[0], versions[-1])
    return Bisection(found, bundle, record, versions)


def one(m: Matrix, pattern: str, what: str) -> Cell:
    """The one cell of `m` an id (or a glob matching one) names."""
    from harness.investigate.diverge import one_cell  # the command line's own rule and message
    return one_cell(pattern, m.cells, what, str(m.path))


def diverge(m: Matrix, cell_a: str, cell_b: str, *, out: str | Path = "diverge", results: str | Path = "results",
            engine: Engine | str = "auto", rows: int | None = None, epochs: int | None = None, rerun: bool = False,
            pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
            console: Console | None = None) -> tuple[dict, Path]:
    """Where cell A's and cell B's models part, layer by layer (configurations, weights, outputs,
    gradients, a short training), against a floor measured on A's own stack; returns the record
    (``record["diverges"]``: whether they part) and the folder holding it and its page."""
    from harness.investigate import diverge as diverging  # deferred: it loads the runner when it runs

    console = console or quiet()
    a, b = one(m, cell_a, "CELL_A"), one(m, cell_b, "CELL_B")
    out = Path(out)
    check_apart(out, "out", [Path(results)])  # its own cells live there, not among a run's
    check_writable(out, "out")
    with _outputs(results=results, out=out), _engine_of(engine, console, pythons, ca_bundle) as opened:
        return diverging.run(m, a, b, opened, out, console, rows=rows, epochs=epochs, rerun=rerun)


def reduce(m: Matrix, good_cell: str | Cell, bad_cell: str | Cell, *, out: str | Path = "reduced",
           results: str | Path = "results", engine: Engine | str = "auto", budget: float | None = None,
           unconfined: bool = False, fresh: bool = False, pythons: dict[str, str] | None = None,
           ca_bundle: str | None = None, console: Console | None = None) -> dict:
    """The smallest script that still passes on `good_cell` and breaks on `bad_cell` (one script,
    two environments); writes run.sh for each side and an ISSUE.md draft under `out`; returns what
    it found. A side is a cell id of `m` or a cell made from one (a release of a package, as
    `bisect` makes them: the command line's ``--package --good --bad``)."""
    # deferred: the reducer loads the runner
    from harness.investigate.reduce import DEFAULT_BUDGET
    from harness.investigate.reduce import reduce as reducing

    console = console or quiet()
    good = good_cell if isinstance(good_cell, Cell) else one(m, good_cell, "GOOD_CELL")
    bad = bad_cell if isinstance(bad_cell, Cell) else one(m, bad_cell, "BAD_CELL")
    out = Path(out)
    check_apart(out, "out", [Path(results)])
    check_writable(out, "out")
    with _outputs(results=results, out=out), _engine_of(engine, console, pythons, ca_bundle) as opened:
        opened.warm = opened.warm and not fresh
        return reducing(m, good, bad, opened, out, console,
                        budget=DEFAULT_BUDGET if budget is None else budget, unconfined=unconfined)


def submit(m: Matrix, *, results: str | Path = "results", engine: Engine | str = "auto",
           only: Iterable[str] | None = None, rerun: Iterable[str] = (), fresh: bool = False,
           slurm: dict | None = None, pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
           console: Console | None = None) -> int:
    """Hand the selected cells that need a run to a Slurm cluster, one job-array task per cell, and
    return how many were submitted (`board` then follows them). `slurm`: options over the matrix's
    `slurm:` section, by their matrix keys (``{"partition": "gpu", "time": "01:00:00"}``)."""
    # deferred: the Slurm options and submitter are imported when something is submitted
    from harness.options.slurm import SlurmOptions
    from harness.run.executors.slurm.submit import submit as submitting

    console = console or quiet()
    cells = selected(m, only)
    rerun = _rerun(rerun)
    opts = SlurmOptions.merged(m.slurm, **(slurm or {}))  # a bad option is the caller's error, in its words
    results = check_writable(Path(results), "results")
    if m.resolver:  # a task loads the matrix offline: its ranges as this host expanded them
        m.resolver.record(results / m.name)
    with _outputs(results=results), _engine_of(engine, console, pythons, ca_bundle) as opened:
        return submitting(m, cells, opened, results, opts, console, rerun=rerun, fresh=fresh,
                          engine_args={"pythons": pythons or {}, "ca_bundle": ca_bundle})


def board(m: Matrix, *, results: str | Path = "results", wait: float | None = None,
          console: Console | None = None) -> list:
    """Where each cell of `m` stands (queued, running, finished: the cluster's queue and the
    results); with `wait`, polls until nothing is queued or running, at most `wait` seconds."""
    from harness.run.executors.slurm.board import status as board_status  # deferred: imported when asked

    return board_status(m, Path(results), console or quiet(), wait=wait)
