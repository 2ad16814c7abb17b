"""`harness upgrade`'s course: read the project, write and load its matrix, search each package,
gather each blocker's evidence, try the combined stack, write the report. The command line
(harness/commands/upgrade.py) declares the options and imports this when the verb runs.
Exit 0: every target holds, together; 1: something blocks (or the combination does not hold);
2: the input cannot be used (one line)."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version
from rich.console import Console

from harness import exits
from harness.engines import select_engine
from harness.errors import UserError
from harness.files.outputs import check_apart
from harness.files.paths import check_writable
from harness.index import releases
from harness.investigate import bisect_judge
from harness.investigate.bisect_judge import Criteria
from harness.investigate.bisect_search import GOOD
from harness.matrix import load, writing
from harness.matrix.release_cells import with_release
from harness.options.engine import pythons
from harness.terminal import shown
from harness.upgrade import (
    ACCURACY_FLOOR,
    announced,
    evidence,
    fromcell,
    frontier,
    pinned_python,
    plan,
    project,
    writers,
)

PYTHON_RE = re.compile(r"3\.\d{1,2}")


def run(args, console: Console) -> int:
    """The whole course, for the parsed command line; the process's exit status."""
    from_cell = _checked(args)
    start = _from_cell(args, load) if from_cell else _from_project(args)
    pins, python, keep = start["pins"], start["python"], start["keep"]
    asked = project.packages(pins, args.package)
    out, results = Path(args.out), Path(args.results)
    check_apart(out, "--out", [results])  # reduce and diverge keep their cells there
    check_writable(out, "--out")
    check_writable(results, "--results")
    resolver = releases.Resolver(offline=args.offline)
    base = start["base"] or plan.environment(pins, python, list(asked))
    python_notes: dict[str, str] = {}
    targets = _targets(asked, pins, python, resolver, python_notes)
    envs = [base, *[e for e in {plan.opened(base, p)["name"]: plan.opened(base, p) for p in asked}.values()
                    if e["name"] != base["name"]]]
    name = "upgrade-" + re.sub(r"[^A-Za-z0-9._-]", "-", start["name"] or "project")
    out.mkdir(parents=True, exist_ok=True)
    matrix_path = out / "matrix.yaml"
    m = writing.write(plan.matrix_doc(name, envs, start["works"], None if keep else args.repeats,
                                      start["settings"], start["source"]), matrix_path)
    console.print(shown(start["python_why"]), highlight=False)
    started = time.monotonic()
    report = {"project": start["project"], "pins": str(pins.source), "matrix": str(matrix_path),
              "results": str(results), "python": python, "python_why": start["python_why"],
              "workload": start["works"][0] if len(start["works"]) == 1 else start["works"], "packages": [],
              **({"from": start["from"]} if from_cell else {})}
    with select_engine(args.engine, pythons=pythons(args.python), ca_bundle=args.ca_bundle,
                       console=console) as engine:
        report["engine"] = engine.name
        yardstick, criteria = None, None
        for package, (current, target, newest) in targets.items():
            env_name = plan.opened(base, package)["name"]
            cells = _cells(m, env_name, keep)
            crit = criteria or Criteria(args.accuracy_drop or ACCURACY_FLOOR, args.speed_drop)
            search = frontier.Search(m, cells, package, engine, results, console, crit, resolver, args.repeats)
            console.rule(f"upgrade: {package} {current} -> {target}")
            answer, found = frontier.frontier(search, current, target, newest)
            if yardstick is None and answer.tested.get(current, {}).get("verdict") == GOOD:
                base_results = search.rounds[0].results_of[current]
                yardstick = bisect_judge.evidence(base_results)
                acc = yardstick["val_accuracy"]
                spread = (acc.hi - acc.lo) if acc else 0.0
                criteria = Criteria(max(args.accuracy_drop or ACCURACY_FLOOR, spread), args.speed_drop)
                report["baseline"] = {"cells": yardstick["cells"], "status": yardstick["status"],
                                      "val_accuracy": acc.as_dict() if acc else None,
                                      "accuracy_tolerance": criteria.accuracy_drop}
            entry = dataclasses.asdict(answer)
            if answer.blocker:
                entry["blocker"].update(_evidence(args, search, answer, found, yardstick, out, console))
                answer.cells, answer.ran = search.cost()
                entry["cells"], entry["ran"] = answer.cells, answer.ran
            entry["environment"] = env_name
            moved = (answer.tested.get(answer.frontier) or {}).get("moved_with") if answer.frontier else None
            if moved:   # the newest safe release installs only with other pins moved: said, and the
                entry["frontier_moved_with"] = moved   # combined stack leaves them open too
            if package in python_notes:
                entry["python_note"] = python_notes[package]
                console.print(shown(python_notes[package]), highlight=False)
            frontier.show(answer, console)
            report["packages"].append(entry)
        report["combined"] = _combined(m, base, report["packages"], engine, results, console, yardstick,
                                       criteria or Criteria(args.accuracy_drop or ACCURACY_FLOOR, args.speed_drop),
                                       resolver, keep)
    report["seconds"] = round(time.monotonic() - started, 1)
    report["cells"] = sum(p["cells"] for p in report["packages"]) + len(report["combined"].get("cells", []))
    report["commands"] = writers.commands(report, args)
    md, js = writers.write(report, out)
    console.rule("upgrade")
    for line in writers.summary(report).splitlines():  # shown() escapes a newline: one line at a time
        console.print(shown(line), highlight=False)
    console.print(f"report: {shown(str(md))}, {shown(str(js))}", highlight=False)
    blocked = any(not p["holds"] for p in report["packages"]) or report["combined"].get("holds") is False
    return exits.CHANGED if blocked else exits.OK


def _checked(args) -> bool:
    """The command line's own checks, before anything is read: one input form, a Python named
    X.Y, the numbers in range (one line, exit 2, when not). True for the matrix form."""
    from_cell = fromcell.check_form(args)
    if args.python_version is not None and not PYTHON_RE.fullmatch(args.python_version):
        raise UserError(f"--python-version expects X.Y (e.g. 3.11), got {args.python_version!r}")
    for name in ("accuracy_drop", "speed_drop", "budget"):
        value = getattr(args, name)
        if value is not None and not (0 <= value < (100 if name == "speed_drop" else 1e9)):
            raise UserError(f"--{name.replace('_', '-')} expects a number >= 0, got {value}")
    return from_cell


def _from_project(args) -> dict:
    """The project form: its pins, its workload, the baseline written from them (`plan`)."""
    folder = Path(args.project or ".")
    pins = project.read(project.find(folder, args.requirements))
    work = plan.workload(folder, args.script, args.args or [], args.factory, args.data)
    if args.python_version:
        chosen = pinned_python.Choice(args.python_version,
                                      f"Python {args.python_version}: as --python-version names it")
    else:
        chosen = pinned_python.choose(pins, folder, offline=args.offline)
    return {"pins": pins, "python": chosen.python, "python_why": chosen.why, "base": None, "works": [work],
            "settings": None, "keep": None, "name": folder.resolve().name, "project": str(folder.resolve()),
            "source": "the project's pins and its workload"}


def _from_cell(args, load) -> dict:
    """The matrix form: the cell's environment and workload as its matrix defines them (`fromcell`)."""
    m = load(args.matrix)
    cells = fromcell.select(m, args.cell)
    env = cells[0].environment
    works = [fromcell.workload(w) for w in {c.workload.name: c.workload for c in cells}.values()]
    started = {"matrix": str(Path(args.matrix).resolve()), "cell": args.cell, "environment": env.name,
               "cells": [c.id for c in cells], "parts": sorted(fromcell.kept(cells))}
    return {"pins": fromcell.pins(env, f"{args.matrix} (environment {env.name})"), "python": env.python,
            "python_why": f"Python {env.python}: the cell's environment's",
            "base": fromcell.environment(env), "works": works, "settings": fromcell.settings(cells, args.repeats),
            "keep": fromcell.kept(cells), "name": m.name, "project": None, "from": started,
            "source": f"environment {env.name} and its workload from {Path(m.path).name}"}


def _cells(m, env_name: str, keep: set[str] | None) -> list:
    """The written matrix's cells of one environment (of the matrix form: those the glob named)."""
    return [c for c in m.cells if c.environment.name == env_name and (keep is None or fromcell.part(c) in keep)]


def _targets(asked: dict, pins: project.Pins, python: str, resolver,
             notes: dict | None = None) -> dict[str, tuple[str, str, str]]:
    """{package: (current, target, newest)}: the newest release the index has for this Python,
    or the one the user gave (which must be a release). `notes` gets, per package, the newer
    releases this Python cannot install."""
    notes = {} if notes is None else notes
    out = {}
    for package, given in asked.items():
        current = pins.pins[package]
        try:
            found = resolver.expand(package, f">={current}", python, releases.Options())
        except releases.ReleasesUnavailable as exc:
            raise UserError(f"cannot list the releases of {package}: {exc}") from None
        listed = sorted(found.versions, key=Version)
        fit = [v for v in listed if v not in found.unfit]
        newest = (fit or listed or [current])[-1]
        beyond = [v for v in listed if Version(v) > Version(newest)]
        if beyond and not given:  # newer releases this Python cannot install: said, never silently left out
            notes[package] = (f"{package} {unfit_spans(beyond, found.unfit)} "
                              f"(the project's Python is {python}; name another with --python-version)")
        if given and given not in listed:
            raise UserError(f"--package {package}=={given}: not a release of {package} on {found.index} "
                            f"(newer ones: {', '.join(listed[-8:]) or 'none'})")
        out[package] = (current, given or newest, max(newest, given or newest, key=Version))
    return out


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"


def unfit_spans(versions: list[str], unfit: dict[str, str]) -> str:
    """Releases not tried, each run of neighbours under its own reason: a sentence that holds for
    every release it names ("2.16.1 to 2.18.1 not tried: requires Python >=3.9" is said of those
    alone, where 2.19.0 on needs 3.10), not the newest one's reason stretched over the range."""
    runs: list[tuple[str, list[str]]] = []
    for v in versions:
        why = unfit.get(v, "no file")
        if runs and runs[-1][0] == why:
            runs[-1][1].append(v)
        else:
            runs.append((why, [v]))
    return "; ".join(f"{_span(vs)} not tried: {why}" for why, vs in runs)


def _evidence(args, search, answer, found, yardstick, out: Path, console: Console) -> dict:
    got: dict = {}
    kind = answer.blocker["kind"]
    if kind == frontier.BREAK:
        got["mend_release"] = frontier.mend_by_release(search, answer)
        if yardstick:
            got["mend_setting"] = evidence.setting(search, answer, yardstick, None)
    if args.nightly and kind != frontier.UNAVAILABLE and found is not None:
        got["nightly"] = evidence.nightly(search, found, console)
    if kind == frontier.BREAK:
        b = answer.blocker
        got["error"] = search.first_error(b["first_bad"])
        got["announced"] = announced.explain(search.package, b["last_good"], b["first_bad"],
                                             search.messages(b["first_bad"]), search.warnings(b["last_good"]))
    if got.get("announced"):  # a change the project made on purpose: the code change, not a report
        got["reduced"] = {"problem": f"the change is announced ({got['announced']['by']}): upstream closes a "
                                     "report of it, so none is drafted"}
    elif not args.no_reduce and kind == frontier.BREAK:
        got["reduced"] = evidence.reduced(search, answer, out / "reduced", args.budget, args.unconfined)
    if not args.no_diverge and kind in (frontier.VALUE, frontier.ACCURACY, frontier.SPEED):
        got["diverge"] = evidence.diverged(search, answer, out / "diverge")
    return got


def _combined(m, base: dict, packages: list[dict], engine, results: Path, console: Console, yardstick,
              criteria, resolver, keep: set[str] | None = None) -> dict:
    """Every package at its frontier at once, run and judged against the baseline: the newest
    stack that holds is claimed only when this cell says so."""
    moved = {p["package"]: p["frontier"] for p in packages if p["frontier"] and p["frontier"] != p["current"]}
    if not moved:
        return {"moved": {}, "holds": None, "why": "no package moves: the baseline is the newest stack that holds"}
    if yardstick is None:
        return {"moved": moved, "holds": None, "why": "the baseline does not run here"}
    cells = _cells(m, base["name"], keep)
    env = cells[0].environment
    for package, version in moved.items():
        env = with_release(env, package, version, None)
    # a frontier that installs only with other pins moved (numpy with a TensorFlow that needs numpy 2)
    # is tried here with them moved too: left open, resolved as of the combined stack's day
    held = sorted({canonicalize_name(n) for p in packages
                   for n in (p.get("frontier_moved_with") or {}).get("with", [])})
    env = frontier.left_open(env, held)
    cut = releases.cutoff_of([resolver.uploaded(p, v) for p, v in releases.exact_pins(env)])
    env = dataclasses.replace(env, name=f"combined-{env.name}", uploaded_before=cut)
    console.rule("upgrade: the combined stack")
    combined = [dataclasses.replace(c, environment=env, expect=None) for c in cells]
    verdict = frontier.judged(m, combined, engine, results, console, yardstick, criteria)
    return {"moved": moved, "holds": verdict.kind == GOOD, "why": verdict.why,
            **({"moved_with": held} if held else {}),
            "cells": verdict.evidence.get("cells", []),
            **({} if verdict.kind == GOOD else {"kind": frontier.kind_of(verdict, False)})}
