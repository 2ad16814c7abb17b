"""What the user's project pins: a requirements file, a `pyproject.toml` or a lock, read into
exact pins -- the baseline is what they run, so a range is not a baseline and is refused with
its file and line (exit 2), as is anything that is not a requirement at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomllib
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.errors import UserError

# The ML stack an upgrade looks at when the user names no package: the first that the project pins
STACK = ("tensorflow", "tensorflow-cpu", "keras", "tf-keras", "jax", "torch", "numpy")
# Found in a folder, in this order, when no file is named
FILES = ("requirements.txt", "requirements.lock", "uv.lock", "poetry.lock", "pyproject.toml")
LOCKS = ("uv.lock", "poetry.lock")


@dataclass
class Pins:
    source: Path
    pins: dict[str, str]                                 # canonical name -> exact version, in file order
    names: dict[str, str] = field(default_factory=dict)  # canonical name -> as the file spells it
    lock: bool = False                                   # a lock: every package of the closure
    ignored: list[str] = field(default_factory=list)     # read leniently: lines that pin nothing exactly

    def spelled(self, name: str) -> str:
        return self.names.get(canonicalize_name(name), name)


def find(folder: Path, named: str | None) -> Path:
    """The file to read: the one named, else the first of `FILES` in the folder."""
    if named:
        path = Path(named)
        if not path.is_file():
            raise UserError(f"--requirements {named}: no such file")
        return path
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (the project to upgrade)")
    for name in FILES:
        if (folder / name).is_file():
            return folder / name
    raise UserError(f"{folder}: no requirements.txt, pyproject.toml or lock (uv.lock, poetry.lock); "
                    "name one with --requirements")


def read(path: Path, lenient: Callable[[str], bool] | None = None) -> Pins:
    """The exact pins of `path`, by its kind. `lenient(name)`: a line of such a package that is a
    requirement but not an exact pin (a range) is set aside in `Pins.ignored` instead of refused --
    for a reader that asks about some of the pins a project has, not one that runs them all as its
    baseline; a range of a package it does ask about is still refused at its line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot be read ({exc})") from None
    if path.name in LOCKS:
        return _lock(path, text)
    if path.suffix == ".toml":
        return _pyproject(path, text, lenient)
    return _requirements(path, text, lenient)


def _pin(path: Path, line: int | str, text: str) -> tuple[str, str, str]:
    """(canonical name, version, name as written) of one exact pin, or a UserError at its line."""
    where = f"{path}:{line}"
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UserError(f"{where}: {text!r} is not a requirement ({str(exc).splitlines()[0]})") from None
    exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if len(exact) != 1 or len(req.specifier) != 1:
        raise UserError(f"{where}: {text!r} is not an exact pin (NAME==VERSION): the answer is for the release "
                        "you run; pin it, or give the lock")
    try:
        Version(exact[0])
    except InvalidVersion:
        raise UserError(f"{where}: {exact[0]!r} is not a version (PEP 440)") from None
    return canonicalize_name(req.name), exact[0], req.name


def _collect(path: Path, items, lenient: Callable[[str], bool] | None = None) -> Pins:
    pins = Pins(path, {})
    for line, text in items:
        if lenient and _is_requirement(text) and not _is_exact(text) and lenient(Requirement(text).name):
            pins.ignored.append(text)
            continue
        name, version, spelled = _pin(path, line, text)
        pins.pins[name], pins.names[name] = version, spelled
    if not pins.pins:
        raise UserError(f"{path}: pins nothing")
    return pins


def _is_requirement(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def _is_exact(text: str) -> bool:
    spec = Requirement(text).specifier
    return len(spec) == 1 and all(s.operator in ("==", "===") and "*" not in s.version for s in spec)


def arguments(texts: list[str]) -> Pins:
    """Pins given as NAME==VERSION arguments, each checked as a file's line is."""
    return _collect(Path("the command line"), [(f"argument {i}", t) for i, t in enumerate(texts, 1)])


def _requirements(path: Path, text: str, lenient: Callable[[str], bool] | None = None) -> Pins:
    items = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):  # an option (-r, --index-url, -e): the baseline is the pins alone
            raise UserError(f"{path}:{n}: {line!r}: options are not read here; give a file of pins (pip freeze)")
        items.append((n, line))
    return _collect(path, items, lenient)


def _toml(path: Path, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not TOML ({str(exc).splitlines()[0]})") from None


def _pyproject(path: Path, text: str, lenient: Callable[[str], bool] | None = None) -> Pins:
    deps = _toml(path, text).get("project", {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise UserError(f"{path}: no [project] dependencies list")
    return _collect(path, [(f"dependencies[{i}]", d) for i, d in enumerate(deps)], lenient)


def _lock(path: Path, text: str) -> Pins:
    packages = _toml(path, text).get("package")
    if not isinstance(packages, list):
        raise UserError(f"{path}: no [[package]] entries")
    items = []
    for i, p in enumerate(packages):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not isinstance(p.get("version"), str):
            raise UserError(f"{path}: package[{i}] has no name and version")
        if p.get("source", {}).get("editable") or p.get("source", {}).get("virtual"):
            continue  # the project itself
        items.append((f"package[{i}]", f"{p['name']}=={p['version']}"))
    pins = _collect(path, items)
    pins.lock = True
    return pins


def packages(pins: Pins, asked: list[str]) -> dict[str, str | None]:
    """{package: the target the user gave, or None for the newest}: those asked (NAME or
    NAME==VERSION, each pinned by the project), else the ML stack the project pins."""
    if not asked:
        found = {p: None for p in STACK if p in pins.pins}
        if not found:
            raise UserError(f"{pins.source} pins none of {', '.join(STACK)}: name the packages with --package")
        return found
    out: dict[str, str | None] = {}
    for text in asked:
        name, _, version = text.partition("==")
        key = canonicalize_name(name)
        if not name or key not in pins.pins:
            raise UserError(f"--package {text!r}: {pins.source} does not pin {name or 'it'} "
                            f"(it pins {', '.join(list(pins.pins)[:8])})")
        if version:
            try:
                if Version(version) <= Version(pins.pins[key]):
                    raise UserError(f"--package {text}: not newer than the pinned {pins.pins[key]}")
            except InvalidVersion:
                raise UserError(f"--package {text!r}: {version!r} is not a version (PEP 440)") from None
        out[key] = version or None
    return out
