"""Which Python an upgrade runs the project on, when the user does not say: the one its pins were
made for. A TensorFlow 2.10 project cannot run on a Python that TensorFlow 2.10 never had wheels
for, and a default Python that none of its pins fits answers nothing at all.

The rule: the newest Python (of those the harness's stacks run on) that the project's
`requires-python` admits and for which every pinned release has a file this host can install --
a wheel, where the release has wheels (an sdist beside them would build a binary package from
source, which is not what the user runs). A pin the index does not know (a private package) says
nothing about the Python and is passed over, and the choice says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomllib
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.errors import UserError
from harness.index import releases
from harness.upgrade.project import Pins

# Newest first: the Pythons the harness's environments are made for (interpreters.py finds them)
CANDIDATES = ("3.13", "3.12", "3.11", "3.10", "3.9", "3.8", "3.7", "3.6")


@dataclass
class Choice:
    python: str
    why: str                                        # one sentence, for the report
    passed_over: list[str] = field(default_factory=list)   # pins the index could not say anything about


def requires_python(folder: Path) -> tuple[SpecifierSet | None, str | None]:
    """The project's own `requires-python` (pyproject.toml's [project]), and where it was read."""
    path = folder / "pyproject.toml"
    if not path.is_file():
        return None, None
    try:
        spec = tomllib.loads(path.read_text()).get("project", {}).get("requires-python")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None, None
    if not isinstance(spec, str):
        return None, None
    try:
        return SpecifierSet(spec), f"{path.name}'s requires-python {spec!r}"
    except InvalidSpecifier:
        raise UserError(f"{path}: requires-python {spec!r} is not a version specifier") from None


def fits(files: list[releases.File], python: str) -> bool:
    """Can a release with these files be installed for `python` on this host, as a wheel where it
    has wheels?"""
    wheels = [f for f in files if f.filename.endswith(".whl") and not f.yanked]
    chosen = wheels or [f for f in files if not f.yanked]
    return any(releases.why_not(f, python) is None for f in chosen)


def choose(pins: Pins, folder: Path, offline: bool = False) -> Choice:
    """The newest Python every pin fits (and the project's requires-python admits), or a one-line
    UserError naming what each pin needs when none does."""
    spec, spec_source = requires_python(folder)
    candidates = [p for p in CANDIDATES if spec is None or spec.contains(f"{p}.0", prereleases=True)]
    if not candidates:
        raise UserError(f"{spec_source} admits none of Python {', '.join(CANDIDATES)}")
    passed_over, needs = [], {}
    for name, version in pins.pins.items():
        try:
            files = releases.project(name, offline=offline).releases().get(Version(version))
        except (releases.ReleasesUnavailable, InvalidVersion):
            files = None
        if not files:
            passed_over.append(f"{pins.spelled(name)}=={version}")
            continue
        needs[f"{pins.spelled(name)}=={version}"] = [p for p in candidates if fits(files, p)]
    fitting = [p for p in candidates if all(p in ok for ok in needs.values())]
    if not fitting:
        each = "; ".join(f"{pin}: {', '.join(ok) or 'none of them'}" for pin, ok in needs.items())
        raise UserError(f"{pins.source}: no Python fits every pin ({each}); name one with --python-version")
    newer = candidates[candidates.index(fitting[0]) - 1] if fitting[0] != candidates[0] else None
    binding = [pin for pin, ok in needs.items() if newer is not None and newer not in ok]  # what holds it back
    why = f"Python {fitting[0]}: the newest that every pinned release has files for"
    if binding:
        why += f" ({', '.join(binding[:3])} {'has' if len(binding) == 1 else 'have'} none for {newer})"
    if spec_source:
        why += f", within {spec_source}"
    return Choice(fitting[0], why, passed_over)
