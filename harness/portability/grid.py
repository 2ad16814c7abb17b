"""The portability grid as an ordinary matrix: a writer cell per stack, and a reader cell per
(reader, writer) pair, handed that writer's files (chains' ``needs:``).

One cell per pair, not one reader cell reading every writer: a new release then costs its own row
and column (2N + 1 cells) and every finished pair is kept, where a reader of all writers would be a
new cell -- all of it run again -- each time the grid grows. The pairs stay cheap: a reader's cells
fork from its stack's warm launcher, which has imported the framework once; a pair whose writer
wrote nothing is decided from the writer's result, without launching."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import yaml

from harness.errors import UserError
from harness.matrix import Matrix

SCRIPTS = Path(__file__).resolve().parent / "scripts"
SCRIPT = SCRIPTS / "portable.py"
WRITER, READER = "save", "load"
NAME = "portability"
STACKS_KEYS = ("name", "description", "environments", "timeouts", "releases")


def reader_workload(writer: str) -> str:
    """The workload that reads `writer`'s files, on every stack."""
    return f"{READER}-{writer}"


def is_reader(workload: str) -> bool:
    """A reader's workload: the grid's per-writer ones, or a check's single `load`."""
    return workload == READER or workload.startswith(READER + "-")


def matrix_doc(stacks: Path, names: list[str]) -> dict:
    """The matrix for the stacks file's environments, named `names` in its order: every stack
    writes, and every stack reads what each one wrote -- its own files too, which measures the
    floor a difference is judged against. With no names yet, the writers alone."""
    raw = read(stacks)
    workloads = [{"name": WRITER, "script": str(SCRIPT), "path": str(SCRIPTS), "args": [WRITER]}]
    for name in names:
        workloads.append({"name": reader_workload(name), "script": str(SCRIPT), "path": str(SCRIPTS),
                          "args": [READER], "needs": [{"workload": WRITER, "environment": name, "as": name}]})
    doc = {
        "name": raw.get("name") or NAME,
        "description": raw.get("description") or f"model files saved on each stack of {stacks.name}, loaded on each",
        "environments": raw["environments"],
        "workloads": workloads,
        "timeouts": raw.get("timeouts") or {"wall": 900, "progress": 600},
        **({"releases": raw["releases"]} if "releases" in raw else {}),
    }
    return doc


def among(cells: list, patterns: list[str] | None, crossing: bool = False) -> list:
    """The grid's cells within the stacks `patterns` name (globs on a stack's name): their writers,
    and the pairs both of whose ends they name -- a slice of the grid that later slices extend.
    `crossing`: the pairs with either end named instead -- those stacks' row and column against the
    whole grid, what a new release costs (the other stacks' writers are not in it: their files are
    the ones a finished grid has)."""
    if not patterns:
        return list(cells)

    def named(stack: str) -> bool:
        return any(fnmatch.fnmatchcase(stack, p) for p in patterns)

    def wanted(c) -> bool:
        ends = [named(c.environment.name), *(named(need["cell"].split("/")[0]) for need in c.needs)]
        return any(ends) if crossing and c.needs else all(ends)
    return [c for c in cells if wanted(c)]


def read(stacks: Path) -> dict:
    try:
        raw = yaml.safe_load(stacks.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{stacks}: cannot read the stacks file ({type(exc).__name__})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("environments"), list) or not raw["environments"]:
        raise UserError(f"{stacks}: environments: a list of stacks (as a matrix's environments) is required")
    unknown = sorted(set(raw) - set(STACKS_KEYS))
    if unknown:
        raise UserError(f"{stacks}: {unknown[0]}: not a key of a stacks file ({', '.join(STACKS_KEYS)}); "
                        "the workloads are the grid's own")
    return raw


def write(stacks: Path, out: Path) -> Matrix:
    """The grid's matrix, written to `out` and loaded: its readers' needs named as the matrix
    loader names the environments (a version range's stacks are known once it is expanded). A bad
    environment is the API's `MatrixError`, naming `out`'s key; each run expands the stacks' ranges
    afresh, as the stacks file says them today."""
    from harness import api  # deferred: the API imports the products' machinery below it

    names = [env.name for env in api.validate_matrix(matrix_doc(stacks, []), out, results=None).environments]
    return api.matrix_from_dict(matrix_doc(stacks, names), out, results=None)
