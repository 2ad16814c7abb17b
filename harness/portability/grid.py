"""The portability grid as an ordinary matrix: a writer and a reader cell per stack, each reader
handed every writer's files (chains' ``needs:``), so one warm process per reader loads them all."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.errors import UserError
from harness.matrix import load

SCRIPTS = Path(__file__).resolve().parent / "scripts"
SCRIPT = SCRIPTS / "portable.py"
WRITER, READER = "save", "load"
NAME = "portability"


def matrix_text(stacks: Path, names: list[str]) -> str:
    """The matrix for the stacks file's environments, named `names` in its order: every stack
    writes, and every stack reads what each one wrote -- its own files too, which measures the
    floor a difference is judged against. With no names yet, the writers alone."""
    raw = read(stacks)
    workloads = [{"name": WRITER, "script": str(SCRIPT), "path": str(SCRIPTS), "args": [WRITER]}]
    if names:
        # optional: a writer that fails (a stack that no longer installs, say) costs its own column,
        # never every reader -- each reader reads the writers that wrote
        needs = [{"workload": WRITER, "environment": name, "as": name, "optional": True} for name in names]
        workloads.append({"name": READER, "script": str(SCRIPT), "path": str(SCRIPTS), "args": [READER],
                          "needs": needs})
    doc = {
        "name": raw.get("name") or NAME,
        "description": raw.get("description") or f"model files saved on each stack of {stacks.name}, loaded on each",
        "environments": raw["environments"],
        "workloads": workloads,
        "timeouts": raw.get("timeouts") or {"wall": 900, "progress": 600},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def read(stacks: Path) -> dict:
    try:
        raw = yaml.safe_load(stacks.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{stacks}: cannot read the stacks file ({type(exc).__name__})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("environments"), list) or not raw["environments"]:
        raise UserError(f"{stacks}: environments: a list of stacks (as a matrix's environments) is required")
    unknown = sorted(set(raw) - {"name", "description", "environments", "timeouts"})
    if unknown:
        raise UserError(f"{stacks}: {unknown[0]}: not a key of a stacks file (name, description, environments, "
                        "timeouts); the workloads are the grid's own")
    return raw


def write(stacks: Path, out: Path) -> Path:
    """Write the grid's matrix to `out`, its readers' needs named as the matrix loader names the
    environments, and return it. A bad environment is the loader's error, naming `out`'s key."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(matrix_text(stacks, []))
    names = [env.name for env in load(out).environments]
    out.write_text(matrix_text(stacks, names))
    return out
