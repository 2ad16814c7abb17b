"""The other input: a cell of a matrix (`--matrix FILE --cell GLOB`). The baseline is that
cell's environment and workload exactly as the matrix defines them -- its pins, keras_api,
backend, Python, packages, variables, and the cell's parallelism, batch size, epochs, seed and
timeouts -- written back as entries of the matrix `upgrade` writes, so that the search, the
evidence and the report's commands run the very same cells; the packages to move are the ML
stack that environment pins (or `--package`)."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.cells import Cell, Environment, Workload
from harness.errors import UserError
from harness.run.selection import select as chosen
from harness.upgrade.project import Pins

# The project form's inputs: none of them goes with --matrix (None / [] / False: not given)
PROJECT_FORM = {"project": "PROJECT", "requirements": "--requirements", "script": "--script", "args": "--args",
                "factory": "--factory", "data": "--data", "python_version": "--python-version"}


def check_form(args) -> bool:
    """True for the matrix form; one line (exit 2) when the two forms are mixed or half given."""
    if not args.matrix and not args.cell:
        return False
    if not (args.matrix and args.cell):
        raise UserError("--matrix FILE and --cell GLOB go together: name the matrix and the cell to start from")
    mixed = [flag for key, flag in PROJECT_FORM.items() if getattr(args, key)]
    if mixed:
        raise UserError(f"--matrix/--cell or a project ({', '.join(mixed)}), not both: the cell's environment and "
                        "workload are the baseline")
    return True


def select(m, pattern: str) -> list[Cell]:
    """The cells `pattern` names (as `run --cell`), all of one environment."""
    cells = chosen(m.cells, [pattern])
    if not cells:
        shown = ", ".join(c.id for c in m.cells[:3]) + (", ..." if len(m.cells) > 3 else "")
        raise UserError(f"--cell {pattern!r}: no cell of {m.path} matches (its cells: {shown or 'none'})")
    envs = list(dict.fromkeys(c.environment.name for c in cells))
    if len(envs) > 1:
        raise UserError(f"--cell {pattern!r}: cells of {len(envs)} environments ({', '.join(envs[:4])}); "
                        "the baseline is one environment: narrow the glob (e.g. 'ENV/*')")
    return cells


def environment(env: Environment) -> dict:
    """The environment entry, as the matrix defines it (what a range chose is a pin here)."""
    out: dict = {"name": env.name, "python": env.python}
    for key in ("tensorflow", "tensorflow_package", "keras_api", "keras", "backend", "base_image"):
        if getattr(env, key) is not None:
            out[key] = getattr(env, key)
    if env.device != "cpu":
        out["device"] = env.device
    out["packages"] = list(env.packages)
    if env.force:
        out["force"] = list(env.force)
    if env.env:
        out["env"] = dict(env.env)
    return out


def pins(env: Environment, source: str) -> Pins:
    """What the environment pins exactly, by package name: TensorFlow (its distribution), Keras
    (tf-keras behind tf.keras under keras_api tf_keras), and each `NAME==VERSION` of packages."""
    got = Pins(source, {})  # type: ignore[arg-type]  # a label, where the project form has a file

    def put(name: str, version: str) -> None:
        got.pins[canonicalize_name(name)], got.names[canonicalize_name(name)] = version, name
    if env.tensorflow:
        put("tensorflow-cpu" if env.tensorflow_package == "tensorflow-cpu" else "tensorflow", env.tensorflow)
    if env.keras:
        put("tf-keras" if env.api == "tf_keras" else "keras", env.keras)
    for text in env.packages:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
        if len(exact) == 1 and len(req.specifier) == 1 and not req.extras:
            put(req.name, exact[0])
    return got


def workload(work: Workload) -> dict:
    """The workload entry: its parameters as the matrix expanded them, the user's code by its
    absolute folder (the written matrix lies elsewhere)."""
    params = {k: v for k, v in work.params.items() if k != "code"}
    for key in ("needs", "after"):
        if key in params:
            raise UserError(f"workload {work.name!r} is chained ({key}:): upgrade starts from a cell that runs alone")
    entry = {"name": work.name, "model": work.model, **params}
    if work.model in ("script", "user") and work.code is not None:
        folder = Path(work.code.source).resolve()
        entry["path"] = str(folder)
        if work.model == "script":
            entry["script"] = str(folder / params["script"])
            if not entry.get("args"):
                entry.pop("args", None)
    return entry


def settings(cells: list[Cell], repeats: int | None) -> dict:
    """The matrix's settings for these cells: their batch sizes, parallelism, epochs, seed,
    timeouts and repeats (`--repeats` replaces the last)."""
    first = cells[0]
    pars = []
    for c in cells:
        p = c.parallelism
        entry = {"wrapper": p.wrapper, "devices": p.devices, "device_kind": p.device_kind,
                 **({"ratios": list(p.ratios)} if p.ratios else {}), **({"feed": p.feed} if p.feed != "arrays" else {})}
        if entry not in pars:
            pars.append(entry)
    out = {"parallelism": pars, "batch_sizes": sorted({c.batch_size for c in cells}), "epochs": first.epochs,
           "seed": first.seed, "timeouts": {"wall": first.limits.wall, "progress": first.limits.progress}}
    if first.limits.memory:
        out["memory_limit"] = first.limits.memory
    count = repeats or max(c.repeat for c in cells) + 1
    if count > 1:
        out["repeats"] = count
    return out


def kept(cells: list[Cell]) -> set[str]:
    """What a cell is apart from its environment and repeat: the written matrix's cells of any
    of its environments that the glob did not name (its cross product) are left out."""
    return {part(c) for c in cells}


def part(cell: Cell) -> str:
    return cell.id.split("/", 1)[1].rsplit("/", 1)[0]
