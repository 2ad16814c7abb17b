"""The Slurm options, declared once (as nox's ``_options.py`` declares each option).

Each field of `SlurmOptions` is one option: its name is the matrix's
``slurm:`` key, its metadata gives the command-line flag (when it has one),
the type a matrix must write, the help text and the check. The matrix loader
(`SLURM_KEYS`, `problems`), the command line (`add_arguments`) and the
submission (`SlurmOptions.merged`) all read this list, so an option cannot be
spelled three ways.

Every value here ends up in a generated ``array-*.sh`` or on sbatch's command
line, so the checks are about what Slurm and the shell accept: names are
Slurm words, sbatch arguments have an option's shape, and no value carries a
newline or another control character. The script quotes them as well
(`submit._script`); the check is what makes a bad value one clear error
instead of a strange job.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field, fields
from typing import Any

from harness.cells import MAX_MEMORY, size_bytes
from harness.errors import UserError
from harness.terminal import visible

DEFAULT_TIME_MARGIN = 300.0  # seconds on top of the cell's wall limit: start-up, environment check, writing
MAX_COUNT = 100_000
MAX_MARGIN = 7 * 24 * 3600.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.+:@-]+(,[A-Za-z0-9_.+:@-]+)*")
_SBATCH_ARG = re.compile(r"--[A-Za-z][A-Za-z0-9-]*(=.*)?|-[A-Za-z].*", re.DOTALL)
# sbatch options that would replace what the harness's script runs or where its files go
_REFUSED = ("--wrap", "--array", "-a", "--output", "-o", "--error", "-e", "--chdir", "-D", "--parsable")


def text_problem(value: str) -> str | None:
    """Why a value cannot reach a script or a command line: a control character (a newline ends a
    line of the script, and the rest would be read as a command)."""
    if _CONTROL.search(value):
        return f"'{visible(value)}' holds a control character (a newline, a tab, an escape...)"
    return None


def _word(value: str) -> str | None:
    if not _SLURM_WORD.fullmatch(value):
        return (f"expected a Slurm name (letters, digits and _ . + : @ -, comma-separated), "
                f"got '{visible(value)}'")
    return None


def _shown(number) -> str:
    text = str(number)
    return text if len(text) <= 24 else text[:20] + f"... ({len(text)} digits)"


def _count(value: int) -> str | None:
    if value < 1:
        return f"expected at least 1, got {_shown(value)}"
    if value > MAX_COUNT:
        return f"expected at most {MAX_COUNT}, got {_shown(value)}"
    return None


def _margin(value: float) -> str | None:
    if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
        return f"expected seconds >= 0, got {_shown(value)}"
    if value > MAX_MARGIN:
        return f"expected at most {MAX_MARGIN:.0f} seconds (a week), got {_shown(value)}"
    return None


def _size(value: str) -> str | None:
    if text_problem(value) or size_bytes(value) is None:
        return f"expected a size like '16g' or '512m', got '{visible(value)}'"
    if size_bytes(value) > MAX_MEMORY:
        return f"at most {MAX_MEMORY >> 40}t (64 TiB), got '{visible(value)}'"
    return None


def sbatch_arg_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not _SBATCH_ARG.fullmatch(value) or text_problem(value):
        shown = visible(value) if isinstance(value, str) else repr(value)
        return f"expected an sbatch option such as '--qos=long', got '{shown}'"
    name = value.split("=", 1)[0] if value.startswith("--") else value[:2]
    if name in _REFUSED:
        return f"'{visible(value)}': the harness sets {name} itself (its script, its array, its logs)"
    return None


def _sbatch_args(value: list) -> str | None:
    for arg in value:
        why = sbatch_arg_problem(arg)
        if why:
            return why
    return None


def _python(value: str) -> str | None:
    if not value:
        return "expected the path of a Python interpreter, got ''"
    return text_problem(value)


def option(default, kind, check, flag: str | None = None, help: str | None = None, **argparse_kw):
    """A field of SlurmOptions: its default, the type a matrix writes, its check, its flag."""
    meta = {"kind": kind, "check": check, "flag": flag, "help": help, "argparse": argparse_kw}
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class SlurmOptions:
    """Where and how to submit: the matrix's ``slurm:`` section, then the command line on top."""

    partition: str | None = option(None, str, _word, "--partition", "Slurm partition")
    account: str | None = option(None, str, _word, "--account", "Slurm account")
    throttle: int | None = option(None, int, _count, "--throttle", "at most K tasks of each array run at once (%%K)",
                                  metavar="K")
    cpus_per_task: int | None = option(None, int, _count)
    mem: str | None = option(None, str, _size)
    time_margin: float = option(DEFAULT_TIME_MARGIN, (int, float), _margin)
    sbatch_args: list[str] = option(list, list, _sbatch_args, "--sbatch-arg",
                                    "extra sbatch option, e.g. --sbatch-arg=--qos=long (repeatable)",
                                    action="append", metavar="ARG")
    python: str = option(lambda: sys.executable, str, _python)  # the nodes' interpreter (shared filesystem)

    @classmethod
    def merged(cls, section: dict, args: argparse.Namespace | None = None, **given) -> SlurmOptions:
        """The matrix's (validated) section, with the command line's values on top: a flag given
        replaces the matrix's value, except sbatch arguments, which add to them (the last one wins
        in sbatch). `given` names values directly (as `args` would)."""
        opts = cls(**{k: v for k, v in section.items() if k in SLURM_KEYS})
        opts.sbatch_args = list(section.get("sbatch_args") or [])
        for f in fields(cls):
            flag = f.metadata["flag"]
            if not flag:
                continue
            value = given.get(f.name, getattr(args, f.name, None) if args is not None else None)
            if value is None or value == []:
                continue
            why = f.metadata["check"](value)
            if why:
                raise UserError(f"{flag} {why.replace('expected', 'expects', 1)}")
            if f.name == "sbatch_args":
                opts.sbatch_args += list(value)
            else:
                setattr(opts, f.name, value)
        return opts


SLURM_KEYS: dict[str, Any] = {f.name: f.metadata["kind"] for f in fields(SlurmOptions)}


def problems(section: dict) -> list[tuple[str, str]]:
    """(key, message) for each value of a matrix's ``slurm:`` section that has the right type
    but cannot be used (the loader has already checked the keys and the types)."""
    out = []
    for f in fields(SlurmOptions):
        value = section.get(f.name)
        if value is None or isinstance(value, bool):
            continue
        if f.name == "sbatch_args" and isinstance(value, list):
            out += [(f"{f.name}[{i}]", why) for i, arg in enumerate(value) if (why := sbatch_arg_problem(arg))]
            continue
        kind = f.metadata["kind"]
        if isinstance(value, kind):
            why = f.metadata["check"](value)
            if why:
                out.append((f.name, why))
    return out


def add_arguments(group) -> None:
    """The command-line flags, from the same declaration."""
    for f in fields(SlurmOptions):
        flag = f.metadata["flag"]
        if not flag:
            continue
        kw = dict(f.metadata["argparse"])
        if kw.get("action") == "append":
            kw["default"] = []
            kw["type"] = str
        else:
            kw["type"] = int if f.metadata["kind"] is int else str
        group.add_argument(flag, dest=f.name, help=f.metadata["help"], **kw)

