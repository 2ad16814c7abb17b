"""The model files a project keeps, on the bump's two stacks: does the head load each one and
predict the same as the base, predict differently, or refuse it -- and by which way of loading?

The judge is the portability grid's (`portability check`): the base stack offers the file (it
is the stack the project saved it with, or reads it with today), every stack reads it by every
way its users would try -- `load_model`, `compile=False`, tf-keras behind TF_USE_LEGACY_KERAS,
`TFSMLayer` for a SavedModel -- and predicts on the same inputs. Where the head moves TensorFlow
to 2.16 or later under a Keras 2 project, the tf-keras road (the head with tf-keras behind
tf.keras) is read too, so the verdict can say which road keeps the file working.

A weights file (`*.weights.h5`) holds no architecture: only the project's own code reads it, so
the script's run is its check, and it is listed as such rather than guessed at."""

from __future__ import annotations

import subprocess
from pathlib import Path

from packaging.version import Version

from harness.portability import check, judge
from harness.upgrade import plan
from harness.upgrade.evidence import KERAS3_TENSORFLOW
from harness.upgrade.project import Pins
from harness.verdict import BREAKS, CANNOT_JUDGE, CHANGES, SAFE

SUFFIXES = (".h5", ".hdf5", ".keras")
WEIGHTS = (".weights.h5",)
SKIPPED = {".git", ".venv", "venv", "node_modules", "__pycache__", ".nox", ".tox"}
MAX_FILES = 8            # a project with more: the first, by path, and the rest listed as not checked
BASE, HEAD, HEAD_TF_KERAS = "base", "head", "head-tf_keras"


def found(folder: Path, skip: list[Path]) -> list[Path]:
    """The model files under `folder`, by path: the files git tracks there where it is a
    repository (what the project keeps), else every file; SavedModel folders by their
    saved_model.pb. Folders in `skip` (the verdict's own output) and virtualenvs are passed over."""
    listed = subprocess.run(["git", "-C", str(folder), "ls-files", "-z"], capture_output=True, text=True)
    paths = ([folder / p for p in listed.stdout.split("\0") if p] if listed.returncode == 0
             else [p for p in folder.rglob("*") if p.is_file()])
    skip = [s.resolve() for s in skip]
    out = set()
    for path in paths:
        rel = path.relative_to(folder)
        if any(part in SKIPPED for part in rel.parts) or any(path.resolve().is_relative_to(s) for s in skip):
            continue
        if path.name == "saved_model.pb":
            out.add(path.parent)
        elif path.name.lower().endswith(SUFFIXES):
            out.add(path)
    return sorted(out)


def is_weights(path: Path) -> bool:
    return path.name.lower().endswith(WEIGHTS)


def stacks(base: Pins, head: Pins, python: str) -> list[dict]:
    """The stacks the files are read on: the base (the offering stack), the head, and the
    head's tf-keras road where the head makes tf.keras Keras 3 under a Keras 2 base."""
    b = {**plan.environment(base, python, []), "name": BASE}
    h = {**plan.environment(head, python, []), "name": HEAD}
    out = [b, h]
    tf_old, tf_new = b.get("tensorflow"), h.get("tensorflow")
    if (tf_old and tf_new and Version(tf_old) < KERAS3_TENSORFLOW <= Version(tf_new)
            and "keras_api" not in h and "backend" not in h):
        out.append({**h, "name": HEAD_TF_KERAS, "keras_api": "tf_keras"})
    return out


def word(reference: str | None, head: dict | None) -> str:
    """The file's part of the verdict: how the head reads it against the base. A file the base
    does not load either cannot be judged by the bump."""
    if reference is None or not head:
        return CANNOT_JUDGE
    return {judge.SAME: SAFE, judge.DIFFERS: CHANGES, judge.REFUSES: BREAKS}.get(head["verdict"], CANNOT_JUDGE)


def verdict_of(answer: dict, reader: str) -> dict:
    """One reader's answer, in the verdict's words."""
    a = answer["readers"].get(reader) or {"verdict": judge.UNKNOWN, "reason": "this stack did not read it"}
    said = {"verdict": a["verdict"], "cell": a.get("cell")}
    if a["verdict"] in (judge.SAME, judge.DIFFERS):
        said.update(way=a.get("way"), max_abs_diff=a.get("max_abs_diff"), against=a.get("against"))
    elif a["verdict"] == judge.REFUSES:
        said["errors"] = {w: (e or "")[:300] for w, e in (a.get("errors") or {}).items()}
    else:
        said["reason"] = a.get("reason")
    return said


def checked(files: list[Path], project: Path, base: Pins, head: Pins, python: str, engine: str, results: Path,
            console) -> list[dict]:
    """Each file read on the base, the head (and the tf-keras road): one entry per file."""
    from harness import api  # deferred: the runner, when a file is checked

    # the offering cell reads the file where the project keeps it: a process engine, as `portability check`
    engine = "venv" if engine in ("auto", "docker") else engine
    envs = stacks(base, head, python)
    both = {"name": "bump-stacks", "environments": envs}
    order = [e["name"] for e in envs]
    entries = []
    for i, model in enumerate(files):
        rel = model.relative_to(project)   # as the project names it
        if is_weights(model):
            entries.append({"file": str(rel), "kind": "weights",
                            "note": "not read alone: a weights file holds no architecture; the project's own "
                                       "code reads it, so its script's run is its check"})
            continue
        if i >= MAX_FILES:
            entries.append({"file": str(rel), "kind": "model", "note": f"not checked: past the first {MAX_FILES}"})
            continue
        where = results / "models" / f"{i:02d}-{model.name}"
        m = check.write_matrix(both, model.resolve(), None, BASE, where / "check.yaml")
        api.run(m, results=where, engine=engine, console=console)
        answer = check.compare(where / m.name, order, BASE)
        readers = {r: verdict_of(answer, r) for r in order}
        entries.append({"file": str(rel), "kind": "model", "reference": answer["reference"], "readers": readers,
                        "verdict": word(answer["reference"], readers.get(HEAD))})
    return entries
