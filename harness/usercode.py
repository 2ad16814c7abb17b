"""The user's own code in a cell, host side: checked, hashed, staged and carried.

A matrix workload may name the user's code instead of a built-in model: a
model factory (``model: user``, ``build: "mod:fn"``, ``data: "mod:fn"``,
``path: ./folder``) or a script (``script: ./repro/bug.py``). The folder that
holds it is hashed when the matrix is loaded (the hash goes into the cell's
spec, so changing the code re-runs exactly the cells that ran it, and results
of different code are never compared as if equal) and staged, once per hash,
under the staged workloads tree (``.workloads/<hash>/user/<code hash>/``).
That tree is what every engine already carries: mounted read-only in
containers, on ``PYTHONPATH`` for virtualenvs and the local engine, on the
shared results folder for Slurm, and copied into repro bundles. So the user's
code is never baked into an image, and a bundle replays with nothing else.

The in-environment side of this is ``workloads/user.py``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

STAGE_DIR = "user"          # under the staged workloads root, beside the `workloads` package
MAX_FILES = 5_000           # a code folder is a few files; a data lake by mistake stops here
MAX_BYTES = 256 << 20
# Never part of the code: caches, environments, and what the harness itself writes (a results run
# folder, known by its `.locks` / `.workloads`, wherever --results put it: hashing it would change
# the code's hash at every run). Hidden folders (.git, .venv, .nox, ...) are skipped too.
SKIPPED = {"__pycache__", "venv", "results", "bundles", "site", "node_modules"}
RUN_MARKERS = (".locks", ".workloads")
ENTRY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class CodeProblem(Exception):
    """The user's code cannot be used as named; the message says why (one line)."""


@dataclass(frozen=True)
class Code:
    """A folder of the user's code, by content."""

    source: Path        # the folder on this host (resolved)
    sha256: str         # of every file's relative path and bytes
    outside: bool       # the folder lies outside the matrix file's folder tree
    files: int
    size: int

    @property
    def dir(self) -> str:
        """Where it is staged, relative to the staged workloads root (and a bundle's root)."""
        return f"{STAGE_DIR}/{self.sha256[:16]}"

    def spec(self) -> dict:
        return {"sha256": self.sha256, "dir": self.dir, "outside_matrix_folder": self.outside}


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED and not d.startswith(".")
                             and not d.endswith(".egg-info")
                             and not any(os.path.isdir(os.path.join(dirpath, d, m)) for m in RUN_MARKERS))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith((".pyc", ".pyo")) or not path.is_file():
                continue
            out.append(path)
            if len(out) > MAX_FILES:
                raise CodeProblem(f"{root} holds more than {MAX_FILES} files; point 'path:' at the folder "
                                  "with the code only")
    return out


def kind(path: Path) -> str | None:
    """'file', 'folder', 'other', or None when nothing (usable) is there; never raises
    (a matrix is untrusted input: a NUL byte or a 300-character name is an answer, not a crash)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def load(folder: Path, matrix_dir: Path) -> Code:
    """Hash the code folder; a CodeProblem when it is missing or too big."""
    folder = Path(folder)
    found = kind(folder)
    if found is None:
        raise CodeProblem(f"{folder} does not exist")
    if found != "folder":
        raise CodeProblem(f"{folder} is not a folder")
    digest, total, files = hashlib.sha256(), 0, _files(folder.resolve())
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CodeProblem(f"{path} cannot be read: {exc.strerror}") from None
        total += len(data)
        if total > MAX_BYTES:
            raise CodeProblem(f"{folder} holds more than {MAX_BYTES >> 20} MiB; point 'path:' at the folder "
                              "with the code only (data the code generates or downloads is not staged)")
        digest.update(str(path.relative_to(folder.resolve())).encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
    resolved = folder.resolve()
    root = Path(matrix_dir).resolve()
    return Code(source=resolved, sha256=digest.hexdigest(), outside=root not in (resolved, *resolved.parents),
                files=len(files), size=total)


def resolve(written: str, matrix_dir: Path) -> Path:
    """A path as the matrix writes it: relative to the matrix file's folder, `~` expanded."""
    path = Path(os.path.expanduser(written))
    return path if path.is_absolute() else Path(matrix_dir) / path


def module_file(folder: Path, module: str) -> Path | None:
    """The file that `import module` finds in `folder` (a module or a package), or None."""
    base = folder.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def entry_problem(folder: Path, entry: str) -> str | None:
    """Why 'module:function' cannot be found in `folder`, as far as the host can tell without
    importing it (the environment's Python imports it): the module's file must exist, and a
    module that parses here must define the name at its top level."""
    module, name = entry.split(":")
    path = module_file(folder, module)
    if path is None:
        return f"no module '{module}' in {folder} (looked for {module.replace('.', '/')}.py)"
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return None  # the cell says exactly where, in the environment's own Python
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) in (name, "*") for a in node.names):
                return None
        if isinstance(node, (ast.If, ast.Try)):
            return None  # defined conditionally, perhaps: the environment will tell
    return f"{path.name} defines no '{name}' at its top level"


def stage(workloads_root: Path, codes) -> None:
    """Copy each code folder under the staged workloads root, once per content hash.

    Written beside its final name and renamed, so a crash leaves no half copy and
    two runs staging the same code at once both end with one whole folder."""
    for code in {c.sha256: c for c in codes if c is not None}.values():
        copy_into(workloads_root, code)


def copy_into(root: Path, code: Code) -> Path:
    dest = Path(root) / code.dir
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{socket.gethostname()}-{os.getpid()}")  # Slurm tasks share it
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for path in _files(code.source):
        target = tmp / path.relative_to(code.source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    try:
        tmp.rename(dest)
    except OSError:  # another run staged the same hash first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def codes_of(cells) -> list[Code]:
    return [c.workload.code for c in cells if c.workload.code is not None]


def describe(cell) -> dict | None:
    """What a result records about the user's code its cell ran (None for built-in workloads)."""
    code = cell.workload.code
    if code is None:
        return None
    kind = "script" if cell.workload.model == "script" else "factory"
    entry = cell.workload.params.get("script") or cell.workload.params.get("build")
    return {"kind": kind, "entry": entry, "sha256": code.sha256, "source": str(code.source),
            "outside_matrix_folder": code.outside, "files": code.files, "bytes": code.size}
