"""The verdict's course: the two sides, what moved, upgrade's search from the base's pins to the
head's releases (through the API), the joint move for a bump that cannot install, the model
files on both stacks, one record, its writers.

Why upgrade and not a run of the two stacks alone: the answer a maintainer needs for a bump
that breaks is more than "it breaks" -- the first bad release when the bump skips releases, the
error's family, what the last good release warned of, the road that mends it (tf-keras behind
tf.keras), the reduced script for a regression nobody announced -- and upgrade's search and
evidence already give each from cells; the verdict is that answer, read for one pull request.
Exit 0: safe (or nothing to judge); 1: breaks, changes values, cannot install, cannot judge;
2: the input cannot be used."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from rich.console import Console

from harness import exits
from harness.errors import UserError
from harness.files.outputs import check_apart
from harness.files.paths import check_writable
from harness.terminal import shown
from harness.upgrade import frontier
from harness.upgrade import writers as upgrade_writers
from harness.verdict import (
    BREAKS,
    CANNOT_INSTALL,
    CANNOT_JUDGE,
    CHANGES,
    DEFAULT_REPEATS,
    NOTHING,
    SAFE,
    SCHEMA,
    WORST_FIRST,
    joint,
    known,
    models,
    revisions,
    writers,
)

KINDS = {frontier.BREAK: BREAKS, frontier.UNAVAILABLE: CANNOT_INSTALL, frontier.VALUE: CHANGES,
         frontier.ACCURACY: CHANGES, frontier.SPEED: CHANGES}


@dataclass
class Request:
    """What the verdict is asked: the project, its two sides, its workload, where things go."""
    project: Path = Path(".")
    base: str | None = None            # a git revision (the pull request's base)
    head: str | None = None            # a git revision (default: HEAD)
    base_pins: str | None = None       # or two pin files
    head_pins: str | None = None
    requirements: str | None = None    # the pin file's path in the project, where not found by its name
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    factory: str | None = None
    data: str | None = None
    repeats: int = DEFAULT_REPEATS
    python_version: str | None = None
    accuracy_drop: float | None = None
    engine: str = "auto"
    pythons: dict[str, str] = field(default_factory=dict)
    ca_bundle: str | None = None
    results: Path = Path("results")
    out: Path = Path("verdict")
    reduce: bool = True
    budget: float | None = None        # reduce's own default
    read_models: bool = True
    offline: bool = False


def sides(req: Request) -> tuple[revisions.Side, revisions.Side]:
    """The base and the head, from revisions or from pin files (one form, both sides)."""
    files = req.base_pins is not None or req.head_pins is not None
    if files and (req.base is not None or req.head is not None):
        raise UserError("give the sides as revisions (--base REV [--head REV]) or as pin files (--base-pins FILE "
                        "--head-pins FILE), not both")
    if files:
        if req.base_pins is None or req.head_pins is None:
            raise UserError("--base-pins and --head-pins go together: the pins before the bump and after it")
        return revisions.from_file(req.base_pins, revisions.BASE), revisions.from_file(req.head_pins, revisions.HEAD)
    if req.base is None:
        raise UserError("name the bump's base: --base REV (the pull request's base, e.g. origin/main), or give "
                        "--base-pins FILE --head-pins FILE")
    return (revisions.at_revision(req.project, req.base, revisions.BASE, req.requirements, req.out),
            revisions.at_revision(req.project, req.head or "HEAD", revisions.HEAD, req.requirements, req.out))


def held_pins(blocker: dict, base: revisions.Side, package: str) -> list[str]:
    """The base's pins the installer names as what the bump cannot be installed beside: those the
    search moved with it, else those its reason names (upgrade's own reading of it)."""
    moved = (blocker.get("moved_with") or {}).get("with")
    names = moved or frontier.pins_named(blocker.get("why") or "", list(base.pins.pins), package)
    return [canonicalize_name(n) for n in names]


def package_part(p: dict, base: revisions.Side, python: str) -> dict:
    """One moved package's answer, in the verdict's words, with upgrade's evidence kept."""
    b = p.get("blocker")
    kind = SAFE if p["holds"] else (KINDS.get(b["kind"], CHANGES) if b else CANNOT_JUDGE)
    tested = p.get("tested", {}).get(p["target"]) or {}
    part = {"package": p["package"], "from": p["current"], "to": p["target"], "verdict": kind,
            "why": (b or {}).get("why") or tested.get("why") or p.get("problem") or "",
            "cells": (b or {}).get("cells") or tested.get("cells") or [], "environment": p.get("environment")}
    if b:
        part.update(first_bad=b.get("first_bad"), last_good=b.get("last_good"),
                    advice=upgrade_writers.actions(p), announced=b.get("announced"),
                    road=b.get("mend_setting"), mend=b.get("mend_release"), reduced=b.get("reduced"),
                    moved_with=b.get("moved_with"), error=b.get("error"))
    if kind == CANNOT_INSTALL:
        others = dict(base.pins.pins)
        part["joint"] = [joint.first_that_installs((p["package"], p["target"]), (n, base.pins.pins[n]), others,
                                                   python).as_dict()
                         for n in held_pins(b, base, p["package"])]
    return part


def combined_part(report: dict) -> dict | None:
    """The head's packages at once, where each held alone: the combination is claimed from its cell."""
    c = report.get("combined") or {}
    if c.get("holds") is not False:
        return None
    return {"package": " + ".join(f"{n}=={v}" for n, v in c["moved"].items()), "verdict": KINDS.get(
        c.get("kind"), BREAKS), "why": c.get("why", ""), "cells": c.get("cells", []), "combined": True}


def worst(kinds: list[str]) -> str:
    return min(kinds, key=WORST_FIRST.index) if kinds else NOTHING


def run(req: Request, console: Console) -> tuple[dict, int]:
    """The verdict for `req`: its record (also written under `req.out`) and the exit status."""
    if not isinstance(req.repeats, int) or not 1 <= req.repeats <= 100:
        raise UserError(f"--repeats expects a whole number from 1 to 100, got {req.repeats!r}")
    check_apart(req.out, "--out", [req.results])
    started = time.monotonic()
    base, head = sides(req)   # a revision or file that is not there is said before any folder is made
    check_writable(req.out, "--out")
    check_writable(req.results, "--results")
    moved = revisions.moves(base, head)
    if moved.down:
        raise UserError("the head moves " + ", ".join(f"{n} down ({a} -> {b})" for n, (a, b) in moved.down.items())
                        + ": a verdict judges a move up; give the sides the other way round")
    record = {"schema": SCHEMA, "project": str(req.project.resolve()), "base": _side(base), "head": _side(head),
              "moves": moved.as_dict(), "repeats": req.repeats, "parts": [], "models": []}
    if not moved.up:
        record.update(verdict=NOTHING, why="the head moves no pin up" + (
            f" (it adds {', '.join(f'{n}=={v}' for n, v in moved.added.items())})" if moved.added else ""))
        return _written(record, req, console, started)
    from harness import api  # deferred: upgrade's course, the index and the runner, when something moved

    console.rule("verdict: " + ", ".join(f"{n} {a} -> {b}" for n, (a, b) in moved.up.items()))
    answer = api.upgrade(req.project, requirements=base.pins.source, script=req.script, script_args=req.script_args,
                         factory=req.factory, data=req.data, packages=[f"{n}=={b}" for n, (a, b) in moved.up.items()],
                         python_version=req.python_version, repeats=req.repeats, accuracy_drop=req.accuracy_drop,
                         reduce=req.reduce, budget=req.budget, results=req.results, out=req.out / "upgrade",
                         offline=req.offline, engine=req.engine, pythons=req.pythons, ca_bundle=req.ca_bundle,
                         console=console)
    report = answer.report
    record.update(python=report["python"], python_why=report.get("python_why"), baseline=report.get("baseline"),
                  upgrade={"report": str(answer.markdown), "json": str(answer.json), "matrix": report["matrix"],
                           "commands": report.get("commands", {})}, engine=report.get("engine"))
    record["parts"] = [package_part(p, base, report["python"]) for p in report["packages"]]
    for part in record["parts"]:
        if not part.get("combined"):
            part["atlas"] = known.rows_for(part["package"], part["to"])
    together = combined_part(report)
    if together and all(p["verdict"] == SAFE for p in record["parts"]):
        record["parts"].append(together)
    installs = all(p["verdict"] != CANNOT_INSTALL for p in record["parts"])
    if req.read_models:
        files = models.found(req.project, [req.out, req.results])
        if files and installs and report.get("baseline"):
            console.rule("verdict: the model files")
            record["models"] = models.checked(files, req.project, base.pins, head.pins, report["python"], req.engine,
                                              req.results, console)
        elif files:
            record["models"] = [{"file": str(f.relative_to(req.project)), "kind": "model", "note": "not read: " + (
                "the head does not install" if not installs else "the base does not run here")} for f in files]
    kinds = [p["verdict"] for p in record["parts"]] + [m["verdict"] for m in record["models"] if "verdict" in m]
    record["verdict"] = worst(kinds)
    return _written(record, req, console, started)


def _side(side: revisions.Side) -> dict:
    return {"pins": str(side.pins.source), "revision": side.revision, "asked": side.asked, "path": side.path}


def _written(record: dict, req: Request, console: Console, started: float) -> tuple[dict, int]:
    record["seconds"] = round(time.monotonic() - started, 1)
    written = writers.write(record, req.out)
    console.rule("verdict")
    console.print(shown(writers.headline(record)), highlight=False)
    for path in written:
        console.print(f"written: {shown(str(path))}", highlight=False)
    return record, exits.OK if record["verdict"] in (SAFE, NOTHING) else exits.CHANGED

