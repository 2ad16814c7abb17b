"""Assembling a cell's `Result` from the evidence it is handed (`evidence.Evidence`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import platform
import subprocess
from functools import cache
from pathlib import Path

from harness import SCHEMA, SOURCE, __version__
from harness.cells import Cell
from harness.host import beside
from harness.host.supervise import RawOutcome
from harness.results.evidence import Evidence
from harness.results.result import Result
from harness.stats import spread_of, steady
from harness.status.outcome import Verdict


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def warmth_record(workload: dict, raw, spawned: float | None = None, cell: str | None = None) -> dict | None:
    """result.json's `warmth`: how the cell launched (warm / fresh, and why fresh on a warm run),
    which caches it was offered and which start-up settings it got (allocation.py), whether its
    compilation hit a cache and where its data came from --
    so a warm first epoch is never compared with a cold one as if equal -- and what of the
    harness's own ran while its process did (`beside`: [] on a machine the harness left quiet;
    beside.py). None: never launched."""
    if raw is None:
        return None
    inside = workload.get("warmth") or {}
    detail = raw.detail or {}
    out = {"launch": detail.get("launch", "fresh"), "notes": detail.get("launch_notes", []),
           "caches": detail.get("caches", []), "settings": detail.get("settings", {}),
           "compile_cache": inside.get("compile_cache"),
           "data": inside.get("data")}
    if inside.get("traced_in_fit") is not None:  # functions JAX traced during fit (workloads/ahead.py)
        out["traced_in_fit"] = inside["traced_in_fit"]
    if spawned:
        # the cell's process: from the end of its wait for a launcher to its end (its own
        # launcher's import, which it waited for, is not beside it), and its own preparation
        # ahead of its turn (standby.py) is not beside it either
        start = max(spawned + float(detail.get("launcher_wait_seconds") or 0.0),
                    float(detail.get("launcher_wait_ended") or 0.0))
        out["beside"] = beside.during(start, spawned + raw.seconds, but=cell)
    return out


@cache
def harness_commit() -> str | None:
    """The project's own commit, or None: a package installed into some other
    git checkout (a site-packages inside a repository) must not name that one."""
    here = SOURCE
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


@cache
def harness_files() -> str:
    """A hash over the harness's own source files (`sha256_of_tree`): what ran, named even
    where there is no checkout to take a commit from (an installed package)."""
    return sha256_of_tree(SOURCE)


def timing(epochs: list[dict], workload_timing: dict, raw_seconds: float | None) -> dict:
    """Startup, first epoch and steady state kept apart: epoch 1 carries graph
    building and compilation, so steady-state figures use epochs 2..N only."""
    steady_epochs = steady(epochs)
    out = {
        "total_seconds": round(raw_seconds, 3) if raw_seconds is not None else None,
        "startup_seconds": workload_timing.get("startup_seconds"),
        "import_seconds": workload_timing.get("import_seconds"),
        "phases": workload_timing.get("phases"),
        **({"standby": workload_timing["standby"]} if workload_timing.get("standby") else {}),
        **({"programs_ahead": workload_timing["programs_ahead"]} if workload_timing.get("programs_ahead") else {}),
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


def assemble(cell: Cell, engine: str, provenance: dict, verdict: Verdict, evidence: Evidence,
             matrix_path: str, matrix_sha256: str, started: str, slot=None) -> Result:
    """The result of one cell run, from the evidence it is handed (nothing is read here)."""
    raw = evidence.raw
    workload = evidence.workload or {}
    epochs = workload.get("epochs") or partial_epochs(evidence.events)
    engagement = dict(workload.get("engagement") or {})
    if evidence.utilisation:
        engagement["gpu_utilisation"] = evidence.utilisation
    timing_ = timing(epochs, workload.get("timing") or {}, raw.seconds if raw else None)
    timing_.update(overhead(raw, evidence.events, evidence.spawned, evidence.runner_seconds))
    if raw is not None and evidence.spawned:  # when the cell held its slot, on the host's clock
        held_from = max(evidence.spawned, raw.went_at or evidence.spawned)  # a follower: from the hand-over
        held_to = evidence.spawned + raw.seconds  # its exit, or the end event that passed the slot on
        if raw.released_at is not None:
            held_to = max(held_from, min(held_to, raw.released_at))
        timing_["window"] = [round(held_from, 3), round(held_to, 3)]
        if raw.went_at is not None or raw.released_at is not None:
            timing_["held_seconds"] = round(held_to - held_from, 3)
    return Result(
        schema=SCHEMA,
        cell=cell.id,
        status=verdict.status,
        reason=verdict.reason,
        engine=engine,
        environment=cell.environment.name,
        workload=cell.workload.name,
        parallelism=cell.parallelism.spec() | {"label": cell.parallelism.label},
        batch_size=cell.batch_size,
        epochs_asked=cell.epochs,
        repeat=cell.repeat,
        seen=workload.get("seen") or {},
        parameters=workload.get("parameters"),
        placement=workload.get("placement"),
        engagement=engagement or None,
        resources=slot.describe() if slot is not None else None,
        samples=workload.get("samples"),
        metrics=workload.get("metrics") or {},
        epochs=epochs,
        timing=timing_,
        error=verdict.error,
        exit=None if raw is None else {"code": raw.exit_code, "signal": raw.signal, "oom_killed": raw.oom_killed,
                                       "timed_out": raw.timed_out, **raw.detail},
        expect=cell.expect,
        provenance={
            **provenance,
            "harness_version": __version__,
            "harness_commit": harness_commit(),
            "harness_files_sha256": harness_files(),
            "matrix": matrix_path,
            "matrix_sha256": matrix_sha256,
            "host": {"name": platform.node(), "platform": platform.platform(),
                     "python": platform.python_version()},
        },
        logs={"stdout_tail": evidence.stdout_tail, "stderr_tail": evidence.stderr_tail},
        started=started,
        finished=now(),
        # the releases a version range (or a bisect) chose: [package, range, version] each
        extra={**evidence.extra, "warmth": warmth_record(workload, raw, evidence.spawned, cell.id),
               **({"releases": [list(r) for r in cell.environment.ranges]} if cell.environment.ranges else {})},
    )


def sha256_of_tree(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
