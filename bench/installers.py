"""Benchmark: building a matrix's virtualenvs with uv (the harness's installer) and with pip (the
recipe the harness used before it), side by side in one invocation, from an empty cache and from
a warm one.

    python bench/installers.py [MATRIX] [--only GLOB] [--rounds R] [--cutoff DATE] [--installers uv,pip]
                               [--python X.Y=PATH ...]

For each environment of the matrix (the cells `--only` selects), in every round, four builds:

- **uv, empty**: the harness's own build (``VenvEngine.prepare``) with a harness cache made for it,
  so uv's cache starts empty and every file is downloaded;
- **uv, warm**: the same build again into a new folder, uv's cache kept;
- **pip, empty**: ``python -m venv``, ``pip install --upgrade`` the pip the interpreter runs, then
  the environment's requirements (and its forced pins with ``--no-deps``) with a pip cache made
  for it: the harness's recipe before uv, its loopback cut-off index included where the
  environment has a cut-off and the pip has no ``--uploaded-prior-to``;
- **pip, warm**: the same again, pip's cache kept.

The four alternate within a round, so that a network or a load that drifts hits all alike. Printed:
each environment's seconds per build kind, median [min-max] over the rounds, and pip / uv
(the ratio of the medians, empty and warm), then the whole matrix's. `--cutoff DATE` gives every
environment that cut-off (as a range's environment has one), which is how an atlas, a bisect or
a watch builds them. Every build's versions are compared: a difference between what uv and pip
installed is printed (it should be none but pip itself, which the harness installs the newest of).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import stacks
from harness.engines.venv import VenvEngine  # noqa: E402
from harness.environments import interpreters  # noqa: E402
from harness.index.cutoff import pip_arguments  # noqa: E402
from harness.matrix import load  # noqa: E402

KINDS = ("uv, empty", "uv, warm", "pip, empty", "pip, warm")


def uv_build(env, cache: Path, log: Path) -> tuple[float, dict]:
    """The harness's build of `env` with `cache` as its cache; seconds and what it installed."""
    os.environ["HARNESS_CACHE"] = str(cache)
    engine = VenvEngine(root=cache / "venvs")
    shutil.rmtree(engine.location(env), ignore_errors=True)
    started = time.monotonic()
    prepared = engine.prepare(env, log)
    took = time.monotonic() - started
    return took, _pins((Path(prepared.handle) / "requirements.lock").read_text())


def pip_build(env, folder: Path, pip_cache: Path, log: Path, pythons: dict) -> tuple[float, dict]:
    """The recipe before uv: venv, pip upgraded, the requirements, the forced pins; seconds and what
    it installed."""
    shutil.rmtree(folder, ignore_errors=True)
    exe = interpreters.find(env.python, pythons)[0]
    variables = {**os.environ, "PIP_CACHE_DIR": str(pip_cache), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    started = time.monotonic()
    with open(log, "w") as out:
        def step(*args: str) -> None:
            subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=variables, check=True)

        step(exe, "-m", "venv", str(folder))
        py = str(folder / "bin" / "python")
        step(py, "-m", "pip", "install", "--upgrade", stacks.pip_requirement(env.python))
        if env.uploaded_before:
            with pip_arguments(env.uploaded_before, py) as (args, _):
                step(py, "-m", "pip", "install", *args, *env.requirements)
                if env.force:
                    step(py, "-m", "pip", "install", "--no-deps", *args, *env.force)
        else:
            step(py, "-m", "pip", "install", *env.requirements)
            if env.force:
                step(py, "-m", "pip", "install", "--no-deps", *env.force)
    took = time.monotonic() - started
    freeze = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                            text=True, env=variables).stdout
    return took, _pins(freeze)


def _pins(freeze: str) -> dict[str, str]:
    out = {}
    for line in freeze.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            out[name.lower().replace("_", "-")] = version
    return out


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", nargs="?", default="matrices/smoke.yaml")
    parser.add_argument("--only", action="append", default=[], help="cell glob (as the harness's --only)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cutoff", help="give every environment this cut-off (ISO 8601 UTC)")
    parser.add_argument("--python", action="append", default=[], metavar="X.Y=PATH")
    parser.add_argument("--installers", default="uv,pip", help="uv,pip (default) or one of them")
    args = parser.parse_args()
    kinds = [k for k in KINDS if k.split(",")[0] in args.installers.split(",")]
    pythons = dict(p.split("=", 1) for p in args.python)
    matrix = load(args.matrix)
    envs: dict[str, object] = {}
    for cell in matrix.cells:
        if not args.only or any(fnmatch.fnmatchcase(cell.id, g) for g in args.only):
            envs.setdefault(cell.environment.name, cell.environment)
    if args.cutoff:
        envs = {n: dataclasses.replace(e, uploaded_before=args.cutoff) for n, e in envs.items()}
    times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in kinds} for n in envs}
    differences: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="bench-installers-") as tmp:
        root = Path(tmp)
        for round_ in range(1, args.rounds + 1):
            for name, env in envs.items():
                cache, pip_cache = root / f"cache-{round_}-{name}", root / f"pip-{round_}-{name}"
                installed = {}
                for kind in kinds:
                    log = root / f"{name}-{kind.replace(', ', '-')}-{round_}.log"
                    try:
                        if kind.startswith("uv"):
                            took, installed[kind] = uv_build(env, cache, log)
                        else:
                            took, installed[kind] = pip_build(env, root / f"pip-venv-{name}", pip_cache, log,
                                                              pythons)
                    except Exception as exc:  # noqa: BLE001 - a build that fails is a line, not a bench's end
                        sys.exit(f"{name} ({kind}) failed: {exc}; log: {log.read_text()[-2000:]}")
                    times[name][kind].append(took)
                    print(f"[round {round_}] {name:40s} {kind:11s} {took:6.1f} s", file=sys.stderr, flush=True)
                uv, pip = installed.get("uv, empty", {}), installed.get("pip, empty", {})
                for pkg in sorted(set(uv) | set(pip)) if uv and pip else ():
                    if uv.get(pkg) != pip.get(pkg) and pkg not in ("pip",):
                        differences.add(f"{name}: {pkg} uv {uv.get(pkg, '-')} / pip {pip.get(pkg, '-')}")
                shutil.rmtree(cache, ignore_errors=True)
                shutil.rmtree(pip_cache, ignore_errors=True)
    print(f"\n{args.matrix}{' --cutoff ' + args.cutoff if args.cutoff else ''}: seconds per build, "
          f"median [min-max] over {args.rounds} round(s), on {os.cpu_count()} cores")
    print(f"{'environment':40s} " + " ".join(f"{k:>18s}" for k in kinds)
          + ("   pip/uv empty   pip/uv warm" if len(kinds) == 4 else ""))
    total = {k: [sum(times[n][k][i] for n in envs) for i in range(args.rounds)] for k in kinds}
    for name, row in [*((n, times[n]) for n in envs), ("whole matrix", total)]:
        line = f"{name:40s} " + " ".join(f"{_spread(row[k]):>18s}" for k in kinds)
        if len(kinds) == 4:
            line += "".join(f"   {statistics.median(row[f'pip, {s}']) / statistics.median(row[f'uv, {s}']):11.1f}"
                            for s in ("empty", "warm"))
        print(line)
    print("\nversions that differ between the installers (pip itself aside):")
    print("\n".join(f"  {d}" for d in sorted(differences)) or "  none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
