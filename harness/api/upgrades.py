"""`upgrade` as a function: how far a project's packages can move up, each blocker with its
evidence -- what ``harness upgrade`` does with its flags, a caller does with keyword arguments,
and gets the report back as a value (the dict ``upgrade.json`` holds, and the exit status the
verb would give).

The verb's course (harness/upgrade/course.py) reads its options as one namespace; this module
is the one place that namespace is made outside the command line, with the same defaults, so a
product built on upgrade (the verdict on a dependency bump) never spells a flag.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from harness.api.operations import _outputs, quiet
from harness.engines import CHOICES
from harness.errors import UserError

__all__ = ["UpgradeReport", "upgrade"]

@dataclass
class UpgradeReport:
    """What an upgrade left: the report (``upgrade.json``'s content), where it was written, and
    the exit status the verb gives it (0: every target holds, together; 1: something blocks)."""
    report: dict
    markdown: Path
    json: Path
    exit_code: int

    @property
    def packages(self) -> dict[str, dict]:
        """Per package searched, its answer: current, frontier, target, holds, blocker, tested."""
        return {p["package"]: p for p in self.report.get("packages", [])}


def upgrade(project: str | Path | None = None, *, script: str | None = None, script_args: Iterable[str] = (),
            factory: str | None = None, data: str | None = None, requirements: str | Path | None = None,
            matrix: str | Path | None = None, cell: str | None = None, packages: Iterable[str] = (),
            python_version: str | None = None, repeats: int | None = None, accuracy_drop: float | None = None,
            speed_drop: float | None = None, nightly: bool = False, reduce: bool = True, diverge: bool = True,
            budget: float | None = None, unconfined: bool = False, results: str | Path = "results",
            out: str | Path = "upgrade", offline: bool = False, engine: str = "auto",
            pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
            console: Console | None = None) -> UpgradeReport:
    """Run a project's pins (or a matrix cell's environment: `matrix` and `cell`) and the releases
    `packages` name (``NAME`` for its newest, ``NAME==VERSION`` for that one; default: the ML stack
    it pins) on its script or model factory; bisect each to the newest release that holds; gather
    each blocker's evidence; try the combined stack. Writes UPGRADE.md and upgrade.json under `out`."""
    from harness.investigate.reduce import DEFAULT_BUDGET  # deferred with the course: reduce's own default
    from harness.upgrade import course  # deferred: the course loads the index, the runner and the search

    if engine not in CHOICES:
        raise UserError(f"engine {engine!r} is not one of {', '.join(CHOICES)}")
    if repeats is not None and not (isinstance(repeats, int) and 1 <= repeats <= 100):
        raise UserError(f"repeats expects a whole number from 1 to 100, got {repeats!r}")
    packages = [packages] if isinstance(packages, str) else list(packages)
    args = SimpleNamespace(
        project=None if project is None else str(project),
        requirements=None if requirements is None else str(requirements),
        script=script, args=list(script_args) or None, factory=factory, data=data,
        matrix=None if matrix is None else str(matrix), cell=cell, package=packages, python_version=python_version,
        repeats=repeats, accuracy_drop=accuracy_drop, speed_drop=speed_drop, nightly=nightly, no_reduce=not reduce,
        no_diverge=not diverge, budget=DEFAULT_BUDGET if budget is None else budget, unconfined=unconfined,
        results=str(results), out=str(out),
        offline=offline, engine=engine, python=[f"{v}={p}" for v, p in (pythons or {}).items()], ca_bundle=ca_bundle)
    with _outputs(results=results, out=out):
        code = course.run(args, console or quiet())
    md, js = Path(out) / "UPGRADE.md", Path(out) / "upgrade.json"
    return UpgradeReport(json.loads(js.read_text()), md, js, code)
