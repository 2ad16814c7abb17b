"""Reproduce one cell, N times, and leave a bundle anyone can rerun.

The bundle is meant for an upstream bug report: it holds the environment
recipe (Dockerfile or exact pip lock), the workloads package, the cell's spec
and a ``run.sh`` that needs plain ``docker`` or ``python`` and nothing of this
project, next to the logs and results of every attempt.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sys
import threading
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from harness import WORKLOADS, chains, status, usercode
from harness import matrix as matrix_mod
from harness.cells import Cell
from harness.engines.base import Engine
from harness.errors import EnvironmentUnavailable, UserError
from harness.files.paths import inside
from harness.index import releases
from harness.matrix import Matrix
from harness.names import file_name
from harness.results.result import Result
from harness.run.runner import Runner
from harness.status import failure_line
from harness.terminal import shown
from harness.workloads.protocol import INPUTS_DIR

DEFAULT_OUT = "bundles"


def find_cells(pattern: str, matrices: list[Path], results: Path | None = None) -> list[tuple[Cell, Matrix]]:
    """Cells whose id matches `pattern` (a glob, or a prefix of an id) in the
    given matrix files, the first matrix naming an id winning. Version ranges
    expand as the run in `results` recorded them (`.releases.json`), so the
    cell is the one that ran even after the index has moved on."""
    found: dict[str, tuple[Cell, Matrix]] = {}
    for path in matrices:
        m = matrix_mod.load(path, resolver=releases.Resolver(results))
        for cell in m.cells:
            if fnmatch.fnmatchcase(cell.id, pattern) or cell.id.startswith(pattern):
                found.setdefault(cell.id, (cell, m))
    return list(found.values())


class LiveLog:
    """Print what a cell writes to stdout.log / stderr.log while it runs."""

    def __init__(self, folder: Path, console: Console):
        self.folder, self.console = folder, console
        self.offsets: dict[Path, int] = {}  # bytes already shown, per log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        self._drain()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._drain()

    def _drain(self) -> None:
        for path in sorted(self.folder.rglob("std*.log")):
            # a cell runs in "<id>.partial-<pid>" and is renamed when done: one key for both
            key = Path(str(path.parent).split(".partial-")[0]) / path.name
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets.get(key, 0))
                    data = fh.read()
                    self.offsets[key] = fh.tell()
            except OSError:
                continue
            for line in data.decode(errors="replace").splitlines():
                self.console.print(f"[dim]{path.stem:>6} |[/] {shown(line)}", highlight=False)


def reproduce(cell: Cell, m: Matrix, engine: Engine, out: Path, repeat: int, console: Console,
              live: bool = True) -> tuple[Path, list[Result]]:
    bundle = inside(out, out / file_name(cell.id))
    engine.warm = False  # a reproduction is clean-room: a new interpreter, no caches (docs/warm.md)
    attempts_root = bundle / "attempts"
    results = []
    run_cells = chains.producers_of(cell, m.cells) + [cell]  # a consumer needs its producers' files
    for k in range(1, repeat + 1):
        console.rule(f"attempt {k}/{repeat}: {shown(cell.id)}")
        attempt = replace(m, name=f"attempt-{k}", cells=run_cells)
        runner = Runner(attempt, engine, attempts_root, console, rerun=frozenset({"all"}),
                        matrix_label=str(m.path))
        if live:
            with LiveLog(attempts_root / attempt.name, console):
                done = runner.complete(run_cells)
        else:
            done = runner.complete(run_cells)
        results += [r for r in done if r.cell == cell.id]
    # The environment's provenance (image, venv, base) is in every result the engine could run.
    prov = next((r.provenance for r in results if r.status != status.UNAVAILABLE), None)
    write_bundle(bundle, cell, engine, prov, results)
    return bundle, results


def summary(results: list[Result]) -> str:
    failed = [r for r in results if r.status != status.OK]
    kinds = sorted({failure_line(r) for r in failed})
    text = f"{len(failed)}/{len(results)} attempts failed"
    return text + (" -- " + "; ".join(kinds) if kinds else "")


# -- the bundle --------------------------------------------------------------------
def write_bundle(bundle: Path, cell: Cell, engine: Engine, prov: dict | None, results: list[Result]) -> None:
    """`prov` is the environment's provenance; None when it could not be had,
    and then the bundle holds the attempts and their build log but no run.sh.
    How the environment is remade is the engine's to say (`Engine.write_replay`)."""
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "spec.json").write_text(json.dumps(cell.spec(), indent=2, sort_keys=True) + "\n")
    shutil.rmtree(bundle / "workloads", ignore_errors=True)
    shutil.copytree(WORKLOADS, bundle / "workloads", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.rmtree(bundle / usercode.STAGE_DIR, ignore_errors=True)
    if cell.workload.code is not None:  # the user's code, so the bundle replays with nothing else
        usercode.copy_into(bundle, cell.workload.code)
    shutil.rmtree(bundle / INPUTS_DIR, ignore_errors=True)
    handed = sorted((bundle / "attempts").glob(f"attempt-*/{cell.id}/{INPUTS_DIR}"))
    if handed:  # what the producers of a chain handed this cell (harness/chains.py)
        shutil.copytree(handed[-1], bundle / INPUTS_DIR)
    env_dir = bundle / "environment"
    shutil.rmtree(env_dir, ignore_errors=True)
    env_dir.mkdir()
    env = cell.environment
    (env_dir / "requirements.txt").write_text("".join(f"{r}\n" for r in env.requirements))
    (env_dir / "forced.txt").write_text("".join(f"{r}\n" for r in env.force))
    (bundle / "README.md").write_text(readme(cell, engine, results))
    if prov is None:
        (bundle / "run.sh").unlink(missing_ok=True)
        return
    (bundle / "run.sh").write_text(engine.write_replay(cell, prov, env_dir))
    os.chmod(bundle / "run.sh", 0o755)
    (bundle / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True, default=str) + "\n")


def _entry(cell: Cell) -> str:
    return str(cell.workload.params.get("script") or cell.workload.params.get("build"))


def readme(cell: Cell, engine: Engine, results: list[Result]) -> str:
    seen = next((r.seen for r in results if r.seen), {})
    lines = [f"# Reproduction of `{cell.id}`", "", f"Outcome here: **{summary(results)}**", "",
             "| attempt | status | signature | exit |", "|---|---|---|---|"]
    for i, r in enumerate(results, 1):
        sig = r.failure_text.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {i} | {r.status} | {sig} | {(r.exit or {}).get('code')} |")
    lines += ["", "Environment as seen from inside: " + ", ".join(
        f"{k} {seen.get(k)}" for k in ("python", "tensorflow", "keras", "numpy", "backend") if seen.get(k)), "",
        f"Run it again: `./run.sh` ({engine.replay_words}). "
        "It prints the exit code and the signal, if any.", "",
        "- `spec.json`: the cell (model, sizes, wrapper, devices, batch, seed, limits)",
        "- `workloads/`: the code that ran (Python 3.5+ syntax, standard library + numpy + the stack)",
        *([f"- `{cell.workload.code.dir}/`: your own code ({_entry(cell)}, sha256 {cell.workload.code.sha256[:16]})"]
          if cell.workload.code is not None else []),
        *([f"- `{INPUTS_DIR}/`: the files this cell's producers handed it (`needs:`)"] if cell.needs else []),
        "- `environment/`: " + engine.recipe_words,
        "- `attempts/`: every attempt's result.json, events.jsonl, stdout.log, stderr.log",
        "- `provenance.json`: image or venv, harness commit, build details", ""]
    return "\n".join(lines)



def cells_named(args) -> list[tuple[Cell, object]]:
    """The cells `repro CELL` names, each with its matrix: those of ``--matrix`` (every matrix under
    matrices/ without one) whose id matches; none is the user's error, in the flag's words."""
    matrices = [Path(p) for p in args.matrix] or sorted(Path("matrices").glob("*.yaml"))
    if not matrices:
        raise UserError("no matrix to look the cell up in: pass --matrix FILE (or run from the project folder)")
    found = find_cells(args.cell, matrices, Path(args.results))
    if not found:
        raise UserError(f"no cell matches '{args.cell}' in {', '.join(str(p) for p in matrices)} "
                        "(python -m harness list MATRIX shows the ids)")
    return found


def shell(args, console: Console, engine: Engine, cell: Cell) -> None:
    """`repro --shell`: a shell (or `--shell-command`) in the cell's environment, in its bundle
    folder; this process becomes it, so its exit status is the shell's."""
    out = Path(args.out)
    bundle = inside(out, out / file_name(cell.id))
    try:
        prepared = engine.prepare(cell.environment, bundle / "environment-build.log")
    except EnvironmentUnavailable as exc:
        raise UserError(f"{cell.environment.name} is unavailable: {exc.reason}") from None
    write_bundle(bundle, cell, engine, prepared.provenance, [])
    argv, env = engine.shell(cell, prepared, bundle)
    if getattr(args, "shell_command", None):
        argv = [*argv, "-c", args.shell_command]  # exec'd below: its exit status is this process's
    console.print(f"shell in {cell.environment.name} ({engine.name}); the bundle is at {bundle}; exit to leave")
    sys.stdout.flush()
    os.chdir(bundle)
    os.execvpe(argv[0], argv, env)
