"""A matrix file from its bytes to its cells: ``load`` reads it safely
(``reading``), ``parse`` validates and expands it, step by step, each step in
the module named for what it checks. Every problem is collected (``checker``)
and reported at once, in the order of the steps below; a step that needs
sound input from those before it comes after a ``check.stop()``.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

from harness import chains, names
from harness.cells import Cell, Environment, Workload
from harness.errors import NothingReleasedYet
from harness.index import releases
from harness.matrix.checker import _Checker, _entries
from harness.matrix.environment import _plain_cells
from harness.matrix.expansion import _cells, _distinct_cells, _domains, _matchers, _within_cell_limit
from harness.matrix.ranges import _environments, _release_options, _watch_options
from harness.matrix.reading import read
from harness.matrix.rules import _checked_rules
from harness.matrix.schema import TOP_KEYS
from harness.matrix.settings import (
    _batch_sizes,
    _limits,
    _parallelism_list,
    _parallelisms,
    _run_settings,
    _slurm_section,
)
from harness.matrix.workload import _workload


@dataclass
class Matrix:
    path: Path
    name: str
    description: str
    sha256: str
    cells: list[Cell]
    slurm: dict = field(default_factory=dict)  # the validated `slurm:` section, as written
    resolver: releases.Resolver | None = None  # what its version ranges expanded to (None: it has none)
    watch_nightly: str | None = None  # `watch: {nightly: ...}`: "auto", a distribution's name, or None

    @property
    def environments(self) -> list[Environment]:
        seen: dict[str, Environment] = {}
        for cell in self.cells:
            seen.setdefault(cell.environment.name, cell.environment)
        return list(seen.values())



def load(path: str | Path, resolver: releases.Resolver | None = None,
         base: str | Path | None = None) -> Matrix:
    """Read, validate and expand a matrix file. `resolver` expands version ranges
    (``harness.index.releases``; by default from the cache or the index, without a record).
    `base`: the folder the user's code paths start from (default: the matrix file's folder; a
    Slurm task loads the submission's copy of the matrix with the original folder)."""
    path = Path(path)
    raw, sha256 = read(path)
    return parse(raw, path, sha256, resolver, base=base)


def parse(raw: dict, path: Path, sha256: str = "", resolver: releases.Resolver | None = None,
          base: str | Path | None = None) -> Matrix:
    """Validate a matrix's top-level mapping and expand it into cells: the steps, in the order
    their problems are reported."""
    check = _Checker(path, resolver, base)
    check.keys("", raw, TOP_KEYS, required=("environments", "workloads"))
    run_name = _run_name(check, raw, path)
    check.text("description", raw.get("description"))
    check.release_options = _release_options(check, raw.get("releases"))
    _watch_options(check, raw.get("watch"))
    _bind(resolver, run_name)
    envs = _entries(check, raw, "environments", _environments)
    if not envs and getattr(check.resolver, "not_yet", None) and not check.problems:
        raise NothingReleasedYet(path, check.resolver.not_yet)
    workloads = _entries(check, raw, "workloads", _workload)
    _distinct_names(check, envs, workloads)
    batches = _batch_sizes(check, raw)
    _run_settings(check, raw)
    rule_lists = _checked_rules(check, raw, envs)
    par_raw = _parallelism_list(check, raw)
    check.stop()

    repeats = raw.get("repeats", 1)
    _within_cell_limit(path, len(envs) * len(workloads) * len(par_raw) * len(batches) * repeats)
    pars_of = _parallelisms(check, par_raw, envs)
    rules = _matchers(path, rule_lists, _domains(envs, workloads, pars_of, batches, repeats))
    cells = _cells(raw, envs, workloads, pars_of, batches, repeats, rules, _limits(raw))
    _distinct_cells(path, cells)
    _plain_cells(check, cells, workloads)
    cells = chains.link(check, cells)
    check.stop()
    return Matrix(path=path, name=run_name, description=raw.get("description", ""),
                  sha256=sha256, cells=cells, slurm=_slurm_section(raw),
                  resolver=check.resolver if check.resolver and check.resolver.used else None,
                  watch_nightly=check.watch_nightly)


def _run_name(check: _Checker, raw: dict, path: Path):
    """The run's name: `name:`, else the file's name (it names the results folder)."""
    if "name" in raw:
        if isinstance(raw["name"], str):
            check.name("name", raw["name"])
        return raw["name"]
    if names.problem(path.stem):
        check.problem("", f"the file name {names.problem(path.stem)}; set 'name:'")
    return path.stem


def _bind(resolver: releases.Resolver | None, run_name) -> None:
    """A resolver given by the caller records its range expansions under the run's name."""
    if resolver is not None and isinstance(run_name, str) and not names.problem(run_name):
        resolver.bind(run_name)


def _distinct_names(check: _Checker, envs: list[Environment], workloads: list[Workload]) -> None:
    for what, items in (("environments", envs), ("workloads", workloads)):
        counts = collections.Counter(item.name for item in items)
        for name in sorted(n for n, k in counts.items() if k > 1):
            check.problem(what, f"two entries are named '{name}'; give them distinct 'name:' keys")
