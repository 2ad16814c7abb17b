"""Where a cell may write: what this host offers to confine a cell's writes, decided once, and
what each engine gives.

`harness reduce` runs hundreds of variants of the user's script that nobody has run -- a
branch the script never took (one that empties an output folder or deletes a file by its
absolute path) may run in one -- so its candidates are confined: each may write only in its
own cell folder, its temp folder (its home is inside) and the harness's own caches it was
given; everything stays readable, so the user's data is read as the script always read it.

- **venv and local**: the cell process confines itself before it runs anything of the user's
  (workloads/confine.py), with what the host offers: Landlock where the kernel enables it, else
  a mount namespace of the cell's own where the harness runs as root. Which one is decided
  here, once per process, by *running* the in-cell code's probe (it confines a throw-away
  process and checks that a removal outside is refused and a write inside is not), so what
  is said is what was seen to hold. `HARNESS_CONFINEMENT` chooses: `auto` (the default: the
  first that holds), `landlock`, `mount-namespace`, or `off` (none). Only the cells an engine
  is told to confine are (`Engine.confine`: reduce's candidates); a `run` cell runs the
  user's code with the user's rights, as the user runs it.
- **docker**: every cell's container is its confinement: a read-only root, writes only in
  its mounted cell folder, its `/tmp` tmpfs and the compile cache; nothing of the host is
  seen but what is mounted.

Every result says which confinement its cell had (`exit.confinement`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness import SOURCE
from harness.errors import UserError
from harness.workloads.protocol import ENV_CONFINE, ENV_DATA_DIR

VARIABLE = "HARNESS_CONFINEMENT"
MECHANISMS = ("landlock", "mount-namespace")   # in the order `auto` tries them (workloads/confine.py)
CHOICES = ("auto", *MECHANISMS, "off")
PROBE_SECONDS = 60
# The harness's own caches a cell is given (caches.py), by the variable that names each: a
# compile cache's folder is its stack's key folder (it holds the `jax` and `cuda` entries).
CACHE_FOLDERS = {ENV_DATA_DIR: False, "JAX_COMPILATION_CACHE_DIR": True, "CUDA_CACHE_PATH": True}


@dataclass(frozen=True)
class Offer:
    """A confinement for a cell's writes: `how` (a mechanism of workloads/confine.py, or None:
    none), `why` (none: why not, in words), and what the probe saw (`abi`: Landlock's ABI
    version; `gaps`: what this mechanism cannot deny here)."""

    how: str | None
    why: str = ""
    abi: int | None = None
    gaps: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        """The confinement in a few words, for the line reduce prints before it starts."""
        if self.how == "landlock":
            return f"Landlock (ABI {self.abi})"
        if self.how == "mount-namespace":
            return "a mount namespace of their own, every other mount read-only"
        return f"none ({self.why})"

    def variables(self, writable: list[str]) -> dict[str, str]:
        """What the cell process is given to confine itself (nothing when unconfined)."""
        if self.how is None:
            return {}
        return {ENV_CONFINE: json.dumps({"how": self.how, "writable": writable})}

    def record(self, writable: list[str]) -> dict:
        """`exit.confinement` of a cell of a process engine. The cell refuses to run the user's
        code when it cannot apply what it was asked, so this is what a cell that ran had."""
        if self.how is None:
            return {"how": "none", "why": self.why}
        out = {"how": self.how, "writable": writable,
               "also": ["/dev/shm (shared memory: temporary space)",
                        "device files (/dev) and the kernel's process files (/proc), written in place "
                        "(none created or removed)"],
               "no_new_privileges": True, "gaps": list(self.gaps)}
        if self.abi is not None:
            out["abi"] = self.abi
        return out


NOT_ASKED = Offer(None, "not asked: a cell writes wherever the user running the harness can (reduce confines "
                        "its candidates)")
UNCONFINED = Offer(None, "--unconfined: reduce was told to run its candidates with the user's own rights")


@cache
def offered() -> Offer:
    """What this host offers a cell of a process engine (HARNESS_CONFINEMENT's choice, or the
    first mechanism whose probe holds), decided once per process."""
    choice = os.environ.get(VARIABLE, "").strip().lower() or "auto"
    if choice not in CHOICES:
        raise UserError(f"{VARIABLE}={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "off":
        return Offer(None, f"{VARIABLE}=off")
    whys = []
    for how in MECHANISMS if choice == "auto" else (choice,):
        seen = probe(how)
        if "unavailable" not in seen:
            return Offer(how, abi=seen.get("abi"), gaps=tuple(seen.get("gaps") or ()))
        whys.append(f"{how}: {seen['unavailable']}")
    return Offer(None, "; ".join(whys))


def probe(how: str) -> dict:
    """Run workloads/confine.py's probe for `how` in a process of its own: what it applied, or
    {"unavailable": why}."""
    workloads = SOURCE  # holds the `workloads` package
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(workloads),
           "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory(prefix="harness-confine-") as folder:
        try:
            proc = subprocess.run([sys.executable, "-m", "workloads.confine", how, folder], env=env,
                                  capture_output=True, text=True, timeout=PROBE_SECONDS, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"unavailable": f"the probe did not run ({exc})"}
    try:
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"unavailable": f"the probe failed (exit {proc.returncode}: {last[:200]})"}
    return seen if isinstance(seen, dict) else {"unavailable": "the probe answered nonsense"}


def writable(workdir: Path, scratch: str, variables: dict[str, str]) -> list[str]:
    """The folders a confined cell of a process engine may write: its own folder, its temp
    folder (its home is inside it) and the harness's caches it was given."""
    out = [str(workdir), str(scratch)]
    for name, keyed in CACHE_FOLDERS.items():
        if variables.get(name):
            out.append(str(Path(variables[name]).parent if keyed else Path(variables[name])))
    return list(dict.fromkeys(out))


def container(volumes: dict, own: str) -> dict:
    """`exit.confinement` of a Docker cell: what its container lets it write (`volumes`: its
    docker-py mounts; `own`: where its cell folder is mounted)."""
    shared = sorted(v["bind"] for v in volumes.values() if v.get("mode") == "rw")
    return {"how": "container",
            "writable": [f"{b} (its cell folder)" if b == own else b for b in shared] + ["/tmp (a tmpfs of its own)"],
            "read_only": "the image's root, the workloads and the user's code; nothing else of the host is seen",
            "no_new_privileges": True, "capabilities": []}


def for_reduce(engine, unconfined: bool) -> tuple[Offer, str]:
    """The confinement reduce's candidates get on `engine`, and the line that says so before
    the first runs. None on a process engine is a UserError (exit 2) unless the user said
    `--unconfined`: a candidate may run a branch the script never took."""
    if engine.confines_cells:
        return NOT_ASKED, ("candidates are confined by their containers: a read-only root, writes only in each "
                           "cell's folder, its /tmp and the compile cache"
                           + (" (--unconfined changes nothing here)" if unconfined else ""))
    if unconfined:
        return UNCONFINED, ("[yellow]candidates are not confined[/] (--unconfined): each may write, and delete, "
                            "whatever you can")
    offer = offered()
    if offer.how is None:
        raise UserError(f"candidates cannot be confined on this host ({offer.why}); a candidate may run a branch "
                        "your script never took (one that deletes or overwrites files): use --engine docker, or "
                        "pass --unconfined to run them with your own rights")
    gaps = f"; not denied here: {'; '.join(offer.gaps)}" if offer.gaps else ""
    return offer, (f"candidates are confined with {offer.words}: each writes only in its own cell folder, its "
                   f"temp folder and the harness's caches; everything stays readable{gaps}")
