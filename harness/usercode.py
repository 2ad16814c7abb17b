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
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from harness.files import outputroots

STAGE_DIR = "user"          # under the staged workloads root, beside the `workloads` package
# The walk's budget, fixed before it starts (see walk()):
MAX_FILES = 5_000           # a code folder is a few files; a data lake by mistake stops here
MAX_BYTES = 256 << 20       # summed from the sizes the walk sees, before a byte is read
MAX_NAMES = 20_000          # every name the walk looks at, skipped ones too: a home folder stops here
# Never a code folder: the filesystem's root and the system's own folders (staging one would copy the
# host's configuration, its secrets included, into results and repro bundles), and nothing inside the
# kernel's pseudo-filesystems (endless, and what they hold are not files).
SYSTEM_FOLDERS = {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                  "/run", "/sbin", "/sys", "/usr", "/var"}
PSEUDO = ("/proc", "/sys", "/dev")
# Never code: caches of tools, and the harness's own output folders by their default names (one
# named otherwise is known by its marker or by this command's options: harness/files/outputroots.py).
SKIPPED = {"__pycache__", "venv", "node_modules", "results", "bundles", "reduced", "diverge", "site"}
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


def _refused(root: Path, written: Path | None = None) -> str | None:
    """Why `root` (resolved) is no code folder, decided before a single name in it is listed;
    named as the matrix wrote it, and as resolved where that differs."""
    text = root.as_posix()
    named = text if written is None or str(written) == text else f"{written} (that is {text})"
    if text in SYSTEM_FOLDERS:
        return (f"{named} is a system folder, not a code folder (staging it would copy it into results and "
                "bundles); point 'path:' at the folder with the code only")
    if any(text.startswith(p + "/") for p in PSEUDO):
        return f"{named} lies in the kernel's {text.split('/')[1]} filesystem, not a code folder"
    return None


def _unreadable(path: Path, exc: OSError, what: str = "file") -> CodeProblem:
    return CodeProblem(f"the {what} {path} cannot be read ({exc.strerror or exc}): the code folder must be "
                       "readable by the user running the harness, or hold only what is")


def walk(root: Path) -> list[tuple[Path, int]]:
    """The code files under `root` (resolved), with their sizes, in a fixed order: a folder's
    files by name, then its subfolders by name (os.walk's order, so the code hash is unchanged).

    Bounded before it starts: `root` itself is refused when it is the filesystem's root, a
    system folder or inside /proc, /sys or /dev (_refused); the walk then looks at no more than
    MAX_NAMES names, keeps no more than MAX_FILES files and MAX_BYTES bytes (summed from their
    sizes, so nothing is read before the folder is known to fit). Each bound is a CodeProblem.

    What it never enters or reads, and why:
    - other mounts: a folder whose device differs from the root's (a tmpfs, a network share, a
      bind mount of /proc) is skipped, as ``find -xdev`` does: it is not part of the code;
    - a folder met twice (a bind mount of a parent) is skipped, so no loop is walked;
    - symlinks to folders are not followed (as before: no loops, no escape from `root`);
      a symlink to a regular file is read (its content is the code), one that dangles or
      loops names nothing and is skipped;
    - special files (FIFOs, sockets, character and block devices), reached directly or by a
      link, are skipped, not refused: none holds code, reading a FIFO blocks and a device may
      never end, and a dev server's socket in a project folder is no reason to refuse it;
    - the names in SKIPPED, hidden folders, *.egg-info, results run folders, *.pyc;
    - the harness's own output, wherever it sits and however it is named (outputroots.is_output):
      hashed or copied, each run's output would change the code and nest in the next copy.
    A folder or file it cannot read is a CodeProblem naming it (never a partial hash)."""
    refused = _refused(root)
    if refused:
        raise CodeProblem(refused)
    try:
        top = os.stat(root)
    except OSError as exc:
        raise _unreadable(root, exc, "folder") from None
    seen = {(top.st_dev, top.st_ino)}
    out: list[tuple[Path, int]] = []
    names = total = 0
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise _unreadable(folder, exc, "folder") from None
        names += len(entries)
        if names > MAX_NAMES:
            raise CodeProblem(f"{root} holds more than {MAX_NAMES} names (files and folders); point 'path:' "
                              "at the folder with the code only")
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            try:
                link = entry.is_symlink()
                info = os.stat(path) if link else entry.stat(follow_symlinks=False)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    continue  # a link that dangles or loops (or a name gone since it was listed)
                raise _unreadable(path, exc) from None
            if stat.S_ISDIR(info.st_mode):
                if link or entry.name in SKIPPED or entry.name.startswith(".") or entry.name.endswith(".egg-info"):
                    continue
                if info.st_dev != top.st_dev or (info.st_dev, info.st_ino) in seen:
                    continue  # another mount, or a folder met twice
                if any(os.path.isdir(os.path.join(path, m)) for m in RUN_MARKERS) or outputroots.is_output(path):
                    continue  # a run folder, or another folder the harness writes
                seen.add((info.st_dev, info.st_ino))
                subfolders.append(path)
            elif stat.S_ISREG(info.st_mode) and not entry.name.endswith((".pyc", ".pyo")):
                out.append((path, info.st_size))
                total += info.st_size
                if len(out) > MAX_FILES:
                    raise CodeProblem(f"{root} holds more than {MAX_FILES} files; point 'path:' at the folder "
                                      "with the code only")
                if total > MAX_BYTES:
                    raise CodeProblem(f"{root} holds more than {MAX_BYTES >> 20} MiB ({path} alone is "
                                      f"{info.st_size >> 20} MiB); point 'path:' at the folder with the code only "
                                      "(data the code generates or downloads is not staged)")
        pending.extend(reversed(subfolders))
    return out


def _read(path: Path, size: int) -> bytes:
    """A file's bytes, never more than the walk saw plus one (a file that grew is refused, not
    read without end); opened non-blocking and checked again, so a file swapped for a FIFO
    since the walk cannot hang the harness."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CodeProblem(f"{path} changed into a special file while it was read")
        try:
            data = f.read(size + 1)
        except OSError as exc:
            raise _unreadable(path, exc) from None
    if len(data) > size:
        raise CodeProblem(f"{path} grew while it was read; run again when it is written")
    return data


def kind(path: Path) -> str | None:
    """'file', 'folder', 'other', or None when nothing (usable) is there; never raises
    (a matrix is untrusted input: a NUL byte or a 300-character name is an answer, not a crash)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def load(folder: Path, matrix_dir: Path) -> Code:
    """Hash the code folder; a CodeProblem (one line) when it is missing, refused, too big or unreadable."""
    folder = Path(folder)
    found = kind(folder)
    if found is None:
        raise CodeProblem(f"{folder} does not exist")
    if found != "folder":
        raise CodeProblem(f"{folder} is not a folder")
    resolved = folder.resolve()
    refused = _refused(resolved, folder)
    if refused:
        raise CodeProblem(refused)
    digest, total, files = hashlib.sha256(), 0, walk(resolved)
    for path, size in files:
        data = _read(path, size)
        total += len(data)
        digest.update(str(path.relative_to(resolved)).encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
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
    for path, size in walk(code.source):  # the same walk as the hash: what was hashed is what is staged
        target = tmp / path.relative_to(code.source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_read(path, size))
        shutil.copystat(path, target)
    try:
        tmp.rename(dest)
    except OSError:  # another run staged the same hash first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def copy_files(source: Path, dest: Path, copy=shutil.copy2) -> list[Path]:
    """The files of the code folder `source` (resolved) into `dest`, by the same walk as the hash,
    so what a copy holds is what the hash covers -- never the harness's own output inside it
    (`reduce` once copied its candidates into each next candidate). `copy(src, dst)`: shutil's
    signature (a hard link, where a copy per use would cost the disk). Returns what was copied,
    relative to `source`."""
    copied = []
    for path, _size in walk(source):
        relative = path.relative_to(source)
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        copy(path, dest / relative)
        copied.append(relative)
    return copied


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
