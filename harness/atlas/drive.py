"""The atlas run: every environment of every atlas matrix, one after another, within a disk bound.

An environment at a time: its cells run through the API (``api.run``, every cell in a process of
its own: a crash or a kill there costs that cell; a harness error costs that environment's run,
never the atlas), then, unless kept, the environment is removed (environments.removal) -- the
virtualenv and the uv cache it was installed from, which is its own (``HARNESS_UV_CACHE`` per
environment): uv links a virtualenv's files to its cache, so removing one without the other
frees nothing. Peak disk is then about one
environment, whatever the number of releases.

Resumable by construction: finished cells are in the results store, so a second run skips an
environment whose every cell is there (without building it) and runs only what is missing of
the others. Each environment's course is one line of ``atlas-run.jsonl`` in the results folder
(seconds, cells run, disk before removal): where the atlas's time and disk figures come from.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from rich.console import Console

from harness import exits
from harness import matrix as matrix_mod
from harness.atlas import records
from harness.cells import Environment
from harness.engines.venv import MARKER, VenvEngine
from harness.environments import removal
from harness.errors import UserError
from harness.files.paths import cache_dir
from harness.index import releases
from harness.options.types import MAX_SECONDS
from harness.results.store import ResultStore
from harness.terminal import shown

LOG = "atlas-run.jsonl"


@dataclass(frozen=True)
class Stack:
    """One environment of one atlas matrix, and the cells it owes."""
    matrix_path: Path
    matrix: matrix_mod.Matrix
    environment: Environment

    @property
    def cells(self) -> list:
        return [c for c in self.matrix.cells if c.environment.name == self.environment.name]


def matrices(where: Path) -> list[Path]:
    """The atlas matrices: a folder's ``*.yaml`` in name order, or the one file named."""
    return sorted(where.glob("*.yaml")) if where.is_dir() else [where]


def stacks(paths: list[Path], results: Path, refresh: bool = False) -> list[Stack]:
    """Every environment of the matrices, its version ranges expanded as this results folder
    recorded them (a second run measures the same releases unless refreshed)."""
    out = []
    for path in paths:
        resolver = releases.Resolver(results, refresh=refresh)
        m = matrix_mod.load(path, resolver=resolver)
        out += [Stack(path, m, env) for env in m.environments]
    return out


def owed_cells(stack: Stack, results: Path, rerun: frozenset[str] = frozenset(),
               published: frozenset[tuple[str, str]] = frozenset()) -> list:
    """The stack's cells with no result yet (or one of a status to run again). `published`:
    (matrix, cell) the committed data already holds a measured record of -- a fresh clone's atlas
    starts from it and runs only what it lacks; `--rerun` runs them again."""
    store = ResultStore(results, stack.matrix.name)
    return [c for c in stack.cells if store.needs_run(c, rerun)
            and (rerun or (stack.matrix.name, c.id) not in published)]


def owed(stack: Stack, results: Path, rerun: frozenset[str] = frozenset(),
         published: frozenset[tuple[str, str]] = frozenset()) -> int:
    return len(owed_cells(stack, results, rerun, published))


def committed(data: Path | None) -> tuple[frozenset[tuple[str, str]], dict]:
    """The committed data's measured cells, (matrix, cell) -- every status but `unavailable`, which
    says the host that ran it lacked something, not what the stack does -- and its `about`."""
    if data is None or not data.is_file():
        return frozenset(), {}
    recs, about = records.read(data)
    return frozenset((r["matrix"], r["cell"]) for r in recs if r["status"] != "unavailable"), about


def cost_line(owing: list[tuple[Stack, int]], about: dict) -> str:
    """What a run will cost, said before it starts: the environments and cells it owes, and the
    time and disk the committed run's own log measured per environment."""
    cells = sum(n for _, n in owing)
    line = f"atlas: {len(owing)} environments owe {cells} cells"
    cost = about.get("cost") or {}
    per = cost.get("seconds_per_environment_median")
    if per:
        line += (f"; at the committed run's median of {per / 60:.1f} min per environment, about "
                 f"{len(owing) * per / 3600:.1f} h on its host")
    if cost.get("peak_disk_gb"):
        line += f", about {cost['peak_disk_gb']} GB of disk at the peak (one environment at a time)"
    return line


def uv_cache(stack: Stack) -> Path:
    """The environment's own uv cache, named like its virtualenv."""
    return cache_dir() / "atlas-uv" / VenvEngine().location(stack.environment).name


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def remove(stack: Stack, say: Callable[[str], None] = _stderr) -> list[Path]:
    """The virtualenvs installed from the environment's own uv cache, and that cache; returns the
    virtualenvs removed. Only those: the same environment built from another uv cache (a user's
    run, a test suite's) may be in use by that run, and stays (environments.removal)."""
    uv = uv_cache(stack)
    return removal.removed(removal.built_from(uv), uv, say)


def run_one(stack: Stack, results: Path, how: dict, only: list[str] | None = None,
            console: Console | None = None) -> int:
    """The stack's cells run in this process through the API (each cell in a process of its own,
    as every run's), installing through the stack's own uv cache; returns the exit status
    ``harness run`` gives (0, 1 for a missed expectation, 2 for a run that could not start or
    failed, 130 interrupted). A harness error in one stack's run is said and costs that run,
    never the driver's: the others go on. `how`: `api.run`'s options (jobs, rerun, pythons,
    cpus_per_cell) and ``executor="slurm"``, which builds the environment here, submits its
    cells as one job array and waits for them, so the environment is removed only once its tasks
    are done."""
    from harness import api  # deferred: the API loads the runner when it runs

    console = console or Console(soft_wrap=True)
    how = dict(how)
    executor = how.pop("executor", None)
    cells = only or [f"{stack.environment.name}/*"]
    try:
        with removal.using(uv_cache(stack)):
            if executor == "slurm":
                api.submit(stack.matrix, results=results, engine="venv", only=cells,
                           rerun=how.get("rerun", ()), pythons=how.get("pythons"), console=console)
                api.board(stack.matrix, results=results, wait=MAX_SECONDS, console=console)
                return exits.OK
            return api.run(stack.matrix, results=results, engine="venv", only=cells, console=console,
                           **how).exit_code
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    except UserError as exc:
        console.print(f"[bold red]error:[/] {shown(str(exc), lines=True)}", highlight=False)
        return exits.USER_ERROR
    except Exception:  # a harness bug in this stack's run: said with its traceback, the driver goes on
        console.print_exception()
        return exits.USER_ERROR


def drive(stack_list: list[Stack], results: Path, *, keep: bool, how: dict,
          say: Callable[[str], None], rerun: frozenset[str] = frozenset(),
          published: frozenset[tuple[str, str]] = frozenset()) -> dict:
    """Run every stack that owes cells; returns the counts. Stops at the first run that was
    interrupted (exit 130 or a signal): the atlas resumes from there."""
    results.mkdir(parents=True, exist_ok=True)
    done = skipped = 0
    for i, stack in enumerate(stack_list, 1):
        name = f"{stack.matrix.name}/{stack.environment.name}"
        cells = owed_cells(stack, results, rerun, published)
        missing = len(cells)
        if not missing:
            skipped += 1
            continue
        say(f"[{i}/{len(stack_list)}] {name}: {missing} cells")
        started = time.time()
        # some of the environment's cells are in the committed data: name the others, or its run would
        # measure those again (a run skips only what its results folder holds)
        partial = published and missing < owed(stack, results, rerun)
        rc = run_one(stack, results, how, only=[c.id for c in cells] if partial else None)
        venv = VenvEngine().location(stack.environment)
        entry = {"matrix": stack.matrix.name, "environment": stack.environment.name, "cells": missing,
                 "left": owed(stack, results, published=published), "rc": rc, "started": _iso(started),
                 "seconds": round(time.time() - started, 1),
                 "build_seconds": _build_seconds(venv),
                 "disk_bytes": removal.footprint(venv, uv_cache(stack)), "removed": False}
        if rc == exits.INTERRUPTED:
            _log(results, entry)
            raise KeyboardInterrupt
        if not keep and not entry["left"]:
            entry["removed"] = bool(remove(stack, say))
        _log(results, entry)
        done += 1
    return {"ran": done, "complete": skipped}


def _build_seconds(venv: Path) -> float | None:
    try:
        marker = json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker.get("build_seconds")


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _log(results: Path, entry: dict) -> None:
    with open(results / LOG, "a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def course(results: Path) -> list[dict]:
    """The lines of the run log (every environment's course, every session)."""
    try:
        lines = (results / LOG).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def run(where: Path, results: Path, console: Console, *, refresh: bool = False, only: list[str] | None = None,
        keep: bool = False, jobs: int | None = None, rerun: frozenset[str] = frozenset(),
        executor: str | None = None, data: Path | None = None,
        confirm: Callable[[str], bool] | None = None) -> int:
    """Run every environment of the atlas matrices under `where` that owes cells; returns how
    many cells are left without a result (`atlas run`, and each pass of `atlas watch`). `data`:
    the committed atlas, whose measured cells are not owed. The cost is said before the first
    environment starts; `confirm` (a terminal's question) may stop it there."""
    if not where.exists():
        raise UserError(f"{where}: no such folder or matrix file")
    found = stacks(matrices(where), results, refresh=refresh)
    if only:  # any of the globs, as `run --only` takes them
        found = [s for s in found if any(fnmatchcase(s.environment.name, glob) for glob in only)]
    published, about = committed(data)
    owing = [(s, n) for s in found if (n := owed(s, results, rerun, published))]
    if owing:
        said = cost_line(owing, about)
        if published:
            said += f" ({len(published)} cells measured in {data} are not run again; --rerun STATUS runs them)"
        console.print(shown(said), highlight=False)
        if confirm is not None and not confirm(said):
            console.print("atlas: nothing run", highlight=False)
            return sum(n for _, n in owing)
    # each stack's run takes its matrix as `stacks` expanded it (refreshed when asked: it sees the
    # new release its stack was planned for)
    how = {"jobs": jobs, "rerun": rerun, **({"executor": executor} if executor else {})}
    counts = drive(found, results, keep=keep, how=how, rerun=rerun, published=published,
                   say=lambda line: console.print(shown(line), highlight=False))
    left = sum(owed(s, results, published=published) for s in found)  # without --rerun: cells with no result
    console.print(f"atlas: {len(found)} environments; ran {counts['ran']}, already complete "
                  f"{counts['complete']}; {left} cells without a result", highlight=False)
    return left
