"""The settings every cell of a matrix shares or picks from: batch sizes,
epochs / repeats / seed, timeouts, the memory limit, the ``slurm:`` section,
and the parallelism entries (whose default device kind is each
environment's device, so they are built per device)."""

from __future__ import annotations

import difflib

from harness.cells import FEEDS, MAX_MEMORY, WRAPPERS, Environment, Limits, Parallelism, size_bytes
from harness.matrix.checker import _Checker, _is_type, _list_of, _show
from harness.matrix.schema import (
    BATCH_LIMITS,
    DEVICE_LIMITS,
    MAX_PROBLEMS,
    MAX_RULES,
    MIN_MEMORY,
    PAR_KEYS,
    RATIO_LIMITS,
    TIMEOUT_KEYS,
    TIMEOUT_LIMITS,
    TOP_LIMITS,
)
from harness.options.slurm import SLURM_KEYS
from harness.options.slurm import problems as slurm_problems

DEFAULT_BATCH_SIZES = [128]
DEFAULT_PARALLELISM = {"wrapper": "none", "devices": 1}


def _batch_sizes(check: _Checker, raw: dict) -> list:
    batches = _list_of(raw, "batch_sizes") or list(DEFAULT_BATCH_SIZES)
    for i, b in enumerate(batches):
        if not _is_type(b, int):
            check.problem(f"batch_sizes[{i}]", f"expected a positive integer, got {_show(b)}")
        else:
            check.bounded(f"batch_sizes[{i}]", b, *BATCH_LIMITS)
        if len(check.problems) > MAX_PROBLEMS:
            break
    return batches


def _run_settings(check: _Checker, raw: dict) -> None:
    """epochs, repeats, seed; timeouts; memory_limit; slurm."""
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


def _limits(raw: dict) -> Limits:
    """What every cell is given (once `_run_settings` found no problem)."""
    timeouts = raw.get("timeouts", {})
    return Limits(wall=float(timeouts.get("wall", Limits.wall)),
                  progress=float(timeouts.get("progress", Limits.progress)), memory=raw.get("memory_limit"))


def _slurm_section(raw: dict) -> dict:
    slurm = raw.get("slurm", {})
    return slurm if isinstance(slurm, dict) else {}


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




def _parallelism_list(check: _Checker, raw: dict) -> list:
    """The parallelism entries as written (one plain device by default), at most MAX_RULES."""
    par_raw = _list_of(raw, "parallelism") or [dict(DEFAULT_PARALLELISM)]
    if len(par_raw) > MAX_RULES:
        check.problem("parallelism", f"at most {MAX_RULES} entries, got {len(par_raw)}")
    return par_raw


def _parallelisms(check: _Checker, par_raw: list, environments: list[Environment]) -> dict[str, list[Parallelism]]:
    """The parallelism entries per environment device (their default device_kind); stops at the
    first device whose entries have problems."""
    pars_of: dict[str, list[Parallelism]] = {}
    for device in dict.fromkeys(env.device for env in environments):
        pars_of[device] = []
        for i, p_raw in enumerate(par_raw):
            if not isinstance(p_raw, dict):
                check.problem(f"parallelism[{i}]", f"expected a mapping, got {_show(p_raw)}")
                continue
            par = _parallelism(check, f"parallelism[{i}]", p_raw, device)
            if par:
                pars_of[device].append(par)
        check.stop()
    return pars_of


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
