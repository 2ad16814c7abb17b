"""One environment entry: its Python, its pins (versions, pip requirements, a
base image), which Keras it means (``keras_api``, ``tensorflow_package``,
``backend``) and the variables its cells get -- checked, then named.

The pins say what gets installed and the name says which results are whose,
so both are checked here, in one place, before anything is built.
"""

from __future__ import annotations

import difflib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from harness import stacks, terminal
from harness.cells import Cell, Environment, Workload
from harness.matrix.checker import _Checker, _show, _type_name
from harness.matrix.schema import ENV_KEYS, IMAGE_RE, MAX_REQUIREMENT, PYTHON_RE, VARIABLE_RE, VERSION_CHARS_RE


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
