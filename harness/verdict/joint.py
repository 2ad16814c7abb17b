"""The joint move: a bump that cannot be installed beside one of the project's other pins
(numpy 2 beside a TensorFlow that requires numpy < 2) installs once that pin moves too -- to
which release, first?

Asked of the installer itself, not of a table: for each release of the pin that holds it back,
oldest first, a resolution of the bumped release beside it and the project's other pins, for the
project's Python -- by uv's resolver (`uv pip compile`), the installer every environment of the
harness is built with, on the index the user's pip settings name (PIP_INDEX_URL, pip.conf, the
CA bundle: environments/installer.py). The first that resolves is the joint move. Nothing is
installed, and no interpreter of that Python is needed: a resolution only reads metadata."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from harness.environments import installer
from harness.index import releases
from harness.index.pipsettings import pip_settings
from harness.upgrade.plan import COMPANIONS

MAX_TRIED = 24        # releases of the holding pin asked about, at most: a bound on the installer's time
TIMEOUT = 300         # one dry run's limit, seconds


@dataclass
class Joint:
    package: str               # the pin that holds the bump back
    pinned: str
    first: str | None          # its first release that installs beside the bump (None: none up to `tried`)
    tried: list[str]
    why: str                   # the installer's reason at the last release tried that does not install

    def as_dict(self) -> dict:
        return {"package": self.package, "pinned": self.pinned, "first": self.first, "tried": self.tried,
                "why": self.why}


def dry_run(python: str, requirements: list[str]) -> tuple[bool, str]:
    """Do these requirements resolve together for Python `python` (X.Y)? (yes/no, the resolver's reason)."""
    proc = subprocess.run([installer.uv(), "pip", "compile", "-", "--quiet", "--no-header", "--python-version",
                           python, "--no-config", "--index-url", pip_settings().index],
                          input="\n".join(requirements) + "\n", capture_output=True, text=True, timeout=TIMEOUT,
                          env=installer.variables())
    tail = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    return proc.returncode == 0, " ".join(tail[-6:])[:800]


def first_that_installs(bumped: tuple[str, str], holding: tuple[str, str], others: dict[str, str],
                        python: str) -> Joint:
    """`holding`'s first release after its pin with which `bumped` installs, beside `others`
    (the project's other pins, the holding pin's companions left to resolve with it)."""
    name, pinned = holding
    drop = {canonicalize_name(name), canonicalize_name(bumped[0]),
            *(canonicalize_name(c) for c in COMPANIONS.get(canonicalize_name(name), ()))}
    rest = [f"{n}=={v}" for n, v in others.items() if canonicalize_name(n) not in drop]
    try:
        listed = releases.expand(name, f">{pinned}", python).versions
    except releases.ReleasesUnavailable as exc:
        return Joint(name, pinned, None, [], f"cannot list the releases of {name}: {exc}")
    tried, why = [], ""
    for version in listed[:MAX_TRIED]:
        tried.append(version)
        ok, said = dry_run(python, [f"{bumped[0]}=={bumped[1]}", f"{name}=={version}", *rest])
        if ok:
            return Joint(name, pinned, version, tried, why)
        why = said
    return Joint(name, pinned, None, tried, why or f"{name} has no release after {pinned} for Python {python}")
