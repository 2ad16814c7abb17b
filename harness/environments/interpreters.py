"""Finding a Python interpreter of a given version on the host.

Looked for the standard ways, in this order: interpreters named explicitly
(``--python 3.6=/path`` or the ``HARNESS_PYTHONS`` list), ``pythonX.Y`` on
PATH, then pyenv's versions folder (``$PYENV_ROOT`` or ``~/.pyenv``). Every
candidate is asked for its own version: a name can lie.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


@cache
def probe(executable: str) -> str | None:
    """The full version of an interpreter, or None if it does not run."""
    try:
        out = subprocess.run([executable, "-c", PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def matches(full: str, wanted: str) -> bool:
    return full == wanted or full.startswith(wanted + ".")


def _version_key(path: Path) -> tuple:
    parts = []
    for piece in path.parts[-3].split("."):
        parts.append(int(piece) if piece.isdigit() else -1)
    return tuple(parts)


def candidates(wanted: str, explicit: dict[str, str] | None = None) -> list[str]:
    """Executables that may be Python `wanted`, best first (not yet probed)."""
    major_minor = ".".join(wanted.split(".")[:2])
    found: list[str] = []
    for version, exe in (explicit or {}).items():
        if matches(version, major_minor) or matches(major_minor, version):
            found.append(exe)
    found.extend(p for p in os.environ.get("HARNESS_PYTHONS", "").split(os.pathsep) if p)
    for name in (f"python{major_minor}", "python3", "python"):
        exe = shutil.which(name)
        if exe:
            found.append(exe)
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    pyenv = sorted(root.glob(f"{major_minor}*/bin/python{major_minor}"), key=_version_key, reverse=True)
    found.extend(str(p) for p in pyenv)
    return list(dict.fromkeys(found))


def find(wanted: str, explicit: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(executable, full version) of the first interpreter that really is `wanted`."""
    for exe in candidates(wanted, explicit):
        full = probe(exe)
        if full and matches(full, wanted):
            return exe, full
    return None
