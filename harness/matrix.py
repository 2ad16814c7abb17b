"""Matrix files: load, validate, expand into cells.

Validation runs before anything is built or run, and reports every problem
with the file, the key path and what was expected (plus the closest valid key
for a typo), because a matrix that dies an hour into a run on a misspelt key
is the failure users remember.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from . import stacks
from .cells import FEEDS, WRAPPERS, Cell, Environment, Limits, Parallelism, Workload
from .errors import MatrixError

PYTHON_RE = re.compile(r"^3\.\d{1,2}(\.\d{1,2})?$")
MEMORY_RE = re.compile(r"^\d+(\.\d+)?[kmg]?$", re.I)
FAULTS = ("segfault", "abort", "memory", "hang", "exception", "import", "silent_exit")
STATUSES = ("ok", "error", "crash", "oom", "timeout", "unavailable", "unsupported")

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
}
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "rnn": {"cell": "gru", "layers": 4, "units": 512, "dense": 128, "timesteps": 32, "features": 16,
            "classes": 4, "samples": 4096},
    "convnet": {"classes": 10, "samples": 6000},
    "maxing": {"classes": 10, "samples": 4096},
    "dense": {"features": 8000, "samples": 8192},
    "fault": {},
}
COMMON_WORKLOAD_KEYS = {"name": str, "model": str, "learning_rate": float}
RNN_CELLS = ("gru", "cudnn_gru", "lstm", "cudnn_lstm")

ENV_KEYS = {"name": str, "python": str, "tensorflow": str, "keras": str, "backend": str,
            "packages": list, "force": list, "device": str, "base_image": str,
            "keras_api": str, "tensorflow_package": str, "env": dict}
VARIABLE_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
PAR_KEYS = {"wrapper": str, "devices": int, "device_kind": str, "ratios": list, "feed": str}
RULE_KEYS = {"environment": (str, list), "workload": (str, list), "wrapper": (str, list),
             "devices": (int, list), "device_kind": (str, list), "feed": (str, list),
             "batch_size": (int, list), "repeat": (int, list)}
EXPECT_KEYS = {**{k: v for k, v in RULE_KEYS.items() if k != "repeat"},
               "status": str, "signature": str, "why": str}
TOP_KEYS = {"name": str, "description": str, "environments": list, "workloads": list,
            "parallelism": list, "batch_sizes": list, "epochs": int, "repeats": int, "seed": int,
            "timeouts": dict, "memory_limit": str, "include": list, "exclude": list, "expect": list}
TIMEOUT_KEYS = {"wall": (int, float), "progress": (int, float)}


@dataclass
class Matrix:
    path: Path
    name: str
    description: str
    sha256: str
    cells: list[Cell]

    @property
    def environments(self) -> list[Environment]:
        seen: dict[str, Environment] = {}
        for cell in self.cells:
            seen.setdefault(cell.environment.name, cell.environment)
        return list(seen.values())


class _Checker:
    """Collects problems, so one run of validation reports all of them."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}" if where else message)

    def keys(self, where: str, mapping: dict, allowed: dict, required: tuple = ()) -> None:
        for key in mapping:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), list(allowed), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(allowed)}"
                self.problem(f"{where}.{key}" if where else str(key), f"unknown key{hint}")
                continue
            expected = allowed[key]
            value = mapping[key]
            if not _is_type(value, expected):
                self.problem(f"{where}.{key}" if where else str(key),
                             f"expected {_type_name(expected)}, got {_type_name(type(value))} {value!r}")
        for key in required:
            if key not in mapping:
                self.problem(f"{where}.{key}" if where else key, "required key is missing")

    def typed(self, mapping: dict, key: str, expected, where: str) -> bool:
        return key in mapping and _is_type(mapping[key], expected)


def _is_type(value, expected) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        return False  # YAML 'yes' must not pass as an int
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, types)


def _type_name(expected) -> str:
    names = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a mapping",
             bool: "a boolean", type(None): "nothing"}
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(names.get(t, t.__name__) for t in types)


def _version(check: _Checker, where: str, value) -> str | None:
    if value is None:
        return None
    try:
        Version(str(value))
    except InvalidVersion:
        check.problem(where, f"'{value}' is not a valid version (PEP 440), e.g. '1.12.0'")
        return None
    return str(value)


def _environment(check: _Checker, where: str, raw: dict) -> Environment | None:
    before = len(check.problems)
    check.keys(where, raw, ENV_KEYS, required=("python",))
    python = raw.get("python")
    if isinstance(python, (int, float)) and not isinstance(python, bool):
        check.problem(f"{where}.python", f"write the version as a string, e.g. python: \"{python}\" "
                      "(YAML reads 3.10 as the number 3.1)")
        return None
    if isinstance(python, str) and not PYTHON_RE.match(python):
        check.problem(f"{where}.python", f"'{python}' is not a Python version like '3.6' or '3.11.7'")
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
                          f"got {backend!r}")
    if not tf and not (keras and Version(keras).major >= 3 and backend in ("jax", "torch")):
        check.problem(where, "needs 'tensorflow' (or Keras 3 with backend jax or torch)")
    device = raw.get("device", "cpu")
    if device not in ("cpu", "gpu"):
        check.problem(f"{where}.device", f"expected 'cpu' or 'gpu', got {device!r}")
    packages = raw.get("packages", [])
    force = raw.get("force", [])
    for key, reqs in (("packages", packages), ("force", force)):
        for i, req in enumerate(reqs if isinstance(reqs, list) else []):
            try:
                Requirement(str(req))
            except InvalidRequirement as exc:
                check.problem(f"{where}.{key}[{i}]", f"not a pip requirement: {exc}")
    variables = _variables(check, where, raw.get("env"))
    if len(check.problems) > before:
        return None
    tf_package = raw.get("tensorflow_package")
    name = raw.get("name") or stacks.environment_name(tf, keras, backend, device, keras_api, tf_package)
    return Environment(name=name, python=python, tensorflow=tf, keras=keras,
                       backend=backend if (keras_api or stacks.api(tf, keras)) == "keras3" else None,
                       packages=tuple(str(p) for p in packages), force=tuple(str(p) for p in force), device=device,
                       base_image=raw.get("base_image"), keras_api=keras_api, tensorflow_package=tf_package,
                       env=variables)


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
    elif chosen in ("standalone", "tf_keras") and keras and Version(keras).major >= 3:
        check.problem(f"{where}.keras", f"{chosen} is Keras 2; '{keras}' is Keras 3 (keras_api: keras3)")
    elif chosen == "keras3" and keras and Version(keras).major < 3:
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
        if not isinstance(name, str) or not VARIABLE_RE.match(name):
            check.problem(key, "a variable name is upper case letters, digits and _ (not starting with a digit)")
        elif name in stacks.RESERVED_VARIABLES:
            why = ("keras_api / backend set it" if name in stacks.KERAS_SWITCHES
                   else "the harness sets it for every cell")
            check.problem(key, f"{name} cannot be set here: {why}")
        elif not isinstance(value, str):
            check.problem(key, f"expected a string, got {_type_name(type(value))} {value!r} (quote it: \"{value}\")")
        else:
            out.append((name, value))
    return tuple(sorted(out))


def _workload_name(model: str, params: dict) -> str:
    if model == "rnn":
        return f"{params['cell'].replace('_', '')}-{params['layers']}x{params['units']}"
    if model == "fault":
        return f"fault-{params.get('fault')}"
    return model


def _workload(check: _Checker, where: str, raw: dict) -> Workload | None:
    model = raw.get("model")
    if model not in MODEL_KEYS:
        check.problem(f"{where}.model", f"expected one of {', '.join(MODEL_KEYS)}, got {model!r}")
        return None
    before = len(check.problems)
    check.keys(where, raw, {**COMMON_WORKLOAD_KEYS, **MODEL_KEYS[model]}, required=("model",))
    params = {**MODEL_DEFAULTS[model], **{k: v for k, v in raw.items() if k not in ("name", "model")}}
    if model == "rnn" and params["cell"] not in RNN_CELLS:
        check.problem(f"{where}.cell", f"expected one of {', '.join(RNN_CELLS)}, got {params['cell']!r}")
    if model == "fault" and params.get("fault") not in FAULTS:
        check.problem(f"{where}.fault", f"expected one of {', '.join(FAULTS)}, got {params.get('fault')!r}")
    for key, value in params.items():
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0 and key != "dropout":
            check.problem(f"{where}.{key}", f"expected a positive number, got {value}")
    if len(check.problems) > before:
        return None
    return Workload(name=raw.get("name") or _workload_name(model, params), model=model, params=params)


def _parallelism(check: _Checker, where: str, raw: dict, default_kind: str) -> Parallelism | None:
    before = len(check.problems)
    check.keys(where, raw, PAR_KEYS, required=("wrapper",))
    wrapper = raw.get("wrapper")
    if isinstance(wrapper, str) and wrapper not in WRAPPERS:
        close = difflib.get_close_matches(wrapper, WRAPPERS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        check.problem(f"{where}.wrapper", f"expected one of {', '.join(WRAPPERS)}, got {wrapper!r}{hint}")
    devices = raw.get("devices", 1)
    if isinstance(devices, int) and devices < 1:
        check.problem(f"{where}.devices", f"expected at least 1, got {devices}")
    kind = raw.get("device_kind", default_kind)
    if kind not in ("cpu", "gpu"):
        check.problem(f"{where}.device_kind", f"expected 'cpu' or 'gpu', got {kind!r}")
    feed = raw.get("feed", "arrays")
    if feed not in FEEDS:
        check.problem(f"{where}.feed", f"expected one of {', '.join(FEEDS)}, got {feed!r}")
    ratios = raw.get("ratios")
    if ratios is not None and wrapper != "ratio":
        check.problem(f"{where}.ratios", f"only the 'ratio' wrapper takes ratios (this is {wrapper!r})")
    elif ratios is not None and isinstance(ratios, list):
        if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in ratios):
            check.problem(f"{where}.ratios", "expected a list of positive integers")
        elif isinstance(devices, int) and len(ratios) != devices:
            check.problem(f"{where}.ratios", f"expected {devices} ratios (one per device), got {len(ratios)}")
    if len(check.problems) > before:
        return None
    return Parallelism(wrapper=wrapper, devices=devices, device_kind=kind,
                       ratios=tuple(ratios) if ratios else None, feed=feed)


def _matches(rule: dict, fields: dict) -> bool:
    for key, want in rule.items():
        if key not in fields:
            continue
        have = fields[key]
        options = want if isinstance(want, list) else [want]
        if not any(fnmatch.fnmatchcase(str(have), str(opt)) for opt in options):
            return False
    return True


def _cell_fields(env: Environment, work: Workload, par: Parallelism, batch: int, repeat: int) -> dict:
    return {"environment": env.name, "workload": work.name, "wrapper": par.wrapper, "devices": par.devices,
            "device_kind": par.device_kind, "feed": par.feed, "batch_size": batch, "repeat": repeat}


def _rules(check: _Checker, raw: dict, key: str, allowed: dict) -> list[dict]:
    rules = raw.get(key, []) if isinstance(raw.get(key, []), list) else []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            check.problem(f"{key}[{i}]", f"expected a mapping, got {rule!r}")
        else:
            check.keys(f"{key}[{i}]", rule, allowed)
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
            check.problem(f"{key}[{i}]", f"expected a mapping, got {item!r}")
            continue
        parsed = parse_one(check, f"{key}[{i}]", item)
        if parsed:
            out.append(parsed)
    return out


def load(path: str | Path) -> Matrix:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise MatrixError(path, ["no such file"]) from None
    except OSError as exc:
        raise MatrixError(path, [f"cannot read: {exc.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise MatrixError(path, [f"{where}YAML syntax error: {problem}"]) from None
    if not isinstance(raw, dict):
        raise MatrixError(path, ["expected a mapping at the top level (environments:, workloads:, ...)"])
    return parse(raw, path, hashlib.sha256(text.encode()).hexdigest())


def parse(raw: dict, path: Path, sha256: str = "") -> Matrix:
    check = _Checker(path)
    check.keys("", raw, TOP_KEYS, required=("environments", "workloads"))

    envs = _entries(check, raw, "environments", _environment)
    workloads = _entries(check, raw, "workloads", _workload)
    par_raw = _list_of(raw, "parallelism") or [{"wrapper": "none", "devices": 1}]

    for what, items in (("environments", envs), ("workloads", workloads)):
        names = [item.name for item in items]
        for name in sorted({n for n in names if names.count(n) > 1}):
            check.problem(what, f"two entries are named '{name}'; give them distinct 'name:' keys")

    batches = _list_of(raw, "batch_sizes") or [128]
    for i, b in enumerate(batches):
        if not _is_type(b, int) or b < 1:
            check.problem(f"batch_sizes[{i}]", f"expected a positive integer, got {b!r}")
    for key in ("epochs", "repeats"):
        value = raw.get(key, 1)
        if _is_type(value, int) and value < 1:
            check.problem(key, f"expected at least 1, got {value}")
    timeouts = raw.get("timeouts", {})
    if isinstance(timeouts, dict):
        check.keys("timeouts", timeouts, TIMEOUT_KEYS)
    memory = raw.get("memory_limit")
    if isinstance(memory, str) and not MEMORY_RE.match(memory):
        check.problem("memory_limit", f"expected a size like '4g' or '512m', got {memory!r}")
    includes = _rules(check, raw, "include", RULE_KEYS)
    excludes = _rules(check, raw, "exclude", RULE_KEYS)
    expects = _rules(check, raw, "expect", EXPECT_KEYS)
    for i, rule in enumerate(expects):
        if rule.get("status") not in STATUSES:
            check.problem(f"expect[{i}].status", f"expected one of {', '.join(STATUSES)}, "
                          f"got {rule.get('status')!r}")
    if check.problems:
        raise MatrixError(path, check.problems)

    cells = []
    limits = Limits(wall=float(timeouts.get("wall", Limits.wall)),
                    progress=float(timeouts.get("progress", Limits.progress)), memory=memory)
    for env in envs:
        pars = []
        for i, p_raw in enumerate(par_raw):
            if not isinstance(p_raw, dict):
                check.problem(f"parallelism[{i}]", f"expected a mapping, got {p_raw!r}")
                continue
            par = _parallelism(check, f"parallelism[{i}]", p_raw, env.device)
            if par:
                pars.append(par)
        if check.problems:
            raise MatrixError(path, check.problems)
        for work, par, batch, repeat in itertools.product(workloads, pars, batches,
                                                          range(raw.get("repeats", 1))):
            fields = _cell_fields(env, work, par, batch, repeat)
            if includes and not any(_matches(rule, fields) for rule in includes):
                continue
            if any(_matches(rule, fields) for rule in excludes):
                continue
            expect = next((r for r in expects if _matches(r, fields)), None)
            cells.append(Cell(environment=env, workload=work, parallelism=par, batch_size=batch,
                              epochs=raw.get("epochs", 1), repeat=repeat, seed=raw.get("seed", 1234),
                              limits=limits, expect=expect))
    ids = [c.id for c in cells]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise MatrixError(path, [f"cell id '{d}' occurs twice; give the entries distinct names" for d in dupes])
    if not cells:
        raise MatrixError(path, ["the matrix expands to no cells (check include/exclude)"])
    return Matrix(path=path, name=str(raw.get("name") or path.stem), description=raw.get("description", ""),
                  sha256=sha256, cells=cells)
