"""Assembling result.json from the evidence a cell run left behind."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import subprocess
from functools import cache
from pathlib import Path

from . import SCHEMA, __version__
from .cells import Cell
from .launch import warmth_record
from .outcome import Verdict
from .stats import spread_of, steady
from .store import read_json
from .supervise import RawOutcome
from .workloads.protocol import EVENTS_FILE, STDERR_FILE, STDOUT_FILE, WORKLOAD_FILE

TAIL_CHARS = 4000


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@cache
def harness_commit() -> str | None:
    """The project's own commit, or None: a package installed into some other
    git checkout (a site-packages inside a repository) must not name that one."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != here.parent:
            return None
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def read_events(path: Path) -> list[dict]:
    events = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash
    return events


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def timing(epochs: list[dict], workload_timing: dict, raw_seconds: float | None) -> dict:
    """Startup, first epoch and steady state kept apart: epoch 1 carries graph
    building and compilation, so steady-state figures use epochs 2..N only."""
    steady_epochs = steady(epochs)
    out = {
        "total_seconds": round(raw_seconds, 3) if raw_seconds is not None else None,
        "startup_seconds": workload_timing.get("startup_seconds"),
        "import_seconds": workload_timing.get("import_seconds"),
        "phases": workload_timing.get("phases"),
        "first_epoch_seconds": epochs[0]["seconds"] if epochs else None,
        "steady_samples_per_sec": None,
        "steady_epoch_seconds": None,
    }
    rate, seconds = spread_of(e["samples_per_sec"] for e in steady_epochs), spread_of(
        e["seconds"] for e in steady_epochs)
    if rate and seconds:
        out["steady_samples_per_sec"] = round(rate.median, 2)
        out["steady_epoch_seconds"] = round(seconds.median, 4)
        out["steady_samples_per_sec_spread"] = rate.as_dict()
    return out


def partial_epochs(events: list[dict]) -> list[dict]:
    keep = ("epoch", "seconds", "epoch_seconds", "samples_per_sec", "loss", "accuracy", "val_loss",
            "val_accuracy")
    return [{k: e.get(k) for k in keep} for e in events if e.get("event") == "epoch"]


def overhead(raw: RawOutcome | None, events: list[dict], spawned: float | None,
             runner_seconds: float | None) -> dict:
    """Where the time around the workload went.

    `harness_overhead_seconds`: the runner's time for the cell (claim, folder,
    spec, spawn, supervision, verdict, result) minus the cell process's life.
    `interpreter_start_seconds` (spawn to the workload's first event) and
    `teardown_seconds` (last event to the process's exit: the framework shutting
    down) belong to the cell's process, and are reported, not hidden.
    """
    if raw is None or spawned is None:
        return {}
    out = {"host_seconds": round(raw.seconds, 3)}
    if runner_seconds is not None:
        out["harness_overhead_seconds"] = round(max(0.0, runner_seconds - raw.seconds), 3)
    if events and not raw.timed_out:  # a killed cell's last event is not when its process ended
        out["interpreter_start_seconds"] = round(events[0].get("wall", spawned) - spawned, 3)
        out["teardown_seconds"] = round(spawned + raw.seconds - events[-1].get("wall", spawned), 3)
    return out


def assemble(cell: Cell, engine: str, provenance: dict, raw: RawOutcome | None, verdict: Verdict,
             workdir: Path, matrix_path: str, matrix_sha256: str, started: str, slot=None,
             extra: dict | None = None) -> dict:
    extra = extra or {}
    workload = read_json(workdir / WORKLOAD_FILE) or {}
    events = read_events(workdir / EVENTS_FILE)
    epochs = workload.get("epochs") or partial_epochs(events)
    engagement = dict(workload.get("engagement") or {})
    if extra.get("utilisation"):
        engagement["gpu_utilisation"] = extra["utilisation"]
    timing_ = timing(epochs, workload.get("timing") or {}, raw.seconds if raw else None)
    timing_.update(overhead(raw, events, extra.get("spawned"), extra.get("runner_seconds")))
    if raw is not None and extra.get("spawned"):  # when the cell held its slot, on the host's clock
        timing_["window"] = [round(extra["spawned"], 3), round(extra["spawned"] + raw.seconds, 3)]
    return {
        "schema": SCHEMA,
        "cell": cell.id,
        "status": verdict.status,
        "reason": verdict.reason,
        "engine": engine,
        "environment": cell.environment.name,
        "workload": cell.workload.name,
        "parallelism": cell.parallelism.spec() | {"label": cell.parallelism.label},
        "batch_size": cell.batch_size,
        "epochs_asked": cell.epochs,
        "repeat": cell.repeat,
        "seen": workload.get("seen") or {},
        "parameters": workload.get("parameters"),
        "placement": workload.get("placement"),
        "engagement": engagement or None,
        "resources": slot.describe() if slot is not None else None,
        "samples": workload.get("samples"),
        "metrics": workload.get("metrics") or {},
        "epochs": epochs,
        "timing": timing_,
        "warmth": warmth_record(workload, raw),
        "error": verdict.error,
        "exit": None if raw is None else {"code": raw.exit_code, "signal": raw.signal,
                                          "oom_killed": raw.oom_killed, "timed_out": raw.timed_out,
                                          **raw.detail},
        "expect": cell.expect,
        "provenance": {
            **provenance,
            "harness_version": __version__,
            "harness_commit": harness_commit(),
            "matrix": matrix_path,
            "matrix_sha256": matrix_sha256,
            "host": {"name": platform.node(), "platform": platform.platform(),
                     "python": platform.python_version()},
        },
        "logs": {"stdout_tail": tail(workdir / STDOUT_FILE), "stderr_tail": tail(workdir / STDERR_FILE)},
        "started": started,
        "finished": now(),
    }


def sha256_of_tree(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
