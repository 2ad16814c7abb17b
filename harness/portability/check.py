"""`portability check FILE`: a user's own model file, loaded on every stack they name.

The file (an HDF5 model, a `.keras` archive, a SavedModel folder) is offered by one stack -- the
one that wrote it, when the user says which (`--writer`), else the first -- as a writer's files
are in the grid, and every stack reads it by every way its users would try. The offering cell
reads it where the user keeps it (so it runs on a process engine: venv or local) and hands a
copy on; the user's folder is only read. With no reference
inputs, each reader predicts on sixteen inputs drawn with one seed from the model's own input
shape, so the readers compare with each other: against the writer's stack when it loads its own
file, else the first stack that loads it. The user's layers come from `--custom FILE.py` (every
class and function it defines, as `custom_objects=`), their inputs from `--inputs FILE.npy`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from harness.errors import UserError
from harness.matrix import Matrix
from harness.portability import grid, judge
from harness.portability.publish import gather

OFFER = "offer"
USER = "user"   # the writer's and the model's name in the readers' observations


def digest(model: Path, custom: Path | None, inputs: Path | None = None) -> str:
    """What the user's file (and their layers and inputs) hold, checked first: a cell's spec names
    it, so an edited file is a new check while the same file resumes."""
    if not model.exists():
        raise UserError(f"{model}: no such file or folder")
    if model.is_dir() and not (model / "saved_model.pb").is_file():
        raise UserError(f"{model}: a folder is read as a SavedModel, and holds no saved_model.pb")
    if custom is not None and (not custom.is_file() or custom.suffix != ".py"):
        raise UserError(f"{custom}: --custom takes a Python file that defines the model's own layers")
    h = hashlib.sha256()
    for path in sorted([model, *(model.rglob("*") if model.is_dir() else [])]):
        if path.is_file():
            h.update(path.relative_to(model.parent).as_posix().encode() + path.read_bytes())
    if custom is not None:
        h.update(custom.read_bytes())
    if inputs is not None:
        if not inputs.is_file() or inputs.suffix != ".npy":
            raise UserError(f"{inputs}: --inputs takes a NumPy array file (.npy) of the model's inputs")
        h.update(b"inputs" + inputs.read_bytes())
    return h.hexdigest()[:16]


def matrix_doc(stacks: Path | dict, model: Path, custom: Path | None, content: str, names: list[str],
               writer: str | None, inputs: Path | None = None) -> dict:
    """The check's matrix: the writer's stack offers the file (the harness's own script reads it
    where the user keeps it, and hands a copy on), every stack reads it. `stacks`: a stacks file,
    or its contents made in code (``environments:`` and the rest, as `harness verdict` makes the
    base's and the head's)."""
    raw = stacks if isinstance(stacks, dict) else grid.read(stacks)
    called = stacks.name if isinstance(stacks, Path) else raw.get("name", "stacks")
    offerer = writer or (names[0] if names else None)
    args = [OFFER, str(model), content, str(custom) if custom else "-", str(inputs) if inputs else "-"]
    workloads = [{"name": OFFER, "script": str(grid.SCRIPT), "path": str(grid.SCRIPTS), "args": args}]
    doc = {"name": "portability-check", "description": f"{model.name} loaded on each stack of {called}",
           "environments": raw["environments"], "workloads": workloads,
           "timeouts": raw.get("timeouts") or {"wall": 900, "progress": 600}}
    if names:
        workloads.append({"name": grid.READER, "script": str(grid.SCRIPT), "path": str(grid.SCRIPTS),
                          "args": [grid.READER], "needs": {"workload": OFFER, "environment": offerer, "as": USER}})
        doc["include"] = [{"environment": offerer, "workload": OFFER},
                          {"environment": names, "workload": grid.READER}]
    return doc


def write_matrix(stacks: Path | dict, model: Path, custom: Path | None, writer: str | None, out: Path,
                 inputs: Path | None = None) -> Matrix:
    """The check's matrix, written to `out` and loaded (the stacks' names known once their ranges
    are expanded, as the grid's)."""
    from harness import api  # deferred: the API imports the products' machinery below it

    content = digest(model, custom, inputs)
    first = api.validate_matrix(matrix_doc(stacks, model, custom, content, [], None, inputs), out, results=None)
    names = [env.name for env in first.environments]
    if writer is not None and writer not in names:
        where = stacks if isinstance(stacks, Path) else "the stacks"
        raise UserError(f"--writer {writer}: no such stack in {where} (its stacks: {', '.join(names)})")
    return api.matrix_from_dict(matrix_doc(stacks, model, custom, content, names, writer, inputs), out,
                                results=None)


def compare(results: Path, order: list[str], writer: str | None) -> dict:
    """Per reader: the verdict, the way that loaded, the difference from the reference reader.
    The reference: the writer's stack when it loads the file, else the first in `order` that does."""
    gathered = gather(results, grid=False)
    loads, cells, folders = gathered.loads, gathered.cells, gathered.folders
    seen = {}
    for reader in order:
        if reader not in loads:
            continue
        offered = (loads[reader].get("writers") or {}).get(USER) or {}
        formats = (offered.get("models") or {}).get(USER) or {}
        fmt, entry = next(iter(formats.items()), (None, {"unknown": "the file was not handed to this reader"}))
        loaded = [t for t in entry.get("tried") or [] if t.get("loaded")]
        folder = folders[(reader, USER)]
        predictions = next((folder / "artifacts" / t["predictions"] for t in loaded if t.get("predictions")), None)
        seen[reader] = {"format": fmt, "entry": entry, "loaded": loaded, "cell": cells[(reader, USER)],
                        "custom_error": offered.get("custom_error"),
                        "predictions": np.load(predictions) if predictions else None}
    loading = [r for r in order if r in seen and seen[r]["predictions"] is not None]
    reference = writer if writer in loading else (loading[0] if loading else None)
    answers = {}
    for reader, got in seen.items():
        entry = got["entry"]
        if "unknown" in entry:
            answers[reader] = {"verdict": judge.UNKNOWN, "reason": entry["unknown"]}
        elif not got["loaded"]:
            answers[reader] = {"verdict": judge.REFUSES, "errors": {t["way"]: t.get("error") for t in entry["tried"]}}
        else:
            ref = seen[reference]["predictions"]
            mine = got["predictions"]
            diff = (float(np.max(np.abs(mine.astype("float64") - ref.astype("float64"))))
                    if mine is not None and mine.shape == ref.shape else None)
            same = diff is not None and diff <= judge.FLOOR
            answers[reader] = {"verdict": judge.SAME if same else judge.DIFFERS, "way": got["loaded"][0]["way"],
                               "max_abs_diff": diff, "against": reference}
        answers[reader].update(cell=got["cell"], format=got["format"])
        if got["custom_error"]:  # the user's --custom file does not import on this stack
            answers[reader]["custom_error"] = got["custom_error"]
    return {"reference": reference, "readers": answers, "missing": gathered.missing}
