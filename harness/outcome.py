"""Turning what was observed about a cell process into a status and an error.

The order of the checks is the point: a kill for memory or a timeout explains
everything after it; a result the workload wrote is the best evidence there
is; only then do exit codes and signals speak. Exit 137 alone is *not* called
an OOM (anything can send SIGKILL): it takes the engine's OOM flag or a
MemoryError / ResourceExhaustedError seen by the workload itself.
"""

from __future__ import annotations

import re
import signal as signals
from dataclasses import dataclass

from .supervise import RawOutcome
from .workloads.protocol import EXIT_ERROR, EXIT_UNSUPPORTED, NOT_ENGAGED

OOM_TYPES = ("MemoryError", "ResourceExhaustedError", "OutOfMemoryError")
IMPORT_TYPES = ("ImportError", "ModuleNotFoundError")


@dataclass
class Verdict:
    status: str
    error: dict | None = None
    reason: str | None = None


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def normalise(message: str) -> str:
    """Strip what varies between runs and machines so failures group.

    Paths, hex addresses, numbers and quoted temp names go; the words stay.
    """
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"0x[0-9a-fA-F]+", "<addr>", text)
    text = re.sub(r"(/[\w.\-+]+)+/?", "<path>", text)
    text = re.sub(r"\d+(\.\d+)*", "<n>", text)
    text = re.sub(r"\s+", " ", text)
    return text[:200]


def _root_message(message: str) -> str:
    """TF 2 wraps errors raised inside a traced function as "in user code:" +
    a stack + the real "SomeError: message" at the end; that last line is what
    groups, not the wrapper."""
    if not message.lstrip().startswith("in user code:"):
        return message
    for line in reversed(message.strip().splitlines()):
        m = re.match(r"^\s*[A-Za-z_][\w.]*(Error|Exception): (.+)$", line)
        if m:
            return m.group(2)
    return message


def signature(kind: str, type_: str | None, message: str | None) -> str:
    short = (type_ or "").rsplit(".", 1)[-1]
    message = _root_message(message) if message else message
    parts = [kind] + ([short] if short else []) + ([normalise(message)] if message else [])
    return ": ".join(p for p in parts if p)


def _last_exception(stderr_tail: str) -> tuple[str, str] | None:
    """(type, message) of the last 'Type: message' line after a traceback."""
    missing = re.search(r"No module named ([\w.]+)\s*$", stderr_tail.strip())
    if missing:  # `python -m pkg` says this without a traceback when pkg is not importable
        return "ModuleNotFoundError", f"No module named {missing.group(1)}"
    if "Traceback (most recent call last)" not in stderr_tail:
        return None
    for line in reversed(stderr_tail.strip().splitlines()):
        m = re.match(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning))(: (.*))?$", line.strip())
        if m:
            return m.group(1), m.group(4) or ""
    return None


def _error(kind: str, type_: str | None, message: str, raw: RawOutcome, **extra) -> dict:
    return {"kind": kind, "type": type_, "message": message, "signature": signature(kind, type_, message),
            "exit_code": raw.exit_code, "signal": raw.signal, **extra}


def not_engaged(workload: dict, asked: int, utilisation: dict | None) -> str | None:
    """Why a multi-device run that finished did not really use its devices, or None.

    Two witnesses: the workload's own evidence (replicas in sync, sharding of
    the variables, devices the replica outputs were computed on), and, on
    GPUs, the host's NVML samples of each assigned GPU over the steady epochs.
    Either one showing fewer devices at work than asked is enough.
    """
    if asked < 2:
        return None
    ran_on = (workload.get("engagement") or {}).get("ran_on")
    if isinstance(ran_on, int) and ran_on < asked:
        return NOT_ENGAGED % (asked, ran_on)
    sampled = {gpu: u for gpu, u in (utilisation or {}).items() if u.get("n", 0) >= 3}
    if len(sampled) == asked:
        busy = sum(1 for u in sampled.values() if u["max"] > 0)
        if busy < asked:
            return NOT_ENGAGED % (asked, busy) + " (GPU utilisation sampled through NVML)"
    return None


def classify(raw: RawOutcome, workload: dict | None, last_event: dict | None, stderr_tail: str,
             asked: int = 1, utilisation: dict | None = None) -> Verdict:
    last = (last_event or {}).get("event", "nothing")
    if raw.timed_out:
        what = ("no progress within the progress limit" if raw.timed_out == "progress"
                else "over the wall-clock limit")
        return Verdict("timeout", _error("timeout", None, f"{what}; last event: {last}", raw,
                                         timed_out=raw.timed_out, last_event=last_event))
    if raw.oom_killed:
        return Verdict("oom", _error("oom", None, "killed for memory (OOM killer)", raw, last_event=last_event))
    if workload is not None:
        outcome = workload.get("outcome")
        if outcome == "ok" and raw.exit_code == 0:
            problem = not_engaged(workload, asked, utilisation)
            if problem:  # the counts are the finding: kept, not normalised away
                return Verdict("error", {**_error("engagement", None, problem, raw),
                                         "signature": f"engagement: {problem}"})
            return Verdict("ok")
        if outcome == "unsupported":
            return Verdict("unsupported", reason=workload.get("reason"))
        if outcome == "error":
            err = workload.get("error") or {}
            type_, message = err.get("type") or "", err.get("message") or ""
            short = type_.rsplit(".", 1)[-1]
            if short in OOM_TYPES:
                return Verdict("oom", _error("oom", type_, message, raw, traceback=err.get("traceback")))
            kind = "import" if short in IMPORT_TYPES else "exception"
            return Verdict("error", _error(kind, type_, message, raw, traceback=err.get("traceback")))
    if raw.signal:
        return Verdict("crash", _error("signal", None, f"killed by {raw.signal}; last event: {last}", raw,
                                       last_event=last_event))
    if raw.exit_code == 0:
        return Verdict("crash", _error("silent-exit", None, f"exited 0 without a result; last event: {last}",
                                       raw, last_event=last_event))
    parsed = _last_exception(stderr_tail)
    if parsed:  # Python died before the workload could record it (e.g. the package would not import)
        type_, message = parsed
        short = type_.rsplit(".", 1)[-1]
        kind = "import" if short in IMPORT_TYPES else "exception"
        status = "oom" if short in OOM_TYPES else "error"
        return Verdict(status, _error(kind, type_, message, raw))
    if raw.exit_code in (EXIT_ERROR, EXIT_UNSUPPORTED):
        message = f"exit code {raw.exit_code} but no workload.json; last event: {last}"
    else:
        message = f"exit code {raw.exit_code}; last event: {last}"
    return Verdict("crash", _error("exit", None, message, raw, last_event=last_event))
