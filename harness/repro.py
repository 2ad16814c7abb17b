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
import re
import shlex
import shutil
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from rich.console import Console
from rich.markup import escape

from . import matrix as matrix_mod
from . import stacks
from .bases import images_dir
from .cells import Cell
from .engines.base import CELL_ENV, Engine, Prepared
from .errors import EnvironmentUnavailable, UserError
from .matrix import Matrix
from .paths import inside
from .report.tables import slug
from .runner import WORKLOADS_SRC, Runner

DEFAULT_OUT = "bundles"


def find_cells(pattern: str, matrices: list[Path]) -> list[tuple[Cell, Matrix]]:
    """Cells whose id matches `pattern` (a glob, or a prefix of an id) in the
    given matrix files, the first matrix naming an id winning."""
    found: dict[str, tuple[Cell, Matrix]] = {}
    for path in matrices:
        m = matrix_mod.load(path)
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
                self.console.print(f"[dim]{path.stem:>6} |[/] {escape(line)}", highlight=False)


def reproduce(cell: Cell, m: Matrix, engine: Engine, out: Path, repeat: int, console: Console,
              live: bool = True) -> tuple[Path, list[dict]]:
    bundle = inside(out, out / slug(cell.id))
    attempts_root = bundle / "attempts"
    results = []
    for k in range(1, repeat + 1):
        console.rule(f"attempt {k}/{repeat}: {escape(cell.id)}")
        attempt = replace(m, name=f"attempt-{k}", cells=[cell])
        runner = Runner(attempt, engine, attempts_root, console, rerun=frozenset({"all"}),
                        matrix_label=str(m.path))
        if live:
            with LiveLog(attempts_root / attempt.name, console):
                results += runner.run([cell])
        else:
            results += runner.run([cell])
    # The environment's provenance (image, venv, base) is in every result the engine could run.
    prov = next((r.get("provenance") for r in results if r["status"] != "unavailable"), None)
    write_bundle(bundle, cell, engine.name, prov, results)
    return bundle, results


def summary(results: list[dict]) -> str:
    failed = [r for r in results if r["status"] != "ok"]
    kinds = sorted({f"{r['status']}: {(r.get('error') or {}).get('signature') or r.get('reason') or ''}"
                    for r in failed})
    text = f"{len(failed)}/{len(results)} attempts failed"
    return text + (" -- " + "; ".join(kinds) if kinds else "")


# -- the bundle --------------------------------------------------------------------
def write_bundle(bundle: Path, cell: Cell, engine: str, prov: dict | None, results: list[dict]) -> None:
    """`prov` is the environment's provenance; None when it could not be had,
    and then the bundle holds the attempts and their build log but no run.sh."""
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "spec.json").write_text(json.dumps(cell.spec(), indent=2, sort_keys=True) + "\n")
    shutil.rmtree(bundle / "workloads", ignore_errors=True)
    shutil.copytree(WORKLOADS_SRC, bundle / "workloads", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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
    if engine == "docker":
        fam = prov["dockerfile"].split("/")[1]
        shutil.copy(images_dir() / fam / "Dockerfile", env_dir / "Dockerfile")
        from .engines.docker import _requirements
        (env_dir / "requirements.txt").write_text("".join(f"{r}\n" for r in _requirements(env)))
        script = docker_script(cell, prov)
    else:
        lock = Path(prov.get("venv", "")) / "requirements.lock" if prov.get("venv") else None
        if lock and lock.exists():
            (env_dir / "requirements.lock").write_text(lock_without_forced(lock.read_text(), env.force))
        script = venv_script(cell, has_lock=bool(lock and lock.exists()))
    (bundle / "run.sh").write_text(script)
    os.chmod(bundle / "run.sh", 0o755)
    (bundle / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True, default=str) + "\n")


def lock_without_forced(freeze: str, force: tuple[str, ...] | list[str]) -> str:
    """The environment's `pip freeze` minus the packages `force:` installed last.

    The freeze holds the forced pins next to what they break (keras==2.2.4
    beside tensorflow-cpu==2.15.1), a set pip refuses as one install; so
    run.sh replays the making: this lock with --no-deps (every other package
    at its frozen version, no resolver), then forced.txt with --no-deps.
    """
    forced = {canonicalize_name(Requirement(r).name) for r in force}
    kept = [line for line in freeze.splitlines()
            if not line.strip() or line.lstrip().startswith("#")
            or canonicalize_name(re.split(r"[=<>!~ @\[;]", line.strip(), maxsplit=1)[0]) not in forced]
    head = ["# pip freeze of the environment" + (", without the packages forced.txt installs last" if forced else "")]
    return "\n".join(head + kept) + "\n"


def _env_flags(cell: Cell) -> dict[str, str]:
    return cell.environment.variables(inherit=CELL_ENV)


# -- run.sh: everything taken from a cell or a result is quoted ---------------------------
# A bundle is made to be attached to a bug report and run by someone else, so
# the script never carries a value as shell text: values go through
# shlex.quote, numbers through int(), and comments through _comment (one line,
# escaped), whatever validation let through.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _q(value) -> str:
    return shlex.quote(str(value))


def _comment(text: str) -> str:
    """Text for a '#' comment: one line, control and non-ASCII characters escaped."""
    return str(text).encode("unicode_escape").decode("ascii")


def _assignment(key: str, value: str) -> str:
    """'KEY=value' quoted as one word, for `export` or `docker run -e`."""
    if not _VARIABLE.fullmatch(key):
        raise UserError(f"{key!r} is not an environment variable name")
    return _q(f"{key}={value}")


_REPORT = """
code=$?
echo "exit code: $code"
if [ "$code" -gt 128 ]; then echo "killed by signal $((code - 128)) ($(kill -l $((code - 128)) 2>/dev/null))"; fi
if [ "$code" -eq 124 ]; then echo "timed out after {wall}s"; fi
if [ -f out/workload.json ]; then
  echo "workload.json: $(grep -o '"outcome": *"[a-z]*"' out/workload.json)"
else
  echo "no workload.json: the process died before it could record an outcome"
fi
exit "$code"
"""


def docker_script(cell: Cell, prov: dict) -> str:
    from .engines.docker import hardening_flags
    env = {**_env_flags(cell), "PYTHONPATH": "/opt/harness", "HOME": "/tmp"}
    run_flags = ["--rm", "--init", "--network", "none", "-u", '"$(id -u):$(id -g)"', "-w", "/tmp",
                 *(_q(flag) for flag in hardening_flags())]
    if cell.limits.memory:
        run_flags += ["--memory", _q(cell.limits.memory), "--memory-swap", _q(cell.limits.memory)]
    if cell.parallelism.device_kind == "gpu":
        run_flags += ["--gpus", _q(f"device={','.join(str(i) for i in range(int(cell.parallelism.devices)))}")]
    run_flags += [f"-e {_assignment(k, v)}" for k, v in sorted(env.items())]
    wall = int(cell.limits.wall)
    return f"""#!/usr/bin/env bash
# Reproduce {_comment(cell.id)}
# with plain Docker; nothing of the harness is needed. DOCKER=/path/to/docker to choose
# the client (the build needs BuildKit); PIP_CERT=bundle.pem if pip sits behind a TLS proxy.
set -u
cd "$(dirname "$0")"
DOCKER="${{DOCKER:-docker}}"
IMAGE={_q(prov["image_tag"])}
if ! "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  : > environment/no-ca
  DOCKER_BUILDKIT=1 "$DOCKER" build -t "$IMAGE" \\
    --build-arg {_q("BASE_IMAGE=" + str(prov["base_used"]))} \\
    --build-arg {_q("BOOTSTRAP_PIP=" + stacks.pip_requirement(cell.environment.python))} \\
    --secret "id=ca,src=${{PIP_CERT:-environment/no-ca}}" environment || exit 125
fi
rm -rf out && mkdir -p out && cp spec.json out/
timeout {wall} "$DOCKER" run {" ".join(run_flags)} \\
  -v "$PWD/workloads:/opt/harness/workloads:ro" -v "$PWD/out:/out" \\
  "$IMAGE" python3 -m workloads /out/spec.json /out
""" + _REPORT.format(wall=wall)


def venv_script(cell: Cell, has_lock: bool) -> str:
    env = cell.environment
    python = "python" + ".".join(env.python.split(".")[:2])
    reqs = "environment/requirements.lock" if has_lock else "environment/requirements.txt"
    exports = "\n".join(f"export {_assignment(k, v)}" for k, v in sorted(_env_flags(cell).items()))
    limit = ""
    if cell.limits.memory:
        from .engines.venv import parse_size
        limit = f"ulimit -v {int(parse_size(cell.limits.memory)) // 1024}\n"
    # the lock is complete (pip freeze --all): --no-deps installs exactly it, with no resolver
    no_deps = "--no-deps " if has_lock else ""
    force = ('\n  if [ -s environment/forced.txt ]; then .venv/bin/python -m pip install -q --no-deps '
             '-r environment/forced.txt || exit 125; fi')
    wall = int(cell.limits.wall)
    return f"""#!/usr/bin/env bash
# Reproduce {_comment(cell.id)}
# in a virtualenv made the way the harness made it: the exact pins, then the forced ones
# (--no-deps), and the cell's variables. PYTHON=/path/to/{_comment(python)} to choose the interpreter.
set -u
cd "$(dirname "$0")"
PYTHON="${{PYTHON:-}}"
[ -n "$PYTHON" ] || PYTHON={_q(python)}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv || exit 125
  .venv/bin/python -m pip install -q --upgrade {_q(stacks.pip_requirement(env.python))} || exit 125
  .venv/bin/python -m pip install -q {no_deps}-r {reqs} || exit 125{force if env.force else ""}
fi
rm -rf out && mkdir -p out && cp spec.json out/
unset {" ".join(stacks.KERAS_SWITCHES)}  # the Keras this cell uses is set below, never inherited
{exports}
export PYTHONPATH="$PWD"
({limit}exec timeout {wall} .venv/bin/python -m workloads out/spec.json out)
""" + _REPORT.format(wall=wall)


def readme(cell: Cell, engine: str, results: list[dict]) -> str:
    seen = next((r.get("seen") for r in results if r.get("seen")), {}) or {}
    lines = [f"# Reproduction of `{cell.id}`", "", f"Outcome here: **{summary(results)}**", "",
             "| attempt | status | signature | exit |", "|---|---|---|---|"]
    for i, r in enumerate(results, 1):
        err = r.get("error") or {}
        sig = (err.get("signature") or r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {i} | {r['status']} | {sig} | {(r.get('exit') or {}).get('code')} |")
    lines += ["", "Environment as seen from inside: " + ", ".join(
        f"{k} {seen.get(k)}" for k in ("python", "tensorflow", "keras", "numpy", "backend") if seen.get(k)), "",
        f"Run it again: `./run.sh` ({'plain Docker' if engine == 'docker' else 'a virtualenv from the exact pins'}). "
        "It prints the exit code and the signal, if any.", "",
        "- `spec.json`: the cell (model, sizes, wrapper, devices, batch, seed, limits)",
        "- `workloads/`: the code that ran (Python 3.5+ syntax, standard library + numpy + the stack)",
        "- `environment/`: " + ("the Dockerfile and pins" if engine == "docker" else "the exact pip lock"),
        "- `attempts/`: every attempt's result.json, events.jsonl, stdout.log, stderr.log",
        "- `provenance.json`: image or venv, harness commit, build details", ""]
    return "\n".join(lines)


# -- a shell in the environment --------------------------------------------------------
def shell_command(cell: Cell, engine: Engine, prepared: Prepared, bundle: Path) -> tuple[list[str], dict]:
    """argv and environment for an interactive shell inside the cell's environment."""
    env = cell.environment.variables(inherit={**os.environ, **CELL_ENV})
    if engine.name == "docker":
        from .engines.docker import find_cli
        tty = ["-it"] if sys.stdin.isatty() else ["-i"]
        argv = [find_cli(), "run", "--rm", *tty, "--network", "none", "-e", "PYTHONPATH=/opt/harness",
                "-v", f"{bundle.resolve() / 'workloads'}:/opt/harness/workloads:ro",
                "-v", f"{bundle.resolve()}:/bundle", "-w", "/bundle", prepared.handle, "bash"]
        return argv, env
    if engine.name == "venv":
        venv = Path(prepared.handle)
        env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    else:
        python_dir = str(Path(prepared.handle).parent)
        env["PATH"] = f"{python_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(bundle.resolve())
    return ["bash"], env


def run_command(args, console: Console, engine: Engine) -> int:
    matrices = [Path(p) for p in args.matrix] or sorted(Path("matrices").glob("*.yaml"))
    if not matrices:
        raise UserError("no matrix to look the cell up in: pass --matrix FILE (or run from the project folder)")
    found = find_cells(args.cell, matrices)
    if not found:
        raise UserError(f"no cell matches '{args.cell}' in {', '.join(str(p) for p in matrices)} "
                        "(python -m harness list MATRIX shows the ids)")
    out = Path(args.out)
    if args.shell:
        cell, _ = found[0]
        bundle = inside(out, out / slug(cell.id))
        try:
            prepared = engine.prepare(cell.environment, bundle / "environment-build.log")
        except EnvironmentUnavailable as exc:
            raise UserError(f"{cell.environment.name} is unavailable: {exc.reason}") from None
        write_bundle(bundle, cell, engine.name, prepared.provenance, [])
        argv, env = shell_command(cell, engine, prepared, bundle)
        console.print(f"shell in {cell.environment.name} ({engine.name}); the bundle is at {bundle}; exit to leave")
        sys.stdout.flush()
        os.chdir(bundle)
        os.execvpe(argv[0], argv, env)
    for cell, m in found:
        started = time.monotonic()
        bundle, results = reproduce(cell, m, engine, out, args.repeat, console)
        console.rule()
        console.print(f"[bold]{escape(cell.id)}[/]: {escape(summary(results))}", highlight=False)
        how = ("./run.sh reproduces it without the harness" if (bundle / "run.sh").exists()
               else "no run.sh: the environment could not be had; see attempts/ for the build log")
        console.print(f"bundle: {bundle}  ({how}; {time.monotonic() - started:.0f} s)")
    return 0
