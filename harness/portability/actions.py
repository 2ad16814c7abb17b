"""What each ``harness portability`` action does with its options: ``run`` the grid (here, a stack at a
time within a disk bound, or as Slurm job arrays), ``check`` a user's own file on every stack,
``explain`` and ``bisect`` what the grid found, ``publish`` it. The command line (harness/commands/)
declares the options and imports this when an action runs, so the CLI starts without the grid's work.
Each returns the process's exit status (`harness.exits`); `engine_factory()` opens the engine the
options name (a context manager), only where cells run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from rich.console import Console

from harness import exits
from harness.errors import UserError
from harness.matrix import load
from harness.options.engine import pythons
from harness.options.slurm import SlurmOptions
from harness.portability import bounded, evidence, grid, judge, publish
from harness.results.store import holds_results
from harness.status import OK
from harness.terminal import shown


def publish_grid(args, console: Console) -> int:
    """The judged records (JSON, CSV) and the grid page, from the results -- or, where there are
    none (a fresh clone) and the data is committed, from that data, as `atlas publish` does."""
    results, out = Path(args.results), Path(args.out)
    if not holds_results(results) and (out / "portability.json").exists():
        console.print(f"{shown(str(results))}: no grid results; republishing the committed data, "
                      f"{shown(str(out / 'portability.json'))}", highlight=False)
        data = publish.republish(out)
    else:
        data = publish.publish(results, out)
    counts: dict[str, int] = {}
    for r in publish.expanded(data):
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    console.print(f"{len(data['records'])} files judged: "
                  + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())), highlight=False)
    for line in data["missing"]:
        console.print(f"[yellow]no observations[/]: {shown(line)}", highlight=False)
    console.print(f"written: {shown(str(Path(args.out)))}/portability.{{json,csv,md}}", highlight=False)
    return exits.OK


def run_grid(args, console: Console, engine_factory) -> int:
    """Every stack writes, then every stack reads every writer's files; resumable."""
    results = Path(args.results)
    if args.disk_bound and args.executor == "slurm":
        raise UserError("--disk-bound runs a stack at a time here; a cluster's job arrays run many at once: "
                        "use one or the other")
    m = grid.write(Path(args.stacks_file), results / "grid.yaml")
    matrix = m.path
    if args.row_and_column and not args.stacks:
        raise UserError("--row-and-column: the row and column of which stacks? name them with --stacks GLOB")
    cells = grid.among(m.cells, args.stacks, crossing=args.row_and_column)
    if not cells:
        raise UserError(f"--stacks {' '.join(args.stacks)}: no stack of {args.stacks_file} has such a name "
                        f"(its stacks: {', '.join(e.name for e in m.environments)})")
    writers = [c for c in cells if c.workload.name == grid.WRITER]
    console.print(f"{len(writers)} stacks of {len(m.environments)}: {len(writers)} writers, then a reader per pair: "
                  f"{len(cells) - len(writers)} cells (matrix: {shown(str(matrix))})", highlight=False)
    if args.executor == "slurm":
        return _submit(args, m, cells, results, console, engine_factory)
    if args.disk_bound:
        done = _bounded(args, matrix, m, cells, results, console)
    else:
        with engine_factory() as engine:
            done = _runner(m, engine, results, args, console).complete(cells)
    bad = [r for r in done if r.status != OK]
    for r in bad:
        console.print(f"[yellow]{shown(r.cell)}[/]: {r.status} ({shown((r.reason or r.failure_text)[:200])})",
                      highlight=False)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))}", highlight=False)
    return exits.CHANGED if bad or len(done) < len(cells) else exits.OK


def _bounded(args, matrix: Path, m, cells, results: Path, console: Console) -> list:
    """The grid a stack at a time (`bounded`); the results its cells have once it is done."""
    if args.engine not in ("venv", "auto"):
        raise UserError(f"--disk-bound builds and removes virtualenvs: --engine venv, not {args.engine}")
    how = {"jobs": args.jobs, "pythons": pythons(args.python), "cpus_per_cell": args.cpus_per_cell}
    return bounded.run(matrix, m, cells, results, how, lambda line: console.print(shown(line), highlight=False))


def _submit(args, m, cells, results: Path, console: Console, engine_factory) -> int:
    """The grid as Slurm job arrays, as `run --executor slurm` submits any matrix: the cells whose
    producers have their results go now, the others wait for the next call."""
    # only with --executor slurm: the submitter is imported when it submits, so the CLI starts without it
    from harness.run.executors.slurm.submit import submit

    opts = SlurmOptions.merged(m.slurm, args)
    with engine_factory() as engine:
        submit(m, cells, engine, results, opts, console,
               engine_args={"pythons": pythons(args.python), "ca_bundle": args.ca_bundle})
    slice_ = "".join(f" --stacks '{g}'" for g in args.stacks or [])
    slice_ += " --row-and-column" if args.row_and_column else ""
    console.print(f"follow it with: python -m harness status {shown(str(results / 'grid.yaml'))} --results "
                  f"{shown(str(results))}; once the writers are done, the same command again submits the readers"
                  f"{shown(slice_)}; then: python -m harness portability publish --results {shown(str(results))}",
                  highlight=False)
    return exits.OK


def _runner(m, engine, results: Path, args, console: Console, rerun: frozenset[str] = frozenset()):
    """The run of the grid's (or a check's) cells: warm, as `run` is by default -- a writer forks
    from its stack's launcher, and a reader loads every file in one process."""
    from harness.run.runner import Runner  # its live progress display is imported when cells run, not at CLI start
    engine.warm = True
    return Runner(m, engine, results, console, jobs=args.jobs, gpus=args.gpus, cpus_per_cell=args.cpus_per_cell,
                  rerun=rerun)


def explain_groups(args, console: Console, engine_factory) -> int:
    """Where each group of files that load but predict differently parts from its writer."""
    from harness.portability import explain  # numpy, when a comparison runs: not at CLI start

    results = Path(args.results)
    probes = Path(args.probes) if args.probes else results.with_name(results.name + "-probes")
    said = (f"python -m harness portability explain --results {evidence.as_run(results)} "
            f"--out {evidence.as_run(args.out)}")
    with engine_factory() as engine:
        explain.explain(results, Path(args.out), probes,
                        lambda m: _runner(m, engine, probes, args, console,
                                          rerun=frozenset({"all"} if args.again else ())).complete(m.cells),
                        lambda line: console.print(shown(line), highlight=False), args.group, said)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))} --out "
                  f"{shown(args.out)} (it links the evidence)", highlight=False)
    return exits.OK


def bisect_changes(args, console: Console, engine_factory) -> int:
    """Each change narrowed, along a line of readers or of writers, to the release that made it."""
    from harness.portability import narrow  # the bisect and its search, when a change is narrowed: not at CLI start

    results, out = Path(args.results), Path(args.out)
    _, g = publish.judged(results)
    m = load(results / "grid.yaml")
    plans = [p for c in g.changes if not args.change or c.id in args.change
             if (p := narrow.plan(c, g.stacks, g.records, m.cells)) is not None]
    narrow.check_wanted(args.change, plans, g.changes)
    (out / evidence.CHANGES).mkdir(parents=True, exist_ok=True)
    with engine_factory() as engine:
        for p in plans:
            change, target = p["change"], out / evidence.CHANGES / evidence.change_file(p["change"].id)
            if target.exists() and not args.again:
                continue
            said = (f"python -m harness portability bisect --results {evidence.as_run(results)} "
                    f"--out {evidence.as_run(out)} --change {shlex.quote(change.id)}")
            console.rule(shown(f"{change.id}: {p['package']} {p['old']} -> {p['new']}"))
            ev = narrow.narrow(p, m, engine, results, console, jobs=args.jobs or 2, bundles=Path(args.bundles),
                               command=said)
            target.write_text(json.dumps(ev, indent=1, sort_keys=True, default=str) + "\n")
            console.print(f"{shown(change.id)}: {shown(ev['sentence'])}", highlight=False)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))} --out "
                  f"{shown(str(out))} (it adds each change's release)", highlight=False)
    return exits.OK


def check_file(args, console: Console, engine_factory) -> int:
    """The user's own model file, loaded on every stack: loads? predicts the same?"""
    # imported when a check runs, not at CLI start: the repro bundles need the runner, the comparison numpy
    from harness.investigate.repro import reproduce
    from harness.portability import check

    results, out = Path(args.results), Path(args.out)
    model = Path(args.model).resolve()
    custom = Path(args.custom).resolve() if args.custom else None
    inputs = Path(args.inputs).resolve() if args.inputs else None
    if args.engine == "docker":
        raise UserError("portability check reads your file where it lies: --engine venv or local (the grid, "
                        "portability run, runs on any engine)")
    if args.engine == "auto":   # a process engine: auto would take Docker where a daemon answers
        args.engine = "venv"
    m = check.write_matrix(Path(args.stacks), model, custom, args.writer, results / "check.yaml", inputs)
    order = [e.name for e in m.environments]
    with engine_factory() as engine:
        _runner(m, engine, results, args, console).complete(m.cells)
        answer = check.compare(results / m.name, order, args.writer)
        console.print(f"{shown(model.name)}, against {shown(answer['reference'] or 'no stack that loads it')}:",
                      highlight=False)
        for reader in order:
            a = answer["readers"].get(reader)
            if a is None:
                continue
            said = {judge.SAME: f"loads and predicts the same, by {a.get('way')}",
                    judge.DIFFERS: f"[red]loads but predicts differently[/] by {a.get('way')} "
                                   f"(largest difference {a.get('max_abs_diff')})",
                    judge.REFUSES: "refuses: " + "; ".join(f"{w}: {e}" for w, e in (a.get("errors") or {}).items()),
                    judge.UNKNOWN: f"cannot know it: {a.get('reason')}"}[a["verdict"]]
            if a.get("custom_error"):
                said = f"your --custom file does not import here ({a['custom_error']}); {said}"
            console.print(f"  {shown(reader)}: {shown(said[:500])}", highlight=False)
        for line in answer["missing"]:
            console.print(f"[yellow]no observations[/]: {shown(line)}", highlight=False)
        out.mkdir(parents=True, exist_ok=True)
        for a in answer["readers"].values():  # a bundle for each answer worth a report upstream
            if a["verdict"] in (judge.REFUSES, judge.DIFFERS):
                [cell] = [c for c in m.cells if c.id == a["cell"]]
                bundle, _ = reproduce(cell, m, engine, out, 1, console, live=False)
                a["bundle"] = str(bundle)
    (out / "check.json").write_text(json.dumps({"model": str(model), **answer}, indent=1, sort_keys=True) + "\n")
    console.print(f"written: {shown(str(out / 'check.json'))}", highlight=False)
    # the question a user scripts against: does some stack read the file the same? A file every stack
    # refuses, or reads differently, or that none could be asked about, is a "no"
    same = [r for r, a in answer["readers"].items() if a["verdict"] == judge.SAME]
    return exits.OK if same else exits.CHANGED
