"""The atlas run: every environment of every atlas matrix, one after another, within a disk bound.

An environment at a time: ``harness run MATRIX --only 'ENV/*'`` in its own process (the
process boundary of every run: a crash or a kill there costs that run, never the atlas), then,
unless kept, the environment is removed -- the virtualenv and the uv cache it was installed
from, which is its own (``HARNESS_UV_CACHE`` per environment): uv links a virtualenv's files
to its cache, so removing one without the other frees nothing. Peak disk is then about one
environment, whatever the number of releases.

Resumable by construction: finished cells are in the results store, so a second run skips an
environment whose every cell is there (without building it) and runs only what is missing of
the others. Each environment's course is one line of ``atlas-run.jsonl`` in the results folder
(seconds, cells run, disk before removal): where the atlas's time and disk figures come from.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from rich.console import Console

from harness import matrix as matrix_mod
from harness.atlas import records
from harness.cells import Environment
from harness.engines.venv import MARKER, VenvEngine
from harness.environments import buildlock
from harness.environments.installer import CACHE_VARIABLE
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


def footprint(*folders: Path) -> int:
    """Bytes on disk below the folders, each inode once (a virtualenv's files are its cache's)."""
    seen, total = set(), 0
    for folder in folders:
        for root, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def remove(stack: Stack, say: Callable[[str], None] = _stderr) -> list[Path]:
    """The virtualenvs installed from the environment's own uv cache, and that cache; returns the
    virtualenvs removed. Only those: the same environment built from another uv cache (a user's
    run, a test suite's) may be in use by that run, and stays."""
    uv = uv_cache(stack)
    return removed(built_from(uv), uv, say)


def built_from(uv: Path) -> list[Path]:
    """The virtualenvs of the harness's cache installed from the uv cache `uv` (their marker says)."""
    found = []
    for marker in sorted((cache_dir() / "venvs").glob(f"*/{MARKER}")):
        try:
            if json.loads(marker.read_text()).get("uv_cache") == str(uv):
                found.append(marker.parent)
        except (OSError, ValueError):
            continue
    return found


def removed(venvs: list[Path], uv: Path, say: Callable[[str], None] = _stderr) -> list[Path]:
    """Virtualenvs and the uv cache they were installed from; returns the venvs removed. A venv
    another run uses (buildlock.unused: a run that found it there may have cells in it) is kept,
    and said; its files stay whole without the uv cache (they are hard links). Each other venv goes
    under its build lock (another run that wants it waits and then builds it again, never sees
    half of it)."""
    gone = []
    for venv in venvs:
        with buildlock.unused(venv) as free:
            if not free:
                say(f"kept {venv.name}: another run's cells use it")
                continue
            with buildlock.held(venv.name, venv):
                shutil.rmtree(venv, ignore_errors=True)
            gone.append(venv)
    shutil.rmtree(uv, ignore_errors=True)
    return gone


def run_one(stack: Stack, results: Path, extra: list[str], only: list[str] | None = None) -> int:
    """``harness run`` for the stack's cells in a child process; a TERM or INT here ends the
    child first (with TERM: its handler stops its cells and keeps what finished). On a cluster
    (``--executor slurm`` in `extra`) the run builds the environment here and submits its cells
    as one job array; ``harness status --wait`` then waits for them, so the environment is
    removed only once its tasks are done."""
    env = dict(os.environ, **{CACHE_VARIABLE: str(uv_cache(stack))})
    harness = [sys.executable, "-m", "harness"]
    rc = _child([*harness, "run", str(stack.matrix_path), "--quiet", "--engine", "venv", "--results", str(results),
                 *[a for cell in only or [f"{stack.environment.name}/*"] for a in ("--only", cell)], *extra], env)
    if rc == 0 and "slurm" in extra:
        _child([*harness, "status", str(stack.matrix_path), "--results", str(results), "--wait", f"{MAX_SECONDS:.0f}"],
               env)
    return rc


def _child(cmd: list[str], env: dict) -> int:
    child = subprocess.Popen(cmd, env=env)
    try:
        return child.wait()
    except BaseException:
        # SIGTERM, which the harness takes as Ctrl-C: SIGINT may be ignored in the child (a
        # background job of a non-interactive shell starts with it ignored, and Python keeps that)
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise


def drive(stack_list: list[Stack], results: Path, *, keep: bool, extra: list[str],
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
        rc = run_one(stack, results, extra, only=[c.id for c in cells] if partial else None)
        venv = VenvEngine().location(stack.environment)
        entry = {"matrix": stack.matrix.name, "environment": stack.environment.name, "cells": missing,
                 "left": owed(stack, results, published=published), "rc": rc, "started": _iso(started),
                 "seconds": round(time.time() - started, 1),
                 "build_seconds": _build_seconds(venv),
                 "disk_bytes": footprint(venv, uv_cache(stack)), "removed": False}
        if rc in (130, -signal.SIGINT, -signal.SIGTERM, 143):
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
    # each environment's own run expands the matrix again: refreshed too, or it would not see
    # the new release its stack was planned for (it reads the expansion an earlier run recorded)
    extra = [*(["--jobs", str(jobs)] if jobs else []), *[f"--rerun={s}" for s in sorted(rerun)],
             *(["--executor", executor] if executor else []), *(["--refresh-releases"] if refresh else [])]
    counts = drive(found, results, keep=keep, extra=extra, rerun=rerun, published=published,
                   say=lambda line: console.print(shown(line), highlight=False))
    left = sum(owed(s, results, published=published) for s in found)  # without --rerun: cells with no result
    console.print(f"atlas: {len(found)} environments; ran {counts['ran']}, already complete "
                  f"{counts['complete']}; {left} cells without a result", highlight=False)
    return left
