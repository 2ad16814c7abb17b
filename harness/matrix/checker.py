"""The validation's notebook: every problem collected with its key path, so one
run of validation reports all of them, and the small checks every part of the
file shares (types, bounds, names, text lengths, short quotes of bad values).
"""

from __future__ import annotations

import difflib
import math
import reprlib
from pathlib import Path

from harness import names
from harness.errors import MatrixError
from harness.index import releases
from harness.matrix.schema import MAX_PROBLEMS, MAX_TEXT

_shown = reprlib.Repr()
_shown.maxstring, _shown.maxother, _shown.maxlist, _shown.maxdict, _shown.maxlevel = 60, 60, 6, 6, 3


def _show(value) -> str:
    """A value for an error message: short, one line, whatever the value is
    (a 100,000-element list, a megabyte string, a structure made of aliases)."""
    return _shown.repr(value)


def _key(key) -> str:
    """A key for a key path: as written when it is a plain short word, else shown like a value."""
    if isinstance(key, str) and len(key) <= 60 and key.isprintable() and key.strip() == key:
        return key
    return _show(key)


class _Checker:
    """Collects problems, so one run of validation reports all of them."""

    def __init__(self, path: Path, resolver: releases.Resolver | None = None, base: Path | None = None):
        self.path = path
        self.base = Path(base) if base else path.parent  # where the matrix's relative paths start
        self.problems: list[str] = []
        self.resolver = resolver
        self.release_options = releases.Options()
        self.watch_nightly: str | None = None  # `watch: {nightly: ...}` (ranges._watch_options)
        self.ranges = 0    # version ranges seen so far (MAX_RANGES)
        self.expanded = 0  # environments they expanded to (MAX_RANGE_ENVIRONMENTS)

    def stop(self) -> None:
        """End validation here with every problem found so far, if there is one: the steps after
        this need what came before to be sound."""
        if self.problems:
            _raise(self.path, self.problems)

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}" if where else message)

    def keys(self, where: str, mapping: dict, allowed: dict, required: tuple = ()) -> None:
        for key in mapping:
            at = f"{where}.{_key(key)}" if where else _key(key)
            if key not in allowed:
                close = difflib.get_close_matches(str(key), list(allowed), n=1) if len(str(key)) < 60 else []
                hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(allowed)}"
                self.problem(at, f"unknown key{hint}")
                continue
            expected = allowed[key]
            value = mapping[key]
            if not _is_type(value, expected):
                self.problem(at, f"expected {_type_name(expected)}, got {_type_name(type(value))} {_show(value)}")
        for key in required:
            if key not in mapping:
                self.problem(f"{where}.{key}" if where else key, "required key is missing")

    def typed(self, mapping: dict, key: str, expected, where: str) -> bool:
        return key in mapping and _is_type(mapping[key], expected)

    def bounded(self, where: str, value, low, high, open_low: bool = False, open_high: bool = False) -> None:
        """A number within [low, high] (or open at either end); NaN and infinities never are."""
        if not _is_type(value, (int, float)):
            return  # a wrong type is reported by keys()
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(where, f"expected a finite number, got {value}")
            return
        if value < low or value > high or (open_low and value == low) or (open_high and value == high):
            interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
            self.problem(where, f"expected a number in {interval}, got {_show(value)}")

    def name(self, where: str, value, derived: bool = False) -> None:
        why = names.problem(value)
        if why:
            self.problem(where, f"the derived name {why}; set 'name:'" if derived else why)

    def text(self, where: str, value, limit: int = MAX_TEXT) -> None:
        if isinstance(value, str) and len(value) > limit:
            self.problem(where, f"at most {limit} characters, got {len(value)}")


def _is_type(value, expected) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        return False  # YAML 'yes' must not pass as an int
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, types)


def _type_name(expected) -> str:
    names_ = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a mapping",
              bool: "a boolean", type(None): "nothing"}
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(names_.get(t, t.__name__) for t in types)


def _list_of(raw: dict, key: str) -> list:
    """The list under `key`, or [] (a missing key or wrong type was already reported by keys())."""
    value = raw.get(key)
    return value if isinstance(value, list) else []


def _entries(check: _Checker, raw: dict, key: str, parse_one) -> list:
    """Parse each mapping of a top-level list, keeping the ones without problems."""
    out = []
    for i, item in enumerate(_list_of(raw, key)):
        if not isinstance(item, dict):
            check.problem(f"{key}[{i}]", f"expected a mapping, got {_show(item)}")
            continue
        parsed = parse_one(check, f"{key}[{i}]", item)
        if isinstance(parsed, list):
            out.extend(parsed)
        elif parsed:
            out.append(parsed)
    return out


def _raise(path: Path, problems: list[str]) -> None:
    """One MatrixError naming the file, with at most MAX_PROBLEMS of its problems listed."""
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
    raise MatrixError(path, problems)
