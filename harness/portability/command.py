"""`harness portability`'s command line: ``run`` (every stack of a stacks file writes the seeds'
models in every format it has, then every stack loads every file; resumable, as any matrix) and
``publish`` (the judged records, CSV and the grid page, from the results).
Exit 0; 1 when a run left cells without a result or not ok; 2 for input that cannot be used."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from rich.console import Console

from harness.commands.common import engine_for
from harness.errors import UserError
from harness.matrix import load
from harness.options.engine import add_engine_args, pythons
from harness.options.shared import add_resource_args, add_slurm_args
from harness.options.slurm import SlurmOptions
from harness.portability import bounded, evidence, grid, judge, publish
from harness.status import OK
from harness.terminal import shown

STACKS = "matrices/portability/stacks.yaml"
RESULTS = "results/portability"
OUT = "docs/portability"


def add(sub) -> None:
    p = sub.add_parser("portability", help="model files saved on one release, loaded on another",
                       description="Every stack of a stacks file saves the seeds' models (GRU, LSTM, convnet, a "
                                   "custom layer) in every format it writes; every stack loads every file by each "
                                   "way its users would try, and each file is judged: loads and predicts the same, "
                                   "loads but predicts differently, refuses, or a format the reader cannot know. "
                                   "Exit 0; 1 when cells were left without a result or not ok; 2 for bad input.")
    acts = p.add_subparsers(dest="action", required=True)
    r = acts.add_parser("run", help="write and read every pair; resumable (finished cells are kept)")
    r.add_argument("stacks_file", nargs="?", default=STACKS, metavar="STACKS",
                   help=f"a YAML file whose 'environments:' are the stacks, as a matrix's (default: {STACKS})")
    r.add_argument("--stacks", action="append", metavar="GLOB",
                   help="only the stacks whose name matches, as writers and as readers (repeatable): a slice of a "
                        "large grid; every finished pair is kept, and a later slice reads only what is missing")
    r.add_argument("--row-and-column", action="store_true",
                   help="with --stacks: every pair with either end among them -- their row and column against "
                        "every stack of the file (a new release's cost), not only the pairs between them")
    r.add_argument("--results", default=RESULTS, metavar="DIR", help=f"results folder (default: {RESULTS})")
    r.add_argument("--disk-bound", action="store_true",
                   help="one stack's environment at a time (venv engine): every stack writes, then every stack "
                        "reads, the virtualenv each pass built removed after it with its own uv cache -- about one "
                        "stack of disk at the peak, each stack built twice (the PyTorch stacks are about 7 GB each)")
    add_engine_args(r)
    add_resource_args(r)
    add_slurm_args(r, "Slurm job arrays: the writers first; run it again once they are done, and the readers "
                      "go (each waits for its writer's files)")
    c = acts.add_parser("check", help="your own model file, loaded on every stack: loads? predicts the same?")
    c.add_argument("model", metavar="FILE", help="an HDF5 model (.h5), a .keras archive, or a SavedModel folder "
                                                 "(read where it lies: on virtualenvs, or --engine local)")
    c.add_argument("stacks", nargs="?", default=STACKS, metavar="STACKS",
                   help=f"the stacks to load it on, as for run (default: {STACKS})")
    c.add_argument("--writer", metavar="STACK", help="the stack that wrote it (its name in STACKS): the reference")
    c.add_argument("--custom", metavar="FILE.py", help="a Python file that defines the model's own layers")
    c.add_argument("--inputs", metavar="FILE.npy", help="the model's inputs to predict on, as a NumPy array (default: "
                                                         "sixteen drawn from its input's shape: token ids for an "
                                                         "Embedding)")
    c.add_argument("--results", default=f"{RESULTS}-check", metavar="DIR",
                   help=f"results folder (default: {RESULTS}-check)")
    c.add_argument("--out", default="bundles/portability", metavar="DIR",
                   help="where check.json and a repro bundle per refusal or difference go "
                        "(default: bundles/portability)")
    add_engine_args(c)
    add_resource_args(c)
    ex = acts.add_parser("explain", help="where each group of files that load but predict differently parts from "
                                         "its writer, layer by layer")
    ex.add_argument("--results", default=RESULTS, metavar="DIR", help=f"the grid's results folder (default: {RESULTS})")
    ex.add_argument("--out", default=OUT, metavar="DIR",
                    help=f"the published grid's folder: the evidence goes to DIR/evidence, and the next publish "
                         f"links it (default: {OUT})")
    ex.add_argument("--probes", metavar="DIR", help="the probes' results folder (default: the grid's, -probes)")
    ex.add_argument("--group", action="append", metavar="ID", help="only this group (repeatable; the ids are "
                                                                     "the evidence files' names)")
    ex.add_argument("--again", action="store_true",
                    help="probe again the pairs probed before (a probe's result is kept, as any cell's: after the "
                         "harness's probe changed, its evidence is new only with this)")
    add_engine_args(ex)
    add_resource_args(ex)
    bs = acts.add_parser("bisect", help="narrow each change, along a line of readers or of writers, to the release "
                                        "that made it")
    bs.add_argument("--results", default=RESULTS, metavar="DIR", help=f"the grid's results folder (default: {RESULTS})")
    bs.add_argument("--out", default=OUT, metavar="DIR",
                    help=f"the published grid's folder: each change's evidence goes to DIR/evidence/changes, and the "
                         f"next publish adds it to the change (default: {OUT})")
    bs.add_argument("--change", action="append", metavar="ID",
                    help="only this change (repeatable; the ids are in changes.json)")
    bs.add_argument("--again", action="store_true", help="narrow the changes that already have evidence too")
    bs.add_argument("--bundles", default="bundles/portability-bisect", metavar="DIR",
                    help="where each bisect's repro bundle of the changed release goes (default: "
                         "bundles/portability-bisect)")
    add_engine_args(bs)
    add_resource_args(bs)
    pub = acts.add_parser("publish", help="the judged records (JSON, CSV) and the grid page")
    pub.add_argument("--results", default=RESULTS, metavar="DIR", help=f"results folder (default: {RESULTS})")
    pub.add_argument("--out", default=OUT, metavar="DIR", help=f"where the data and the page go (default: {OUT})")


def command(args, console: Console) -> int:
    if args.action == "run":
        return _run(args, console)
    if args.action == "check":
        return _check(args, console)
    if args.action == "explain":
        return _explain(args, console)
    if args.action == "bisect":
        return _bisect(args, console)
    data = publish.publish(Path(args.results), Path(args.out))
    counts: dict[str, int] = {}
    for r in publish.expanded(data):
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    console.print(f"{len(data['records'])} files judged: "
                  + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())), highlight=False)
    for line in data["missing"]:
        console.print(f"[yellow]no observations[/]: {shown(line)}", highlight=False)
    console.print(f"written: {shown(str(Path(args.out)))}/portability.{{json,csv,md}}", highlight=False)
    return 0


def _run(args, console: Console) -> int:
    results = Path(args.results)
    if args.disk_bound and args.executor == "slurm":
        raise UserError("--disk-bound runs a stack at a time here; a cluster's job arrays run many at once: "
                        "use one or the other")
    matrix = grid.write(Path(args.stacks_file), results / "grid.yaml")
    m = load(matrix)
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
        return _submit(args, m, cells, results, console)
    if args.disk_bound:
        done = _bounded(args, matrix, m, cells, results, console)
    else:
        with engine_for(args, console) as engine:
            done = _runner(m, engine, results, args, console).complete(cells)
    bad = [r for r in done if r.status != OK]
    for r in bad:
        console.print(f"[yellow]{shown(r.cell)}[/]: {r.status} ({shown((r.reason or r.failure_text)[:200])})",
                      highlight=False)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))}", highlight=False)
    return 1 if bad or len(done) < len(cells) else 0


def _bounded(args, matrix: Path, m, cells, results: Path, console: Console) -> list:
    """The grid a stack at a time (`bounded`); the results its cells have once it is done."""
    if args.engine not in ("venv", "auto"):
        raise UserError(f"--disk-bound builds and removes virtualenvs: --engine venv, not {args.engine}")
    extra = [*(["--jobs", str(args.jobs)] if args.jobs else []), *(f"--python={p}" for p in args.python),
             *(["--cpus-per-cell", str(args.cpus_per_cell)] if args.cpus_per_cell else [])]
    return bounded.run(matrix, m, cells, results, extra, lambda line: console.print(shown(line), highlight=False))


def _submit(args, m, cells, results: Path, console: Console) -> int:
    """The grid as Slurm job arrays, as `run --executor slurm` submits any matrix: the cells whose
    producers have their results go now, the others wait for the next call."""
    # only with --executor slurm: the submitter is imported when it submits, so the CLI starts without it
    from harness.run.executors.slurm.submit import submit

    opts = SlurmOptions.merged(m.slurm, args)
    with engine_for(args, console) as engine:
        submit(m, cells, engine, results, opts, console,
               engine_args={"pythons": pythons(args.python), "ca_bundle": args.ca_bundle})
    slice_ = "".join(f" --stacks '{g}'" for g in args.stacks or [])
    slice_ += " --row-and-column" if args.row_and_column else ""
    console.print(f"follow it with: python -m harness status {shown(str(results / 'grid.yaml'))} --results "
                  f"{shown(str(results))}; once the writers are done, the same command again submits the readers"
                  f"{shown(slice_)}; then: python -m harness portability publish --results {shown(str(results))}",
                  highlight=False)
    return 0


def _runner(m, engine, results: Path, args, console: Console, rerun: frozenset[str] = frozenset()):
    """The run of the grid's (or a check's) cells: warm, as `run` is by default -- a writer forks
    from its stack's launcher, and a reader loads every file in one process."""
    from harness.run.runner import Runner  # its live progress display is imported when cells run, not at CLI start
    engine.warm = True
    return Runner(m, engine, results, console, jobs=args.jobs, gpus=args.gpus, cpus_per_cell=args.cpus_per_cell,
                  rerun=rerun)


def _explain(args, console: Console) -> int:
    from harness.portability import explain  # numpy, when a comparison runs: not at CLI start

    results = Path(args.results)
    probes = Path(args.probes) if args.probes else results.with_name(results.name + "-probes")
    said = f"python -m harness portability explain --results {_as_run(results)} --out {_as_run(args.out)}"
    with engine_for(args, console) as engine:
        explain.explain(results, Path(args.out), probes,
                        lambda m: _runner(m, engine, probes, args, console,
                                          rerun=frozenset({"all"} if args.again else ())).complete(m.cells),
                        lambda line: console.print(shown(line), highlight=False), args.group, said)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))} --out "
                  f"{shown(args.out)} (it links the evidence)", highlight=False)
    return 0


def _as_run(path) -> str:
    """A folder as an evidence file's command names it: relative to where the command ran when it
    lies below it -- the evidence is published, and a checkout's own path means nothing elsewhere."""
    path = Path(path)
    try:
        path = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return shlex.quote(str(path))


def _bisect(args, console: Console) -> int:
    from harness.portability import narrow  # the bisect and its search, when a change is narrowed: not at CLI start

    results, out = Path(args.results), Path(args.out)
    _, g = publish.judged(results)
    m = load(results / "grid.yaml")
    plans = [p for c in g.changes if not args.change or c.id in args.change
             if (p := narrow.plan(c, g.stacks, g.records, m.cells)) is not None]
    narrow.check_wanted(args.change, plans, g.changes)
    (out / evidence.CHANGES).mkdir(parents=True, exist_ok=True)
    with engine_for(args, console) as engine:
        for p in plans:
            change, target = p["change"], out / evidence.CHANGES / evidence.change_file(p["change"].id)
            if target.exists() and not args.again:
                continue
            said = (f"python -m harness portability bisect --results {_as_run(results)} --out {_as_run(out)} "
                    f"--change {shlex.quote(change.id)}")
            console.rule(shown(f"{change.id}: {p['package']} {p['old']} -> {p['new']}"))
            ev = narrow.narrow(p, m, engine, results, console, jobs=args.jobs or 2, bundles=Path(args.bundles),
                               command=said)
            target.write_text(json.dumps(ev, indent=1, sort_keys=True, default=str) + "\n")
            console.print(f"{shown(change.id)}: {shown(ev['sentence'])}", highlight=False)
    console.print(f"then: python -m harness portability publish --results {shown(str(results))} --out "
                  f"{shown(str(out))} (it adds each change's release)", highlight=False)
    return 0


def _check(args, console: Console) -> int:
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
    matrix = check.write_matrix(Path(args.stacks), model, custom, args.writer, results / "check.yaml", inputs)
    m = load(matrix)
    order = [e.name for e in m.environments]
    with engine_for(args, console) as engine:
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
    return 0 if answer["readers"] else 1
