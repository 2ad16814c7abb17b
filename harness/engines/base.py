"""What every engine offers: obtain an environment, run one cell in it."""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cells import Cell, Environment
from ..supervise import RawOutcome

# Variables every cell process gets, whatever the engine.
CELL_ENV = {
    "PYTHONFAULTHANDLER": "1",      # a segfault prints the Python stack to stderr
    "PYTHONUNBUFFERED": "1",        # logs reach the files before a crash, not after
    "PYTHONDONTWRITEBYTECODE": "1",  # the workloads folder may be read-only
    "PYTHONHASHSEED": "0",
}


def cache_dir() -> Path:
    """Where environments and bases are kept between runs."""
    explicit = os.environ.get("HARNESS_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tfkeras-harness"


@dataclass
class Prepared:
    """An environment ready to run cells, and how it was obtained."""

    environment: Environment
    provenance: dict
    handle: Any = None
    reused: bool = False


class Engine(ABC):
    name: str

    @abstractmethod
    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        """Build or reuse the environment; raise EnvironmentUnavailable if it cannot be had."""

    @abstractmethod
    def run(self, prepared: Prepared, cell: Cell, workdir: Path, workloads_root: Path) -> RawOutcome:
        """Run ``python -m workloads spec.json OUTDIR`` for one cell; never raise for a cell's failure."""

    def exec(self, prepared: Prepared, argv: list[str], workloads_root: Path, timeout: float,
             gpus: bool = False) -> tuple[int | None, str, str]:
        """Run the environment's ``python ARGV`` with the workloads importable; (exit code or
        None on timeout, stdout, stderr). Used for the GPU self-check."""
        raise NotImplementedError(f"the {self.name} engine cannot run commands")

    def close(self) -> None:  # noqa: B027 - engines with nothing to release need not override it
        """Release what the engine holds (containers, clients)."""


_BUILDKIT_PREFIX = re.compile(r"^#\d+ [\d.]+ ")
_NOT_THE_CAUSE = ("executor failed", "process ", "failed to solve", "ResolutionImpossible", "Ignored the following")


def pip_failure(log: str) -> str:
    """Why pip failed, in one line, from a venv log or a BuildKit build log.

    pip's first ERROR line names the conflict ("Cannot install A and B ...");
    its last one is a generic ResolutionImpossible link, and BuildKit adds its
    own wrappers after that. The lines under "The conflict is caused by:" are
    the part a user acts on, so they are kept.
    """
    lines = [_BUILDKIT_PREFIX.sub("", line).rstrip() for line in log.splitlines()]
    errors = [line.split("ERROR: ", 1)[1].strip() for line in lines if "ERROR: " in line]
    cause = next((e for e in errors if not e.startswith(_NOT_THE_CAUSE)), None)
    if cause is None:
        cause = errors[-1] if errors else next((ln for ln in reversed(lines) if ln.strip()), "pip failed")
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        because = []
        for line in lines[start:]:
            if not line.startswith("    "):
                break
            because.append(line.strip())
        if because:
            cause += " (" + "; ".join(because) + ")"
    return cause[:400]
