"""The GPU self-check, host side: run ``workloads.selfcheck`` in a prepared
environment and turn its verdict into `usable` (a summary) or
EnvironmentUnavailable (the reason, e.g. a missing ``libcublas.so.9.0``).

It runs at build time and before a matrix spends time on a GPU environment,
so a broken CUDA stack costs one line, not one failure per cell. Without a
GPU it proves what can be proved anywhere (the CUDA / cuDNN libraries the
framework was built for are there and load); with one, it also runs a
matmul, a convolution and a cuDNN RNN step under ``TIMEOUT``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

from harness import WORKLOADS
from harness.cells import Environment
from harness.engines.base import Engine, Prepared, cache_dir
from harness.errors import EnvironmentUnavailable
from harness.host import resources

TIMEOUT = 600.0  # seconds; an import of TF + three small GPU ops take well under a minute when healthy
LABEL = "tfkeras-harness"


def needed(env: Environment) -> bool:
    """Only GPU environments have CUDA libraries to check."""
    return env.device == "gpu"


def framework(env: Environment) -> str:
    """The framework whose CUDA build the environment depends on."""
    if env.api == "keras3" and env.backend in ("jax", "torch"):
        return env.backend
    return "tensorflow"


# a changed self-check is a new check: its script, the library checks it calls, the stack's reading
_SCRIPT_SHA = hashlib.sha256(b"".join((WORKLOADS / name).read_bytes()
                                      for name in ("selfcheck.py", "cudalibs.py", "compat.py"))).hexdigest()


def _passed_file(engine: Engine, prepared: Prepared, gpus: list[str]) -> Path:
    """Where a passed check is remembered: per environment, engine, host and GPU set."""
    env = prepared.environment
    key = json.dumps([env.name, env.content_hash(), engine.name, str(prepared.handle), socket.gethostname(),
                      gpus, _SCRIPT_SHA], sort_keys=True)
    return cache_dir() / "selfcheck" / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def check(engine: Engine, prepared: Prepared, workloads_root: Path, log_path: Path,
          timeout: float = TIMEOUT, reuse: bool = False, gpus: list | None = None) -> dict:
    """Run the self-check; return its report, or raise EnvironmentUnavailable with the reason.

    On `gpus` (resources.Gpu: a run's own; None: those a run would take by default, as
    `resources.discover` finds them: HARNESS_GPUS, CUDA_VISIBLE_DEVICES, else every GPU), and only those: a run
    given GPUs 0 and 1 of a shared host must not take memory on GPUs 2 and 3, where another run
    may be training (JAX reserves most of every GPU it sees), nor fail for what they hold.

    The GPU operations run only where this host lists an NVIDIA GPU. The report's
    summary also goes into the environment's provenance (``selfcheck``), so
    every result records the CUDA / cuDNN versions its framework was built for.
    With `reuse` (a `run`), a check this environment passed on this host with
    the same GPUs is taken as it stands: it costs an import of the framework
    and three GPU operations (about 10 s), every run, for no new information.
    `build` always checks afresh.
    """
    wanted = resources.discover().gpus if gpus is None else gpus
    mine = [g for g in resources.nvml_gpus() if any(g.index == o.index or (g.uuid and g.uuid == o.uuid)
                                                    for o in wanted)]
    listed = [g.uuid or g.index for g in mine]
    passed = _passed_file(engine, prepared, listed)
    if reuse and passed.is_file():
        try:
            report = json.loads(passed.read_text())
        except (OSError, ValueError):
            report = None
        if report and report.get("ok"):
            prepared.provenance["selfcheck"] = {**summary_fields(report), "reused": True}
            return report
    argv = ["-m", "workloads.selfcheck", "--framework", framework(prepared.environment),
            "--gpu", "auto" if mine else "no"]
    code, out, err = engine.exec(prepared, argv, workloads_root, timeout, gpus=[g.index for g in mine])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        log.write(f"$ python {' '.join(argv)}  (exit {code})\n{out}\n{err}\n")
    tail = (out + "\n" + err)[-6000:]
    if code is None:
        raise EnvironmentUnavailable(f"self-check ran past {timeout:.0f} s"
                                     + (" (the GPU operations hung)" if mine else ""), tail)
    report = _last_json(out)
    if report is None:
        last = next((ln for ln in reversed(err.splitlines()) if ln.strip()), f"exit code {code}")
        raise EnvironmentUnavailable(f"self-check did not report (exit {code}): {last.strip()[:300]}", tail)
    if not report.get("ok"):
        raise EnvironmentUnavailable("self-check: " + "; ".join(report.get("problems") or ["failed"])[:600], tail)
    prepared.provenance["selfcheck"] = summary_fields(report)
    passed.parent.mkdir(parents=True, exist_ok=True)
    tmp = passed.with_name(passed.name + f".{os.getpid()}")
    tmp.write_text(json.dumps(report))
    os.replace(tmp, passed)
    return report


def _last_json(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def summary_fields(report: dict) -> dict:
    """What provenance keeps: versions built for and found, not the whole report."""
    built = report.get("built_for") or {}
    return {
        "framework": report.get("framework"),
        "version": report.get("version"),
        "cuda_built_for": built.get("cuda"),
        "cudnn_built_for": built.get("cudnn"),
        "libraries": {lib["family"]: lib.get("version") or lib.get("real") for lib in report.get("libraries", [])
                      if lib.get("loaded")},
        "gpus": report.get("gpus") or [],
        "gpu_ops": {name: op.get("ok") for name, op in (report.get("gpu_ops") or {}).items()},
        "driver": report.get("driver"),
    }


def summary(report: dict) -> str:
    """One line for a person: built for CUDA x / cuDNN y; n libraries loaded (versions); GPU ops."""
    fields = summary_fields(report)
    libs = fields["libraries"]
    text = (f"{fields['framework']} {fields['version'] or '?'} built for CUDA {fields['cuda_built_for']} / "
            f"cuDNN {fields['cudnn_built_for']}; {len(libs)} libraries load: "
            + ", ".join(f"{name} {version}" for name, version in libs.items()))
    if fields["gpu_ops"]:
        text += "; on " + ", ".join(fields["gpus"]) + ": " + ", ".join(
            f"{name} {'ok' if ok else 'FAILED'}" for name, ok in fields["gpu_ops"].items())
    else:
        text += "; no GPU here: GPU operations not run"
    return text


def labels(report: dict) -> dict[str, str]:
    """Image labels: what the framework was built for and what the self-check found."""
    fields = summary_fields(report)
    return {f"{LABEL}.cuda": str(fields["cuda_built_for"]), f"{LABEL}.cudnn": str(fields["cudnn_built_for"]),
            f"{LABEL}.cuda-libraries": json.dumps(fields["libraries"], sort_keys=True)}
