"""Benchmark: the test suite's own time -- CI from nothing, CI with warm caches, the quick tier --
for one commit or several, in one invocation.

    python bench/suite.py [--commit REV ...] [--state nothing,warm] [--tier ci,quick] [--keep DIR] [--yes]

Each run is on a clean clone of the commit (``git clone`` of this checkout, then ``git checkout``),
as CI's is:

- tier ``ci``: ``.ci/run``, the whole of CI (installs, Docker, Slurm, lint, docs, every test);
- tier ``quick``: ``nox -s tests -- -m quick``, the tier the README gives contributors.

State ``nothing`` empties what a new machine would not have before the run: the harness's images
and Docker's build cache are removed from the engine's store (this is why it asks for ``--yes``),
and the run gets cache folders of its own (``XDG_CACHE_HOME`` in an empty folder: the harness's
environments, downloads, compile caches and release lists; pip's cache), once before its tiers,
and each of its tiers starts without the clone's nox sessions, as a new clone has. State ``warm`` runs again
on what the previous run of the same commit left. For each commit the states run in the order
given (``nothing`` then ``warm`` is the order that measures both), and the commits one after the
other, so that one commit's ``nothing`` never empties what another's ``warm`` reads.

Printed per run: its wall, CI's own table of where its time went (the phase lines ``.ci/run``
prints at its end), and pytest's summary line; at the end, per state and tier, each commit's wall
and its ratio to the first commit's -- taken in this one invocation, on this one machine. Logs are
kept under ``--keep`` (default: a temporary folder, named at the end).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATES = ("nothing", "warm")
TIERS = ("ci", "quick")
IMAGE_PREFIX = "tfkeras-harness/"


def _empty_docker() -> None:
    """Remove the harness's images and Docker's build cache (what a new machine has none of)."""
    out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                         text=True)
    images = [ref for ref in out.stdout.split() if ref.startswith(IMAGE_PREFIX)]
    if images:
        subprocess.run(["docker", "rmi", "-f", *images], capture_output=True)
    subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True)


def _clone(commit: str, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "checkout", "-q", commit], check=True)
    return where


def _run(clone: Path, tier: str, cache: Path, log: Path) -> tuple[float, int]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("HARNESS_CACHE", None)
    if tier == "ci":
        argv = ["bash", ".ci/run"]
    else:
        nox = clone / ".nox" / "_bench-nox"
        if not (nox / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(nox)], check=True)
            reqs = subprocess.run([sys.executable, "-m", "harness.toolchain.lockfile", "requirements", "nox"],
                                  cwd=clone, capture_output=True, text=True, check=True).stdout
            (nox / "nox.txt").write_text(reqs)
            subprocess.run([str(nox / "bin" / "python"), "-m", "pip", "install", "-q", "--require-hashes",
                            "--no-deps", "--only-binary=:all:", "-r", str(nox / "nox.txt")], check=True)
        argv = [str(nox / "bin" / "python"), "-m", "nox", "-s", "tests", "--", "-m", "quick"]
    start = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(argv, cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.monotonic() - start, code


def _summary(log: Path) -> list[str]:
    text = log.read_text(errors="replace")
    lines = []
    tail = text.split("== where CI's", 1)
    if len(tail) == 2:
        lines += ["where CI's" + tail[1].rstrip()]
    lines += re.findall(r"^=+ .*(?:passed|failed|error).* in [0-9.]+s.*=+$", text, re.M)[-1:]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", action="append", help="a commit to measure (repeatable; default HEAD)")
    parser.add_argument("--state", default="nothing,warm", help="nothing, warm, or both in order")
    parser.add_argument("--tier", default="ci", help="ci, quick, or both")
    parser.add_argument("--keep", help="where the clones' logs stay (default: a temporary folder)")
    parser.add_argument("--yes", action="store_true", help="state `nothing` may empty the Docker engine's store")
    args = parser.parse_args(argv)
    commits = args.commit or ["HEAD"]
    states = [s for s in args.state.split(",") if s]
    tiers = [t for t in args.tier.split(",") if t]
    if not set(states) <= set(STATES) or not set(tiers) <= set(TIERS):
        parser.error(f"--state takes {', '.join(STATES)}; --tier takes {', '.join(TIERS)}")
    if "nothing" in states and not args.yes:
        parser.error("state `nothing` removes the harness's images from Docker's store: say --yes")
    keep = Path(args.keep or tempfile.mkdtemp(prefix="bench-suite-"))
    keep.mkdir(parents=True, exist_ok=True)
    walls: dict[tuple[str, str, str], float] = {}
    for commit in commits:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", commit], capture_output=True,
                             text=True, check=True).stdout.strip()
        base = keep / rev
        shutil.rmtree(base, ignore_errors=True)
        clone = _clone(commit, base / "clone")
        cache = base / "cache"
        for state in states:
            if state == "nothing":  # once per state: its tiers share what the first of them builds
                _empty_docker()
                shutil.rmtree(cache, ignore_errors=True)
            for tier in tiers:
                if state == "nothing":  # each tier as on a new clone: no nox sessions yet
                    shutil.rmtree(clone / ".nox", ignore_errors=True)
                cache.mkdir(parents=True, exist_ok=True)
                log = base / f"{state}-{tier}.log"
                wall, code = _run(clone, tier, cache, log)
                walls[(state, tier, rev)] = wall
                print(f"{rev} {state:7s} {tier:5s}: {wall / 60:.1f} min, exit {code} (log: {log})", flush=True)
                for line in _summary(log):
                    print("    " + line.replace("\n", "\n    "))
    print("\nwall per state and tier (ratio to the first commit, this invocation):")
    first = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", commits[0]], capture_output=True,
                           text=True).stdout.strip()
    for state in states:
        for tier in tiers:
            row = [(rev, w) for (s, t, rev), w in walls.items() if (s, t) == (state, tier)]
            ref = walls.get((state, tier, first))
            print(f"  {state:7s} {tier:5s}: " + "; ".join(
                f"{rev} {w / 60:.1f} min" + (f" ({w / ref:.2f})" if ref and rev != first else "") for rev, w in row))
    print(f"logs: {keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
