"""From the checked entries to cells: every environment x workload x
parallelism x batch size x repeat, kept or dropped by include / exclude, each
given its expectation -- bounded before any cell is built (MAX_CELLS, and the
pattern tests the rules may cost, MAX_MATCH_WORK)."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

from harness.cells import Cell, Environment, Limits, Parallelism, Workload
from harness.matrix.checker import _raise
from harness.matrix.rules import _Rules
from harness.matrix.schema import MAX_CELLS, MAX_MATCH_WORK
from harness.status import values


def _within_cell_limit(path: Path, count: int) -> None:
    if count > MAX_CELLS:
        _raise(path, [f"the matrix expands to {count} cells, more than {MAX_CELLS}; split it, or narrow it "
                      "with include/exclude"])


def _domains(environments: list[Environment], workloads: list[Workload], pars_of: dict[str, list[Parallelism]],
             batches: list, repeats: int) -> dict[str, list]:
    """Each field a rule may name, with the distinct values the cells take in it."""
    all_pars = [par for pars in pars_of.values() for par in pars]
    return {"environment": [e.name for e in environments], "workload": [w.name for w in workloads],
            "wrapper": sorted({p.wrapper for p in all_pars}), "devices": sorted({p.devices for p in all_pars}),
            "device_kind": sorted({p.device_kind for p in all_pars}), "feed": sorted({p.feed for p in all_pars}),
            "batch_size": list(dict.fromkeys(batches)), "repeat": list(range(repeats))}


def _matchers(path: Path, rule_lists: tuple[list, list, list], domains: dict[str, list]) -> list[_Rules]:
    """include, exclude and expect as masks over the domains, once their cost is known to be bounded."""
    work = _Rules.work(list(rule_lists), domains)
    if work > MAX_MATCH_WORK:
        _raise(path, [f"include / exclude / expect: {work} pattern tests (each field's distinct values x the "
                      f"patterns naming that field), more than {MAX_MATCH_WORK}; use fewer patterns, or one "
                      "pattern with wildcards for many values"])
    return [_Rules(r, domains) for r in rule_lists]


def _cells(raw: dict, environments: list[Environment], workloads: list[Workload],
           pars_of: dict[str, list[Parallelism]], batches: list, repeats: int, rules: list[_Rules],
           limits: Limits) -> list[Cell]:
    """Every combination the rules keep (any include matches, no exclude does), in the file's order."""
    includes = rules[0].rules
    cells = []
    for env in environments:
        env_masks = [r.mask("environment", env.name) for r in rules]
        for work_, par in itertools.product(workloads, pars_of[env.device]):
            par_masks = [m & r.mask("workload", work_.name) & r.mask("wrapper", par.wrapper)
                         & r.mask("devices", par.devices) & r.mask("device_kind", par.device_kind)
                         & r.mask("feed", par.feed) for m, r in zip(env_masks, rules, strict=True)]
            for batch, repeat in itertools.product(batches, range(repeats)):
                inc, exc, exp = (m & r.mask("batch_size", batch) & r.mask("repeat", repeat)
                                 for m, r in zip(par_masks, rules, strict=True))
                if (includes and not inc) or exc:
                    continue
                cells.append(Cell(environment=env, workload=work_, parallelism=par, batch_size=batch,
                                  epochs=raw.get("epochs", 1), repeat=repeat, seed=raw.get("seed", 1234),
                                  reseed=bool(raw.get("reseed", False)),
                                  limits=limits, expect=values.expectation(rules[2].every(exp))))
    return cells


def _distinct_cells(path: Path, cells: list[Cell]) -> None:
    """Some cells, each id once (the id names a result folder)."""
    counts = collections.Counter(c.id for c in cells)
    dupes = sorted(i for i, k in counts.items() if k > 1)
    if dupes:
        _raise(path, [f"cell id '{d}' occurs twice; give the entries distinct names" for d in dupes])
    if not cells:
        _raise(path, ["the matrix expands to no cells (check include/exclude)"])
