"""One workload entry: a built-in model with its parameters (defaults filled
in, every number bounded), a planted fault, an idle cell, or the user's own
code (a model factory or a script: checked, hashed, its hash in the spec).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness import chains, usercode
from harness.cells import Workload
from harness.files import outputroots
from harness.matrix.checker import _Checker, _is_type, _key, _show
from harness.matrix.schema import (
    COMMON_WORKLOAD_KEYS,
    MAX_WIDTHS,
    MODEL_DEFAULTS,
    MODEL_KEYS,
    RNN_ARG_CELLS,
    RNN_LAYER_ARGS,
    WIDTHS_LIMITS,
    WORKLOAD_LIMITS,
)
from harness.workloads.protocol import FAULTS, RNN_CELLS, TRAPS


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
    if model == "rnn" and "layer_args" in params:
        _layer_args(check, f"{where}.layer_args", params["cell"], params["layer_args"])
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


ACTIVATION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _layer_args(check: _Checker, where: str, cell: str, args: dict) -> None:
    """`layer_args:` names only arguments in `RNN_LAYER_ARGS`, each of its type, on a GRU or LSTM."""
    if cell not in RNN_ARG_CELLS:
        check.problem(where, f"layer arguments are for the {' and '.join(RNN_ARG_CELLS)} cells, not {_show(cell)}")
        return
    for key, value in args.items():
        kind = RNN_LAYER_ARGS.get(key) if isinstance(key, str) else None
        if kind is None:
            check.problem(f"{where}.{key}", f"expected one of {', '.join(RNN_LAYER_ARGS)}")
        elif not _is_type(value, kind):
            check.problem(f"{where}.{key}", f"expected {kind.__name__}, got {_show(value)}")
        elif kind is str and not ACTIVATION_NAME.fullmatch(value):
            check.problem(f"{where}.{key}", f"expected an activation's name (letters, digits, _), got {_show(value)}")


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
    outputroots.check_apart(code.source, f"{where} in {check.path}")  # an output folder that holds it: one line
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
