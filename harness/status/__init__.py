"""The result model's fixed words, and the judgements made about a result.

The status vocabulary is fixed (reports, tests and outside checks depend on
it); it is spelled here once, and host code names a status only through these
constants. So are the two judgements every command makes about a stored
result: what its failure says in one line, and whether a control cell gave
the answer its matrix expects. `run`, `report` and `repro`
all ask this module, so they cannot disagree about the same folder.
"""

from __future__ import annotations

from harness.status import values

OK = "ok"
ERROR = "error"          # a Python exception ended it
CRASH = "crash"          # the process died without a result (a signal, an abnormal exit)
OOM = "oom"              # killed for memory
TIMEOUT = "timeout"      # no progress within the limit, or over the wall limit
UNAVAILABLE = "unavailable"  # the environment could not be had
UNSUPPORTED = "unsupported"  # the host lacks what the cell needs

ALL = (OK, ERROR, CRASH, OOM, TIMEOUT, UNAVAILABLE, UNSUPPORTED)
FAILED = (ERROR, CRASH, OOM, TIMEOUT)     # it ran, and failed
NOT_RUN = (UNAVAILABLE, UNSUPPORTED)      # it could not run here
# Not a status: the watch's word for an ok cell that missed a value its matrix expects (a silent
# change), compared along a release series like one.
DRIFTED = "drifted"


def css_class(word: str) -> str:
    """The class a page shows a status word with (htmlpage's styles): each status its own, a
    drift flagged, a mixed word ('error (2/4)') by its first word."""
    first = word.split(" ")[0] if word else ""
    return first if first in ALL else "flag" if first == DRIFTED else "crash" if first else ""


# An unavailable environment may become available (a network came back, an
# interpreter was installed): such cells are always tried again.
RETRIED_ALWAYS = frozenset({UNAVAILABLE})

# The error kind of a cell the harness's own code failed around (its engine's set-up, a Slurm task,
# a launcher): recorded as an `error` so no cell goes missing, told apart from the cell's own
# errors, and tried again by the next run like an unavailable one -- it says nothing of the stack.
HARNESS_FAULT = "harness"


def retried_always(result) -> bool:
    """Does the next run try this stored result again whatever it is asked to rerun?"""
    return result["status"] in RETRIED_ALWAYS or ((result.get("error") or {}).get("kind") == HARNESS_FAULT)


def failure_text(result) -> str:
    """What a result's failure says in one line: its signature, else its reason
    (`result.Result.failure_text`; this spelling also reads a raw result dict)."""
    return (result.get("error") or {}).get("signature") or result.get("reason") or ""


def failure_line(result) -> str:
    """'status: what happened' for one failed result, said once: a signature carries its
    kind as a prefix ('unavailable: ...'), which is not repeated after the status word;
    a cell that never ran (unavailable, unsupported) is told by its reason, whole, since
    the signature's normalised '<path>' and '<n>' hide the very path and version that
    explain it."""
    word = result.get("status") or "?"
    text = (result.get("reason") if word in NOT_RUN else None) or failure_text(result)
    text = str(text)
    if text.lower().startswith(f"{word}: "):
        text = text[len(word) + 2:]
    return f"{word}: {text}" if text else word


def judge(expect: dict | None, result, peer=None) -> dict | None:
    """Did a control cell give the answer its matrix expects? None for other cells.
    `result` is a `result.Result` (or a raw result dict).

    Value expectations (``expect["values"]``, harness/status/values.py) are judged too;
    `peer(cell_id)` gives another environment's stored result for ``same_as``.
    `met` is None while such a peer has no result yet (the run judges again at its end)."""
    if not expect:
        return None
    want_status = expect.get("status")
    status_ok = want_status is None or result["status"] == want_status
    want_sig = expect.get("signature")
    sig_ok = not want_sig or want_sig.lower() in failure_text(result).lower()
    out = {"status": want_status, "signature": want_sig, "met": status_ok and sig_ok, "why": expect.get("why")}
    if expect.get("values"):
        out["values"] = values.judge(expect["values"], result, peer, not_run=NOT_RUN)
        judged = [v for v in out["values"] if v.get("here") is not False]  # the rest: not judged here
        if not judged and want_status is None and not want_sig:
            out.update(met=None, judged=False)  # nothing this host could judge: not a failure
        elif out["met"] and any(v["met"] is False for v in judged):
            out["met"] = False
        elif out["met"] and any(v["met"] is None for v in judged):
            out["met"] = None
    return out
