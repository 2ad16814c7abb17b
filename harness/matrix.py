"""Matrix files: load, validate, expand into cells.

Validation runs before anything is built or run, and reports every problem
with the file, the key path and what was expected (plus the closest valid key
for a typo), because a matrix that dies an hour into a run on a misspelt key
is the failure users remember. A matrix is also untrusted input: every number
has limits, every name follows ``names``, and the file's size, nesting and
alias expansion are bounded before validation walks it, so any document ends
in a MatrixError within milliseconds (tests/test_fuzz_matrix.py).
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import fnmatch
import hashlib
import itertools
import math
import os
import re
import reprlib
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from . import chains, names, releases, stacks, status, terminal, usercode, values
from .cells import FEEDS, MAX_MEMORY, WRAPPERS, Cell, Environment, Limits, Parallelism, Workload, size_bytes
from .errors import MatrixError
from .executors.slurm.options import SLURM_KEYS
from .executors.slurm.options import problems as slurm_problems
from .workloads.protocol import FAULTS, RNN_CELLS, TRAPS

# Patterns are matched with fullmatch: '$' would let a trailing newline through.
PYTHON_RE = re.compile(r"3\.[0-9]{1,2}(\.[0-9]{1,2})?")
VERSION_CHARS_RE = re.compile(r"[0-9A-Za-z.+!_-]{1,64}")
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")

# -- limits: what a matrix file may ask for (the README's schema table lists them) --
MAX_FILE_BYTES = 1 << 20          # a matrix is a few KiB; this bounds the time spent reading one
MAX_DEPTH = 32                    # nesting (after aliases); real matrices use 4
MAX_VALUES = 20_000               # values after aliases are expanded: an alias bomb stops here
MAX_CELLS = 100_000               # cells one matrix may expand to
MAX_RULES = 200                   # entries in each of include / exclude / expect
MAX_MATCH_WORK = 2_000_000        # pattern tests include / exclude / expect may cost (_Rules.work)
MAX_TEXT = 2_000                  # description, why, signature, a fault's message
MAX_REQUIREMENT = 200             # one pip requirement string
MIN_MEMORY = 64 << 20             # a limit below this cannot start Python + numpy
MAX_PROBLEMS = 20                 # problems listed in one message
MAX_RANGES = 50                   # version ranges in one matrix: each may ask the package index once
MAX_RANGE_ENVIRONMENTS = 500      # environments the ranges of one matrix may expand to
# (low, high) inclusive for integers; for floats, `open_low` / `open_high` exclude the bound.
TOP_LIMITS = {"epochs": (1, 10_000), "repeats": (1, 1_000), "seed": (0, 2**32 - 1)}
BATCH_LIMITS = (1, 1_000_000)
DEVICE_LIMITS = (1, 256)
RATIO_LIMITS = (1, 1_000)
TIMEOUT_LIMITS = (0.0, 7 * 24 * 3600.0)   # seconds, > 0
WORKLOAD_LIMITS: dict[str, tuple] = {
    "layers": (1, 64), "units": (1, 65_536), "dense": (1, 65_536), "timesteps": (1, 100_000),
    "features": (1, 1_000_000), "classes": (1, 100_000), "samples": (1, 100_000_000),
    "height": (1, 4_096), "width": (1, 4_096), "channels": (1, 64), "blocks": (1, 16),
    "convs_per_block": (1, 16), "filters": (1, 4_096),
    "dropout": (0.0, 1.0),           # [0, 1)
    "noise": (0.0, 100.0),           # [0, 100]
    "learning_rate": (0.0, 10.0),    # (0, 10]
    "seconds": (0.0, 86_400.0),      # an idle cell: [0, a day]
}
WIDTHS_LIMITS = (1, 65_536)
MAX_WIDTHS = 64

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

# Keys each workload model accepts (beyond name/model), with their types.
MODEL_KEYS: dict[str, dict[str, type | tuple]] = {
    "rnn": {"cell": str, "layers": int, "units": int, "dense": int, "dropout": float,
            "timesteps": int, "features": int, "classes": int, "samples": int},
    "convnet": {"height": int, "width": int, "channels": int, "classes": int, "samples": int,
                "dense": int, "noise": float},
    "maxing": {"height": int, "width": int, "channels": int, "classes": int, "samples": int,
               "blocks": int, "convs_per_block": int, "filters": int, "dense": int},
    "dense": {"features": int, "widths": list, "samples": int},
    "fault": {"fault": str, "message": str},
    "idle": {"seconds": (int, float)},
    # the user's own code (harness/usercode.py): a model factory, or a script that is the cell
    "user": {"build": str, "data": str, "path": str, "params": dict, "loss": str, "needs": (str, list, dict),
             "after": (str, list, dict)},
    "script": {"script": str, "args": list, "path": str, "needs": (str, list, dict), "after": (str, list, dict)},
}
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "rnn": {"cell": "gru", "layers": 4, "units": 512, "dense": 128, "timesteps": 32, "features": 16,
            "classes": 4, "samples": 4096},
    "convnet": {"classes": 10, "samples": 6000},
    "maxing": {"classes": 10, "samples": 4096},
    "dense": {"features": 8000, "widths": [4000, 2000, 500, 300], "samples": 8192},  # seed 002: ~41M parameters
    "fault": {},
    "idle": {"seconds": 1.0},
}  # user and script workloads have none: they name the user's code
COMMON_WORKLOAD_KEYS = {"name": str, "model": str, "learning_rate": float, "trap": str}

ENV_KEYS = {"name": str, "python": str, "tensorflow": str, "keras": str, "backend": str,
            "packages": list, "force": list, "device": str, "base_image": str,
            "keras_api": str, "tensorflow_package": str, "env": dict}
VARIABLE_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
PAR_KEYS = {"wrapper": str, "devices": int, "device_kind": str, "ratios": list, "feed": str}
RULE_KEYS = {"environment": (str, list), "workload": (str, list), "wrapper": (str, list),
             "devices": (int, list), "device_kind": (str, list), "feed": (str, list),
             "batch_size": (int, list), "repeat": (int, list)}
# A value expectation (harness/values.py): a metric equal to / within a tolerance of a number,
# or of the same cell's value in another environment.
VALUE_KEYS = {"metric": str, "equals": (int, float), "within": (int, float), "relative": (int, float),
              "same_as": str}
EXPECT_KEYS = {**{k: v for k, v in RULE_KEYS.items() if k != "repeat"},
               "status": str, "signature": str, "why": str, **VALUE_KEYS}
TOP_KEYS = {"name": str, "description": str, "environments": list, "workloads": list,
            "parallelism": list, "batch_sizes": list, "epochs": int, "repeats": int, "seed": int,
            "timeouts": dict, "memory_limit": str, "include": list, "exclude": list, "expect": list,
            "slurm": dict, "releases": dict, "watch": dict}
# How version ranges expand (harness.releases.Options); the README's "Version ranges" lists them.
RELEASES_KEYS = {"pre": bool, "every": str, "cutoff": bool, "margin_days": (int, float)}
TIMEOUT_KEYS = {"wall": (int, float), "progress": (int, float)}


@dataclass
class Matrix:
    path: Path
    name: str
    description: str
    sha256: str
    cells: list[Cell]
    slurm: dict = field(default_factory=dict)  # the validated `slurm:` section, as written
    resolver: releases.Resolver | None = None  # what its version ranges expanded to (None: it has none)

    @property
    def environments(self) -> list[Environment]:
        seen: dict[str, Environment] = {}
        for cell in self.cells:
            seen.setdefault(cell.environment.name, cell.environment)
        return list(seen.values())


class _Checker:
    """Collects problems, so one run of validation reports all of them."""

    def __init__(self, path: Path, resolver: releases.Resolver | None = None, base: Path | None = None):
        self.path = path
        self.base = Path(base) if base else path.parent  # where the matrix's relative paths start
        self.problems: list[str] = []
        self.resolver = resolver
        self.release_options = releases.Options()
        self.ranges = 0    # version ranges seen so far (MAX_RANGES)
        self.expanded = 0  # environments they expanded to (MAX_RANGE_ENVIRONMENTS)

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


def _version(check: _Checker, where: str, value) -> str | None:
    if value is None:
        return None
    text = str(value)
    try:
        if not VERSION_CHARS_RE.fullmatch(text):
            raise InvalidVersion(text)
        Version(text)
    except InvalidVersion:
        check.problem(where, f"{_show(value)} is not a valid version (PEP 440), e.g. '1.12.0'")
        return None
    return text


def _requirements(check: _Checker, where: str, key: str, reqs) -> None:
    for i, req in enumerate(reqs if isinstance(reqs, list) else []):
        at = f"{where}.{key}[{i}]"
        if not isinstance(req, str):
            check.problem(at, f"expected a string, got {_show(req)}")
        elif len(req) > MAX_REQUIREMENT or not req.isprintable() or req != req.strip():
            # one line of a requirements file: a newline would smuggle in a second line (an option)
            check.problem(at, f"not a pip requirement: {_show(req)} (one printable line, at most "
                              f"{MAX_REQUIREMENT} characters)")
        else:
            try:
                Requirement(req)
            except InvalidRequirement as exc:
                check.problem(at, f"not a pip requirement: {_show(str(exc))}")


def _environment(check: _Checker, where: str, raw: dict) -> Environment | None:
    before = len(check.problems)
    check.keys(where, raw, ENV_KEYS, required=("python",))
    python = raw.get("python")
    if isinstance(python, (int, float)) and not isinstance(python, bool):
        check.problem(f"{where}.python", f"write the version as a string, e.g. python: \"{python}\" "
                      "(YAML reads 3.10 as the number 3.1)")
        return None
    if isinstance(python, str) and not PYTHON_RE.fullmatch(python):
        check.problem(f"{where}.python", f"{_show(python)} is not a Python version like '3.6' or '3.11.7'")
    tf = _version(check, f"{where}.tensorflow", raw.get("tensorflow")) if check.typed(
        raw, "tensorflow", str, where) else None
    keras = _version(check, f"{where}.keras", raw.get("keras")) if check.typed(
        raw, "keras", str, where) else None
    keras_api = _keras_api(check, where, raw, tf, keras)
    backend = raw.get("backend")
    if backend is not None:
        if (keras_api or stacks.api(tf, keras)) != "keras3":
            check.problem(f"{where}.backend", "a backend is chosen only for Keras 3 (keras: '3.x')")
        elif backend not in stacks.KERAS3_BACKENDS:
            check.problem(f"{where}.backend", f"expected one of {', '.join(stacks.KERAS3_BACKENDS)}, "
                          f"got {_show(backend)}")
    if not tf and not (stacks.is_keras3(keras) and backend in ("jax", "torch")) and not is_plain(raw):
        check.problem(where, "needs 'tensorflow' (or Keras 3 with backend jax or torch)")
    device = raw.get("device", "cpu")
    if device not in ("cpu", "gpu"):
        check.problem(f"{where}.device", f"expected 'cpu' or 'gpu', got {_show(device)}")
    packages = raw.get("packages", [])
    force = raw.get("force", [])
    _requirements(check, where, "packages", packages)
    _requirements(check, where, "force", force)
    base_image = raw.get("base_image")
    if isinstance(base_image, str) and not IMAGE_RE.fullmatch(base_image):
        check.problem(f"{where}.base_image", f"{_show(base_image)} is not an image reference like "
                                             "'python:3.6-slim'")
    variables = _variables(check, where, raw.get("env"))
    if len(check.problems) > before:
        return None
    tf_package = raw.get("tensorflow_package")
    if "name" in raw:
        check.name(f"{where}.name", raw["name"])
        name = raw["name"]
    else:
        name = stacks.environment_name(tf, keras, backend, device, keras_api, tf_package, python=python)
        check.name(where, name, derived=True)
    if len(check.problems) > before:
        return None
    return Environment(name=name, python=python, tensorflow=tf, keras=keras,
                       backend=backend if (keras_api or stacks.api(tf, keras)) == "keras3" else None,
                       packages=tuple(packages), force=tuple(force), device=device, base_image=base_image,
                       keras_api=keras_api, tensorflow_package=tf_package, env=variables)


# -- version ranges (harness.releases) ---------------------------------------------------
RANGE_EXAMPLE = "e.g. '2.15.1', or a range such as '>=2.10,<2.17'"


def is_plain(raw: dict) -> bool:
    """An environment of Python and its `packages:` only -- no TensorFlow, no Keras: for a
    user's script that tests something else (NumPy, a data library, the harness's own
    dependencies). Its cells run `script:` workloads only (``_plain_cells``)."""
    return not any(raw.get(k) is not None for k in ("tensorflow", "keras", "keras_api", "backend",
                                                    "tensorflow_package"))


def _plain_cells(check: _Checker, cells: list[Cell], workloads: list[Workload]) -> None:
    """A built-in model or a model factory needs a framework: refused in a plain environment."""
    seen, index = set(), {w.name: i for i, w in enumerate(workloads)}
    for cell in cells:
        env, work = cell.environment, cell.workload
        if env.api == stacks.PLAIN and work.model != "script" and (env.name, work.name) not in seen:
            seen.add((env.name, work.name))
            check.problem(f"workloads[{index[work.name]}]", f"environment '{env.name}' has no tensorflow or keras: "
                          "it runs script: workloads only (add tensorflow: or keras: to it, or exclude the pair)")


def _release_options(check: _Checker, raw) -> releases.Options:
    if not isinstance(raw, dict):
        return releases.Options()
    check.keys("releases", raw, RELEASES_KEYS)
    every = raw.get("every", "patch")
    if every not in releases.EVERY:
        check.problem("releases.every", f"expected one of {', '.join(releases.EVERY)}, got {_show(every)}")
    if "margin_days" in raw:
        check.bounded("releases.margin_days", raw["margin_days"], 0, 3650)
    pick = {k: raw[k] for k in RELEASES_KEYS if k in raw and _is_type(raw[k], RELEASES_KEYS[k])}
    if pick.get("every") not in (None, *releases.EVERY):
        pick.pop("every")
    return releases.Options(**pick)


def _ranges_of(check: _Checker, where: str, raw: dict) -> list[tuple[str, int | None, str, str]]:
    """The ranges an environment asks to expand: (field, index in packages, package, range)."""
    found = []
    for fld in ("tensorflow", "keras"):
        value = raw.get(fld)
        if releases.is_range(value):
            if len(value) > MAX_REQUIREMENT or releases.parse_range(value) is None:
                check.problem(f"{where}.{fld}", f"{_show(value)} is not a version or a range (PEP 440), "
                              f"{RANGE_EXAMPLE}")
            else:
                package = "tf_keras" if fld == "keras" and raw.get("keras_api") == "tf_keras" else fld
                found.append((fld, None, package, value))
    packages = raw.get("packages")
    for i, entry in enumerate(packages if isinstance(packages, list) else []):
        if not isinstance(entry, dict):
            continue
        at = f"{where}.packages[{i}]"
        if len(entry) != 1:
            check.problem(at, f"a range is one package and its range, e.g. {{numpy: '>=1.26,<2.1'}}; "
                              f"got {_show(entry)}")
            continue
        name, spec = next(iter(entry.items()))
        if not isinstance(name, str) or not releases.NAME_RE.fullmatch(name):
            check.problem(at, f"{_show(name)} is not a package name")
        elif not isinstance(spec, str) or len(spec) > MAX_REQUIREMENT or not releases.is_range(spec) \
                or releases.parse_range(spec) is None:
            check.problem(f"{at}.{_key(name)}", f"{_show(spec)} is not a range (PEP 440), e.g. '>=1.26,<2.1'")
        else:
            found.append(("packages", i, name, spec))
    return found


def _short(package: str) -> str:
    return {"tensorflow": "tf", "tf_keras": "tf_keras"}.get(package, package)


def _environments(check: _Checker, where: str, raw: dict) -> list[Environment] | Environment | None:
    """One environment, or one per release of each range it holds (every combination)."""
    before = len(check.problems)
    ranges = _ranges_of(check, where, raw)
    if not ranges:
        return _environment(check, where, raw) if len(check.problems) == before else None
    python = raw.get("python")
    if len(check.problems) > before or not isinstance(python, str) or not PYTHON_RE.fullmatch(python):
        placeholder = {k: ("1.0" if releases.is_range(v) else v) for k, v in raw.items() if k != "packages"}
        _environment(check, where, placeholder)  # reports what else is wrong (the python, keys)
        return None
    check.ranges += len(ranges)
    if check.ranges > MAX_RANGES:
        check.problem(where, f"at most {MAX_RANGES} version ranges in one matrix (each may ask the package index)")
        return None
    resolver = check.resolver = check.resolver or releases.Resolver()
    options = check.release_options
    lists = []
    for fld, index, package, spec in ranges:
        at = f"{where}.{fld}" + (f"[{index}]" if index is not None else "")
        try:
            found = resolver.expand(package, spec, python, options)
        except releases.ReleasesUnavailable as exc:
            check.problem(at, f"cannot list the releases of {package}: {exc}")
            continue
        if not found.versions:
            why = "; ".join(f"{v}: {r}" for v, r in list(found.skipped.items())[:3])  # all yanked
            check.problem(at, f"no release of {package} in {spec} for Python {python} on {found.index}"
                              + (f" ({why})" if why else ""))
            continue
        lists.append([(fld, index, package, spec, v) for v in found.versions])
    if len(check.problems) > before:
        return None
    count = math.prod(len(options) for options in lists)
    check.expanded += count
    if check.expanded > MAX_RANGE_ENVIRONMENTS:
        check.problem(where, f"the version ranges expand to more than {MAX_RANGE_ENVIRONMENTS} environments "
                             f"({count} here); narrow them, or use releases: {{every: minor}}")
        return None
    out = []
    for combo in itertools.product(*lists):
        new = dict(raw)
        packages = list(raw.get("packages") or [])
        for fld, index, package, _spec, version in combo:
            if fld == "packages":
                packages[index] = f"{package}=={version}"
            else:
                new[fld] = version
        if "packages" in raw:
            new["packages"] = packages
        # the name says which release: the derived name has tf / keras already, a given one has nothing
        tags = [f"{_short(p)}{v}" for fld, _, p, _, v in combo if fld == "packages" or "name" in raw]
        if "name" in raw and isinstance(raw["name"], str):
            new["name"] = "-".join([raw["name"], *tags])
        env = _environment(check, where, new)
        if env is None:
            return None
        if "name" not in raw and tags:
            name = "-".join([env.name, *tags])
            check.name(where, name, derived=True)
            env = dataclasses.replace(env, name=name)
        cutoff = None
        if options.cutoff:
            cutoff = releases.cutoff_of([resolver.uploaded(p, v) for p, v in releases.exact_pins(env)],
                                        options.margin_days)
        out.append(dataclasses.replace(env, ranges=tuple((p, releases.range_text(s), v)
                                                         for _, _, p, s, v in combo),
                                       uploaded_before=cutoff))
    return out


# -- watch: how `harness watch` expands this matrix (harness/watch) ------------------------
WATCH_KEYS = {"pre": bool}


def _watch_options(check: _Checker, raw) -> None:
    """`watch: {pre: true}`: when `harness watch` expands the ranges (its resolver says
    `watching`), pre-releases count too -- rc's, and the dev releases that are all nightly packages
    such as tf-nightly publish; `run`, `list` and `bisect` keep `releases:` as written."""
    if raw is None or not isinstance(raw, dict):
        return  # absent; a non-mapping is reported by the top-level type check
    check.keys("watch", raw, WATCH_KEYS)
    if raw.get("pre") is True and getattr(check.resolver, "watching", False):
        check.release_options = dataclasses.replace(check.release_options, pre=True)


def _slurm(check: _Checker, raw: dict) -> None:
    """How the cells are handed to Slurm: the keys, types and checks are SlurmOptions' own."""
    check.keys("slurm", raw, SLURM_KEYS)
    typed = {k: v for k, v in raw.items() if k in SLURM_KEYS and check.typed(raw, k, SLURM_KEYS[k], "slurm")}
    for key, why in slurm_problems(typed):
        check.problem(f"slurm.{key}", why)


def _size(check: _Checker, where: str, text: str, low: int) -> None:
    """A memory size: one the engines and Slurm can read, from `low` bytes to MAX_MEMORY."""
    size = size_bytes(text)
    if size is None:
        check.problem(where, f"expected a size like '4g' or '512m', got {_show(text)}")
    elif size < low:
        check.problem(where, f"at least {low >> 20}m, got {_show(text)}")
    elif size > MAX_MEMORY:
        check.problem(where, f"at most {MAX_MEMORY >> 40}t (64 TiB), got {_show(text)}")


def _keras_api(check: _Checker, where: str, raw: dict, tf: str | None, keras: str | None) -> str | None:
    """`keras_api` and `tensorflow_package`: which Keras runs and which TensorFlow distribution
    provides it, said outright instead of guessed from the pins."""
    chosen = raw.get("keras_api")
    if isinstance(chosen, str) and chosen not in stacks.KERAS_APIS:
        close = difflib.get_close_matches(chosen, stacks.KERAS_APIS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        check.problem(f"{where}.keras_api", f"expected one of {', '.join(stacks.KERAS_APIS)}, got {chosen!r}{hint}")
        chosen = None
    elif chosen == "tf_keras" and not (tf and Version(tf) >= Version("2.16")):
        check.problem(f"{where}.keras_api", "tf_keras is the legacy Keras 2 of TensorFlow >= 2.16 (before, "
                      "tf.keras is Keras 2 already): set tensorflow: '2.16' or later")
    elif chosen in ("standalone", "tf_keras") and stacks.is_keras3(keras):
        check.problem(f"{where}.keras", f"{chosen} is Keras 2; '{keras}' is Keras 3 (keras_api: keras3)")
    elif chosen == "keras3" and keras and not stacks.is_keras3(keras):
        check.problem(f"{where}.keras", f"keras_api keras3 needs a Keras 3 pin, got '{keras}'")
    elif chosen == "tf.keras" and not tf:
        check.problem(f"{where}.keras_api", "tf.keras needs 'tensorflow'")
    package = raw.get("tensorflow_package")
    if isinstance(package, str) and package not in stacks.TENSORFLOW_PACKAGES:
        check.problem(f"{where}.tensorflow_package",
                      f"expected one of {', '.join(stacks.TENSORFLOW_PACKAGES)}, got {package!r}")
    elif package is not None and not tf:
        check.problem(f"{where}.tensorflow_package", "names TensorFlow's distribution: set 'tensorflow' too")
    return chosen if isinstance(chosen, str) else None


def _variables(check: _Checker, where: str, raw) -> tuple[tuple[str, str], ...]:
    """`env:` -- variables for this environment's cell processes, recorded with every result."""
    if not isinstance(raw, dict):
        return ()
    out = []
    for name, value in raw.items():
        key = f"{where}.env.{name}"
        if not isinstance(name, str) or not VARIABLE_RE.fullmatch(name):
            check.problem(key, "a variable name is upper case letters, digits and _ (not starting with a digit)")
        elif name in stacks.RESERVED_VARIABLES:
            why = ("keras_api / backend set it" if name in stacks.KERAS_SWITCHES
                   else "the harness sets it for every cell")
            check.problem(key, f"{name} cannot be set here: {why}")
        elif stacks.loads_code(name):
            check.problem(key, f"{name} cannot be set here: {stacks.loads_code(name)}")
        elif not isinstance(value, str):
            check.problem(key, f"expected a string, got {_type_name(type(value))} {_show(value)} "
                               f"(quote it: \"{_show(value)}\")")
        elif not terminal.is_plain(value):
            # it is written into run.sh and docker's -e, shown in reports and terminals: one plain line
            check.problem(key, f"one line without control characters, got {_show(value)}")
        else:
            check.text(key, value)
            out.append((name, value))
    return tuple(sorted(out))


def _workload_name(model: str, params: dict) -> str:
    if model == "rnn":
        return f"{params['cell'].replace('_', '')}-{params['layers']}x{params['units']}"
    if model == "fault":
        return f"fault-{params.get('fault')}"
    if model == "idle":
        return f"idle-{params['seconds']:g}s"
    if model == "script":
        return re.sub(r"[^A-Za-z0-9._+-]", "-", Path(str(params["script"])).stem) or "script"
    if model == "user":
        return "user-" + str(params["build"]).split(":")[0].rsplit(".", 1)[-1]
    return model


def _workload(check: _Checker, where: str, raw: dict) -> Workload | None:
    model = raw.get("model")
    if model is None and "script" in raw:
        model = "script"  # `script: ./bug.py` alone says what the workload is
    if not isinstance(model, str) or model not in MODEL_KEYS:
        check.problem(f"{where}.model", f"expected one of {', '.join(MODEL_KEYS)}, got {_show(model)}")
        return None
    before = len(check.problems)
    required = {"user": ("build", "data", "path"), "script": ("script",)}.get(model, ("model",))
    check.keys(where, raw, {**COMMON_WORKLOAD_KEYS, **MODEL_KEYS[model]}, required=required)
    if len(check.problems) > before:
        return None  # the checks below need the right types
    params = {**MODEL_DEFAULTS.get(model, {}), **{k: v for k, v in raw.items() if k not in ("name", "model")}}
    code = _user_code(check, where, model, params) if model in ("user", "script") else None
    if model == "rnn" and params["cell"] not in RNN_CELLS:
        check.problem(f"{where}.cell", f"expected one of {', '.join(RNN_CELLS)}, got {_show(params['cell'])}")
    if model == "fault" and params.get("fault") not in FAULTS:
        check.problem(f"{where}.fault", f"expected one of {', '.join(FAULTS)}, got {_show(params.get('fault'))}")
    if "trap" in params and params["trap"] not in TRAPS:
        check.problem(f"{where}.trap", f"expected one of {', '.join(TRAPS)}, got {_show(params['trap'])}")
    check.text(f"{where}.message", params.get("message"))
    for key, value in params.items():
        if key in WORKLOAD_LIMITS:
            low, high = WORKLOAD_LIMITS[key]
            check.bounded(f"{where}.{key}", value, low, high, open_low=key == "learning_rate",
                          open_high=key == "dropout")
    if model == "dense":
        widths = params.get("widths", [])
        if not 1 <= len(widths) <= MAX_WIDTHS:
            check.problem(f"{where}.widths", f"expected 1 to {MAX_WIDTHS} layer widths, got {len(widths)}")
        for i, width in enumerate(widths[:MAX_WIDTHS]):
            if not _is_type(width, int):
                check.problem(f"{where}.widths[{i}]", f"expected an integer, got {_show(width)}")
            else:
                check.bounded(f"{where}.widths[{i}]", width, *WIDTHS_LIMITS)
    if len(check.problems) > before:
        return None
    if "name" in raw:
        check.name(f"{where}.name", raw["name"])
        name = raw["name"]
    else:
        name = _workload_name(model, params)
        check.name(where, name, derived=True)
    if len(check.problems) > before:
        return None
    return Workload(name=name, model=model, params=params, code=code)


def _user_code(check: _Checker, where: str, model: str, params: dict) -> usercode.Code | None:
    """Check what a user / script workload names, hash its folder, and put the hash in its
    spec (params["code"]); the folder's host path stays out of the spec, so moving the
    code does not re-run anything and changing it re-runs exactly its cells."""
    here = check.base
    folder = usercode.resolve(params.pop("path"), here) if "path" in params else None
    if model == "script":
        script = usercode.resolve(params["script"], here)
        folder = folder or script.parent
        if usercode.kind(script) != "file":
            check.problem(f"{where}.script", f"{script} does not exist (relative paths start at the "
                                             "matrix file's folder)")
            return None
        if usercode.kind(folder) != "folder":
            check.problem(f"{where}.path", f"{folder} is not a folder")
            return None
        if folder.resolve() not in script.resolve().parents:
            check.problem(f"{where}.script", f"{script} lies outside its 'path:' folder {folder}")
            return None
        params["script"] = script.resolve().relative_to(folder.resolve()).as_posix()
        for i, arg in enumerate(params.get("args", [])):
            if not isinstance(arg, (str, int, float)) or isinstance(arg, bool):
                check.problem(f"{where}.args[{i}]", f"expected a string or a number, got {_show(arg)}")
            else:
                check.text(f"{where}.args[{i}]", str(arg))
        params["args"] = [str(a) for a in params.get("args", [])]
    try:
        code = usercode.load(folder, here)
    except usercode.CodeProblem as exc:
        check.problem(f"{where}.path", str(exc))
        return None
    if model == "user":
        for key in ("build", "data"):
            entry = params[key]
            if not usercode.ENTRY_RE.fullmatch(entry):
                check.problem(f"{where}.{key}", f"expected 'module:function' (e.g. 'model:build'), got {_show(entry)}")
                continue
            why = usercode.entry_problem(code.source, entry)
            if why:
                check.problem(f"{where}.{key}", why)
        for key in params.get("params", {}):
            if not isinstance(key, str) or not usercode.PARAM_RE.fullmatch(key):
                check.problem(f"{where}.params.{_key(key)}", "a parameter is a Python keyword argument name")
    for key in ("needs", "after"):  # after: the order (and the producer's success) without its files
        if key in params:
            params[key] = chains.parse_needs(check, f"{where}.{key}", params[key], files=key == "needs")
    params["code"] = code.spec()
    return code


def _parallelism(check: _Checker, where: str, raw: dict, default_kind: str) -> Parallelism | None:
    before = len(check.problems)
    check.keys(where, raw, PAR_KEYS, required=("wrapper",))
    wrapper = raw.get("wrapper")
    if isinstance(wrapper, str) and wrapper not in WRAPPERS:
        close = difflib.get_close_matches(wrapper, WRAPPERS, n=1) if len(wrapper) < 60 else []
        hint = f"; did you mean '{close[0]}'?" if close else ""
        check.problem(f"{where}.wrapper", f"expected one of {', '.join(WRAPPERS)}, got {_show(wrapper)}{hint}")
    devices = raw.get("devices", 1)
    if _is_type(devices, int):
        check.bounded(f"{where}.devices", devices, *DEVICE_LIMITS)
    kind = raw.get("device_kind", default_kind)
    if kind not in ("cpu", "gpu"):
        check.problem(f"{where}.device_kind", f"expected 'cpu' or 'gpu', got {_show(kind)}")
    feed = raw.get("feed", "arrays")
    if feed not in FEEDS:
        check.problem(f"{where}.feed", f"expected one of {', '.join(FEEDS)}, got {_show(feed)}")
    ratios = raw.get("ratios")
    if ratios is not None and wrapper != "ratio":
        check.problem(f"{where}.ratios", f"only the 'ratio' wrapper takes ratios (this is {_show(wrapper)})")
    elif ratios is not None and isinstance(ratios, list):
        low, high = RATIO_LIMITS
        if not all(_is_type(r, int) and low <= r <= high for r in ratios):
            check.problem(f"{where}.ratios", f"expected a list of integers from {low} to {high}")
        elif _is_type(devices, int) and len(ratios) != devices:
            check.problem(f"{where}.ratios", f"expected {devices} ratios (one per device), got {len(ratios)}")
    if len(check.problems) > before:
        return None
    return Parallelism(wrapper=wrapper, devices=devices, device_kind=kind,
                       ratios=tuple(ratios) if ratios else None, feed=feed)


class _Rules:
    """Which of a list of rules (include, exclude or expect) match which cells,
    in time linear in the cells, whatever the number of rules.

    A rule matches a cell when, for each field it names, the cell's value fits
    one of its glob patterns. Each field takes few distinct values (a handful
    of environments, batch sizes, repeats), so each pattern is compiled once
    and tried once per distinct value, giving per value a bit mask of the rules
    it satisfies; a cell's matching rules are then the AND of its fields'
    masks. Checking every rule against every cell instead cost cells x rules x
    patterns, hours for a matrix well within the size limits.
    """

    def __init__(self, rules: list[dict], domains: dict[str, list]):
        self.rules = rules
        everything = (1 << len(rules)) - 1
        self.masks: dict[str, dict] = {}
        for key, seen in domains.items():
            named = []  # (bit, pattern) for the rules that name this field
            for bit, rule in enumerate(rules):
                if key in rule:
                    options = rule[key] if isinstance(rule[key], list) else [rule[key]]
                    named.append((bit, re.compile("|".join(f"(?:{fnmatch.translate(str(o))})" for o in options))
                                  if options else None))
            free = everything & ~sum(1 << bit for bit, _ in named)  # rules that do not name the field
            self.masks[key] = {value: free | sum(1 << bit for bit, pattern in named
                                                 if pattern is not None and pattern.match(str(value)))
                               for value in seen}

    @staticmethod
    def work(rule_lists: list[list[dict]], domains: dict[str, list]) -> int:
        """Pattern tests the masks cost: distinct values x patterns, per field."""
        total = 0
        for rules in rule_lists:
            for rule in rules:
                for key, want in rule.items():
                    if key in domains:
                        total += len(domains[key]) * (len(want) if isinstance(want, list) else 1)
        return total

    def mask(self, key: str, value) -> int:
        return self.masks[key][value]

    def first(self, mask: int) -> dict | None:
        return self.rules[(mask & -mask).bit_length() - 1] if mask else None

    def every(self, mask: int) -> list[dict]:
        """The matching rules, in order (an expectation's status rule and every value rule)."""
        out = []
        while mask:
            low = mask & -mask
            out.append(self.rules[low.bit_length() - 1])
            mask ^= low
        return out


def _rules(check: _Checker, raw: dict, key: str, allowed: dict) -> list[dict]:
    rules = raw.get(key, []) if isinstance(raw.get(key, []), list) else []
    if len(rules) > MAX_RULES:
        check.problem(key, f"at most {MAX_RULES} rules, got {len(rules)}")
        return []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            check.problem(f"{key}[{i}]", f"expected a mapping, got {_show(rule)}")
            continue
        check.keys(f"{key}[{i}]", rule, allowed)
        for name, want in rule.items():
            if name in VALUE_KEYS:
                continue  # typed by keys(), checked by values.check
            options = want if isinstance(want, list) else [want]
            if not all(isinstance(o, (str, int)) and not isinstance(o, bool) for o in options):
                check.problem(f"{key}[{i}].{_key(name)}", f"expected strings or integers, got {_show(want)}")
            for o in options:
                check.text(f"{key}[{i}].{_key(name)}", o)
    return [r for r in rules if isinstance(r, dict)]


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


# -- reading the file -----------------------------------------------------------------
# libyaml where PyYAML has it: the pure-Python reader takes ~100 us a value, so a 1 MiB list would take a minute.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """YAML's safe loader, stricter: a key given twice is an error (plain YAML
    keeps the last value and silently drops the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merged keys may be overridden; non-scalar keys are rare and unhashable anyway
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"the key {_show(key)} is given twice",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _scan(text: str) -> None:
    """Walk the event stream once before anything is built: stop at MAX_DEPTH
    levels of nesting and at MAX_VALUES values. The parser itself keeps a
    stack of states, but composing nodes recurses (20,000 levels would be a
    RecursionError, or a crash in libyaml's composer), and building a huge
    document costs time before any check could refuse it. Where the parser has
    a limit of its own that bites first (libyaml >= 0.2.6 stops flow nesting
    at 1,000 levels while its scanner looks ahead on one line), its error is
    the message: either way one line naming the file and the place."""
    parser = _BaseLoader(text)
    depth = values = 0
    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                      event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent,
                                  yaml.SequenceStartEvent)):
                values += 1
                if values > MAX_VALUES:
                    raise _TooBig(f"more than {MAX_VALUES} values")
    finally:
        parser.dispose()


class _TooBig(Exception):
    pass


def _measure(root) -> None:
    """Refuse a document that is too large or deep once its aliases are expanded.

    YAML shares an aliased value instead of copying it, so ten levels of ten
    aliases load in microseconds -- and validation, which walks (and quotes)
    values, would then meet ten billion of them. Sizes are memoised per shared
    object, so this walk itself stays linear in what the file really holds.
    """
    sizes: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()

    def visit(node, depth: int) -> tuple[int, int]:
        if not isinstance(node, (dict, list, set)):
            return 1, 0
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            raise _TooBig("a value contains itself (a recursive alias)")
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested deeper than {MAX_DEPTH} levels (counting aliases)")
        open_.add(id(node))
        total, deepest = 1, 0
        for child in itertools.chain.from_iterable(node.items()) if isinstance(node, dict) else node:
            size, child_depth = visit(child, depth + 1)
            total += size
            deepest = max(deepest, child_depth + 1)
            if total > MAX_VALUES:
                raise _TooBig(f"more than {MAX_VALUES} values once its aliases are expanded")
            if depth + deepest > MAX_DEPTH:
                raise _TooBig(f"nested deeper than {MAX_DEPTH} levels (counting aliases)")
        open_.discard(id(node))
        sizes[id(node)] = (total, deepest)
        return total, deepest

    visit(root, 0)


def _read(path: Path) -> bytes:
    """The file's bytes: only a regular file, only up to MAX_FILE_BYTES. A FIFO
    is opened without blocking and refused, so it cannot hang the harness."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise MatrixError(path, ["no such file"]) from None
    except IsADirectoryError:
        raise MatrixError(path, ["is a folder, not a matrix file"]) from None
    except OSError as exc:
        raise MatrixError(path, [f"cannot read: {exc.strerror}"]) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise MatrixError(path, ["is a folder, not a matrix file"])
        if not stat.S_ISREG(mode):
            raise MatrixError(path, ["is not a regular file (a pipe, a device or a socket)"])
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise MatrixError(path, [f"cannot read: {exc.strerror}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise MatrixError(path, [f"larger than {MAX_FILE_BYTES >> 20} MiB; a matrix is a few KiB"])
    return data


def load(path: str | Path, resolver: releases.Resolver | None = None,
         base: str | Path | None = None) -> Matrix:
    """Read, validate and expand a matrix file. `resolver` expands version ranges
    (``harness.releases``; by default from the cache or the index, without a record).
    `base`: the folder the user's code paths start from (default: the matrix file's folder; a
    Slurm task loads the submission's copy of the matrix with the original folder)."""
    path = Path(path)
    data = _read(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MatrixError(path, [f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"]) from None
    try:
        _scan(text)
        raw = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _TooBig as exc:
        raise MatrixError(path, [f"the document is too large: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        problem = " ".join(str(problem).split())  # one line
        problem = problem if len(problem) <= 200 else problem[:200] + "..."
        raise MatrixError(path, [f"{where}YAML syntax error: {problem}"]) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of 5,000 digits
        raise MatrixError(path, [f"a value cannot be read: {_show(str(exc))}"]) from None
    if not isinstance(raw, dict):
        raise MatrixError(path, ["expected a mapping at the top level (environments:, workloads:, ...)"])
    try:
        _measure(raw)
    except _TooBig as exc:
        raise MatrixError(path, [f"the document is too large: {exc}"]) from None
    return parse(raw, path, hashlib.sha256(data).hexdigest(), resolver, base=base)


def _raise(path: Path, problems: list[str]) -> None:
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
    raise MatrixError(path, problems)


def parse(raw: dict, path: Path, sha256: str = "", resolver: releases.Resolver | None = None,
          base: str | Path | None = None) -> Matrix:
    check = _Checker(path, resolver, base)
    check.keys("", raw, TOP_KEYS, required=("environments", "workloads"))
    if "name" in raw:
        if isinstance(raw["name"], str):
            check.name("name", raw["name"])
        run_name = raw["name"]
    else:
        run_name = path.stem
        if names.problem(run_name):
            check.problem("", f"the file name {names.problem(run_name)}; set 'name:'")
    check.text("description", raw.get("description"))
    check.release_options = _release_options(check, raw.get("releases"))
    _watch_options(check, raw.get("watch"))
    if resolver is not None and isinstance(run_name, str) and not names.problem(run_name):
        resolver.bind(run_name)

    envs = _entries(check, raw, "environments", _environments)
    workloads = _entries(check, raw, "workloads", _workload)
    par_raw = _list_of(raw, "parallelism") or [{"wrapper": "none", "devices": 1}]

    for what, items in (("environments", envs), ("workloads", workloads)):
        counts = collections.Counter(item.name for item in items)
        for name in sorted(n for n, k in counts.items() if k > 1):
            check.problem(what, f"two entries are named '{name}'; give them distinct 'name:' keys")

    batches = _list_of(raw, "batch_sizes") or [128]
    for i, b in enumerate(batches):
        if not _is_type(b, int):
            check.problem(f"batch_sizes[{i}]", f"expected a positive integer, got {_show(b)}")
        else:
            check.bounded(f"batch_sizes[{i}]", b, *BATCH_LIMITS)
        if len(check.problems) > MAX_PROBLEMS:
            break
    for key, (low, high) in TOP_LIMITS.items():
        if _is_type(raw.get(key), int):
            check.bounded(key, raw[key], low, high)
    timeouts = raw.get("timeouts", {})
    if isinstance(timeouts, dict):
        check.keys("timeouts", timeouts, TIMEOUT_KEYS)
        for key in TIMEOUT_KEYS:
            if key in timeouts:
                check.bounded(f"timeouts.{key}", timeouts[key], *TIMEOUT_LIMITS, open_low=True)
    memory = raw.get("memory_limit")
    if isinstance(memory, str):
        _size(check, "memory_limit", memory, MIN_MEMORY)
    slurm = raw.get("slurm", {})
    if isinstance(slurm, dict):
        _slurm(check, slurm)
    includes = _rules(check, raw, "include", RULE_KEYS)
    excludes = _rules(check, raw, "exclude", RULE_KEYS)
    expects = _rules(check, raw, "expect", EXPECT_KEYS)
    for i, rule in enumerate(expects):
        if "metric" in rule:
            values.check(check, f"expect[{i}]", rule, [e.name for e in envs])
            if "status" not in rule:
                continue
        if rule.get("status") not in status.ALL:
            check.problem(f"expect[{i}].status", f"expected one of {', '.join(status.ALL)}, "
                          f"got {_show(rule.get('status'))}")
    if len(par_raw) > MAX_RULES:
        check.problem("parallelism", f"at most {MAX_RULES} entries, got {len(par_raw)}")
    if check.problems:
        _raise(path, check.problems)

    repeats = raw.get("repeats", 1)
    count = len(envs) * len(workloads) * len(par_raw) * len(batches) * repeats
    if count > MAX_CELLS:
        _raise(path, [f"the matrix expands to {count} cells, more than {MAX_CELLS}; split it, or narrow it "
                      "with include/exclude"])

    pars_of: dict[str, list[Parallelism]] = {}  # by the environment's device: the default device_kind
    for device in dict.fromkeys(env.device for env in envs):
        pars_of[device] = []
        for i, p_raw in enumerate(par_raw):
            if not isinstance(p_raw, dict):
                check.problem(f"parallelism[{i}]", f"expected a mapping, got {_show(p_raw)}")
                continue
            par = _parallelism(check, f"parallelism[{i}]", p_raw, device)
            if par:
                pars_of[device].append(par)
        if check.problems:
            _raise(path, check.problems)
    all_pars = [par for pars in pars_of.values() for par in pars]
    domains = {"environment": [e.name for e in envs], "workload": [w.name for w in workloads],
               "wrapper": sorted({p.wrapper for p in all_pars}), "devices": sorted({p.devices for p in all_pars}),
               "device_kind": sorted({p.device_kind for p in all_pars}), "feed": sorted({p.feed for p in all_pars}),
               "batch_size": list(dict.fromkeys(batches)), "repeat": list(range(repeats))}
    work = _Rules.work([includes, excludes, expects], domains)
    if work > MAX_MATCH_WORK:
        _raise(path, [f"include / exclude / expect: {work} pattern tests (each field's distinct values x the "
                      f"patterns naming that field), more than {MAX_MATCH_WORK}; use fewer patterns, or one "
                      "pattern with wildcards for many values"])
    rules = [_Rules(r, domains) for r in (includes, excludes, expects)]

    cells = []
    limits = Limits(wall=float(timeouts.get("wall", Limits.wall)),
                    progress=float(timeouts.get("progress", Limits.progress)), memory=memory)
    for env in envs:
        env_masks = [r.mask("environment", env.name) for r in rules]
        for work_, par in itertools.product(workloads, pars_of[env.device]):
            par_masks = [m & r.mask("workload", work_.name) & r.mask("wrapper", par.wrapper)
                         & r.mask("devices", par.devices) & r.mask("device_kind", par.device_kind)
                         & r.mask("feed", par.feed) for m, r in zip(env_masks, rules, strict=True)]
            for batch, repeat in itertools.product(batches, range(repeats)):
                inc, exc, exp = (m & r.mask("batch_size", batch) & r.mask("repeat", repeat)
                                 for m, r in zip(par_masks, rules, strict=True))
                if (includes and not inc) or exc:
                    continue
                cells.append(Cell(environment=env, workload=work_, parallelism=par, batch_size=batch,
                                  epochs=raw.get("epochs", 1), repeat=repeat, seed=raw.get("seed", 1234),
                                  limits=limits, expect=values.expectation(rules[2].every(exp))))
    counts = collections.Counter(c.id for c in cells)
    dupes = sorted(i for i, k in counts.items() if k > 1)
    if dupes:
        _raise(path, [f"cell id '{d}' occurs twice; give the entries distinct names" for d in dupes])
    if not cells:
        _raise(path, ["the matrix expands to no cells (check include/exclude)"])
    _plain_cells(check, cells, workloads)
    cells = chains.link(check, cells)
    if check.problems:
        _raise(path, check.problems)
    return Matrix(path=path, name=run_name, description=raw.get("description", ""),
                  sha256=sha256, cells=cells, slurm=slurm if isinstance(slurm, dict) else {},
                  resolver=check.resolver if check.resolver and check.resolver.used else None)
