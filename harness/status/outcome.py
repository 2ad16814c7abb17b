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

from harness import status
from harness.host.supervise import RawOutcome
from harness.workloads.protocol import (
    EXIT_ERROR,
    EXIT_UNSUPPORTED,
    NOT_ENGAGED,
    OUTCOME_ERROR,
    OUTCOME_OK,
    OUTCOME_UNSUPPORTED,
)

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


SIGNATURE_CHARS = 400  # a whole first line; only pathological messages are cut (at a word)
SHORT_CHARS = 90       # what a narrow table cell can hold; the full text stays in `signature`

# A library name keeps its version: libcublas.so.9.0 and libcublas.so.10.0 are two causes.
_LIBRARY = re.compile(r"(?:/[\w.\-+]+)*/?\b(lib[\w+\-]*\.so(?:\.\d+)*)")
_NATIVE_LOAD = re.compile(r"(?:[\w./+\-]*/)?(lib[\w+\-]*\.so(?:\.\d+)*): cannot open shared object file[^\n]*")
# A tensor shape, as TF 1 ("[126,4]", "[?,4]") and TF 2 ("(128, 4)", "(None, 4)") print it: one
# placeholder whatever its rank, so "[<n>,<n>] vs. [<n>,<n>]" and "[<n>] vs. [<n>]" stay one family.
_DIM = r"(?:-?\d+|\?|None)"
_SHAPE = re.compile(rf"\[\s*{_DIM}(?:\s*,\s*{_DIM})*\s*,?\s*\]|\(\s*{_DIM}(?:\s*,\s*{_DIM})*\s*,?\s*\)")
_TRACEBACK = "Traceback (most recent call last):"
_CHAIN_MARKS = {  # how Python prints a link between two exceptions; the inner one comes first
    "The above exception was the direct cause of the following exception:": "cause",
    "During handling of the above exception, another exception occurred:": "context",
}
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: ?(.*))?$")
_EXC_TYPE = re.compile(r"(Error|Exception|Exit|Interrupt|Warning|Failure|Mismatch)$")


def cut(text: str, limit: int) -> str:
    """`text` whole when it fits, else cut at the last word boundary before `limit`, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "\u2026"


def first_line(message: str) -> str:
    """The line of a message that names the error: the first non-blank one, or, when the message
    embeds a traceback (TF 1's "Failed to load the native TensorFlow runtime" does), the
    exception line of that traceback -- never "Traceback (most recent call last):"."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0] == _TRACEBACK:
        chain = parse_traceback(message)
        if chain:
            return first_line(chain[root_index(chain)]["message"]) or chain[root_index(chain)]["type"]
        return next((ln for ln in reversed(lines) if _EXC_LINE.match(ln)), lines[-1])
    return lines[0]


def normalise(message: str) -> str:
    """Strip what varies between runs and machines so failures group.

    Paths, hex addresses, shapes and numbers go; the words and the names of
    shared libraries stay (a missing libcublas.so.9.0 is not a missing
    libcudnn.so.7).
    """
    text = first_line(message)
    libraries: list[str] = []

    def keep(m: re.Match) -> str:
        libraries.append(m.group(1))  # its folder goes, like any path
        return f"\0{chr(65 + len(libraries) - 1)}\0"

    text = _LIBRARY.sub(keep, text) if len(_LIBRARY.findall(text)) <= 26 else text
    text = re.sub(r"0x[0-9a-fA-F]+", "<addr>", text)
    text = re.sub(r"(/[\w.\-+]+)+/?", "<path>", text)
    text = _SHAPE.sub("<shape>", text)
    text = re.sub(r"(?<![A-Za-z\d])\d+(\.\d+)*", "<n>", text)  # "dense_3" varies, "float32" and "v2" do not
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\0([A-Z])\0", lambda m: libraries[ord(m.group(1)) - 65], text)
    return cut(text, SIGNATURE_CHARS)


_ROOT_ERROR = re.compile(r"^\s*\(\d+\) [A-Z_]+:\s+(.+)$")                  # one of TF's "root errors"
_TF_TALLY = re.compile(r"^\d+ (successful operations|derived errors ignored)")  # TF's closing counts


def _root_message(message: str) -> str:
    """TF 2 wraps errors raised inside a traced function as "in user code:" +
    a stack + the real "SomeError: message" at the end; that last line is what
    groups, not the wrapper. A runtime op failure reads "Graph execution error:"
    + "Detected at node ..." + a stack + the op's own message, the last
    unindented line (the "[[{{node ...}}]]" line after it is indented)."""
    if message.lstrip().startswith("Graph execution error:"):
        body = message.strip().splitlines()[1:]
        for line in body:  # "N root error(s) found. (0) INVALID_ARGUMENT:  <the op's message>"
            m = _ROOT_ERROR.match(line)
            if m:
                return m.group(1)
        lines = [ln for ln in body if ln.strip() and not ln[:1].isspace()]
        told = [ln for ln in lines if not ln.startswith(("Detected at node", "File ", "[[", "[..."))
                and not _TF_TALLY.match(ln)]
        return told[-1] if told else message
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
    native = _NATIVE_LOAD.search(message or "")
    if native:  # the missing library is the cause, whatever wraps it
        message = native.group(0)[native.group(0).index(native.group(1)):]
    parts = [kind] + ([short] if short else []) + ([normalise(message)] if message else [])
    return ": ".join(p for p in parts if p)


# -- exception chains ----------------------------------------------------------------
def _short(type_: str | None) -> str:
    return (type_ or "").rsplit(".", 1)[-1]


def _is_import(type_: str | None) -> bool:
    return _short(type_) in IMPORT_TYPES


def _wraps(outer: dict, inner: dict) -> bool:
    """Is `outer` a wrapper's re-raise of `inner`, so that `inner` is closer to the cause?

    `raise X from inner` always is. An exception raised while another was
    being handled is one when it is an import failure (TF's "Keras cannot be
    imported", TF 1's "Failed to load the native TensorFlow runtime": an
    import fails *because* of what it was handling), when it has the same
    type (a re-raise with more words), or when its message repeats the
    inner one (a whole line of it: a short KeyError key says nothing).
    Otherwise the inner one was handled on purpose (a KeyError behind a
    cache miss) and the outer one is the cause.
    """
    link = outer.get("link")
    if link in ("cause", "embedded"):
        return True
    if link != "context":
        return False
    inner_text = first_line(inner.get("message") or "")
    return (_is_import(outer.get("type")) or _short(outer.get("type")) == _short(inner.get("type"))
            or (len(inner_text) >= 24 and inner_text in (outer.get("message") or "")))


def root_index(chain: list[dict]) -> int:
    """Index (outermost = 0) of the first exception of `chain` that is not a wrapper's re-raise."""
    i = 0
    while i + 1 < len(chain) and _wraps(chain[i], chain[i + 1]):
        i += 1
    return i


def expand(chain: list[dict]) -> list[dict]:
    """Unfold messages that embed a formatted traceback into links of the chain."""
    out: list[dict] = []
    for item in chain:
        message = item.get("message") or ""
        if _TRACEBACK in message and len(out) < 16:
            inner = parse_traceback(message[message.index(_TRACEBACK):])
            if inner:
                out.append({**item, "link": "embedded"})
                out.extend(expand(inner))
                continue
        out.append(item)
    return out


def _section_exception(lines: list[str]) -> dict | None:
    """The exception a printed traceback section ends with. After the header every frame line is
    indented, so the first unindented line names the type and starts the message, and the lines
    after it continue the message. A section cut before its header (a log tail) only trusts a
    line whose type looks like an exception's."""
    stripped = [ln.strip() for ln in lines]
    headed = _TRACEBACK in stripped
    body = lines[stripped.index(_TRACEBACK) + 1:] if headed else lines
    for j, line in enumerate(body):
        if not line.strip() or line.startswith((" ", "\t")):
            continue
        m = _EXC_LINE.match(line.rstrip())
        if m and (_EXC_TYPE.search(m.group(1)) or (headed and m.group(2) is not None)):
            rest = "\n".join(body[j + 1:]).strip("\n")
            message = (m.group(2) or "") + ("\n" + rest if rest else "")
            return {"type": m.group(1), "message": message.strip()}
        if headed:
            return None
    return None


def parse_traceback(text: str) -> list[dict]:
    """The exception chain a printed traceback shows, outermost first, each with `link`: how it
    is tied to the next one ("cause": raise ... from; "context": raised while handling it).

    Python prints the innermost first with a mark between sections; a tail
    cut at its start just loses the innermost exceptions.
    """
    sections: list[list[str]] = [[]]
    links: list[str] = []
    for line in text.splitlines():
        if line.strip() in _CHAIN_MARKS:
            links.append(_CHAIN_MARKS[line.strip()])
            sections.append([])
        else:
            sections[-1].append(line)
    found: list[dict] = []
    for k, section in enumerate(sections):
        exc = _section_exception(section)
        if exc is not None:
            found.append({**exc, "link": links[k - 1] if found else None})
    return list(reversed(found))


def _last_exception(stderr_tail: str) -> list[dict] | None:
    """The exception chain after the last traceback of stderr, outermost first."""
    missing = re.search(r"No module named ([\w.]+)\s*$", stderr_tail.strip())
    if missing:  # `python -m pkg` says this without a traceback when pkg is not importable
        return [{"type": "ModuleNotFoundError", "message": f"No module named {missing.group(1)}", "link": None}]
    if _TRACEBACK not in stderr_tail:
        return None
    return parse_traceback(stderr_tail) or None


def _chained_error(chain: list[dict], raw: RawOutcome, **extra) -> tuple[str, dict]:
    """Status and error record for an exception chain: the signature names the root cause,
    `outer` keeps what the outermost exception said."""
    chain = expand(chain)
    root = chain[root_index(chain)]
    outer = chain[0]
    type_, message = root.get("type") or "", root.get("message") or ""
    short = _short(type_)
    if short in OOM_TYPES or _short(outer.get("type")) in OOM_TYPES:
        return status.OOM, _error("oom", type_, message, raw, **extra)
    if short == "KerasMismatch":
        return status.ERROR, _error("keras mismatch", None, message, raw, **extra)
    kind = ("import" if _is_import(type_) or _is_import(outer.get("type")) else "exception")
    if root is not outer:
        extra["outer"] = {"type": outer.get("type"), "message": outer.get("message"),
                          "signature": signature(kind, outer.get("type"), outer.get("message"))}
    if len(chain) > 1:
        extra["chain"] = [{k: c.get(k) for k in ("type", "message", "link")} for c in chain]
    return status.ERROR, _error(kind, type_, message, raw, **extra)


def _error(kind: str, type_: str | None, message: str, raw: RawOutcome, **extra) -> dict:
    sig = signature(kind, type_, message)
    return {"kind": kind, "type": type_, "message": message, "signature": sig,
            "signature_short": cut(sig, SHORT_CHARS), "exit_code": raw.exit_code, "signal": raw.signal, **extra}


# A frame of the user's staged code (harness/usercode.py: <root>/user/<hash>/...), as Python's
# traceback ('File "...", line N, in f') and faulthandler ('File "...", line N in f') print it.
_USER_FRAME = re.compile(r'File "(?:[^"]*/)?user/[0-9a-f]{16}/([^"]+)", line (\d+),? in (\S+)')


def user_frame(stderr_tail: str) -> str | None:
    """The user's own frame a crash stack names: faulthandler prints the most recent call first."""
    m = _USER_FRAME.search(stderr_tail or "")
    return f"{m.group(1)}:{m.group(2)} in {m.group(3)}" if m else None


def _at(error: dict, where: str | None) -> dict:
    """Attribute an error to the user's file and line: kept in `where` and in the signature,
    after the error's type (the line of the user's own code is what tells two failures apart;
    it is not normalised)."""
    if not where:
        return error
    sig = error["signature"]
    head = error["kind"] + (f": {_short(error['type'])}" if error.get("type") else "")
    # right after the type, so a table that cuts a long message still shows where
    sig = f"{head} at {where}{sig[len(head):]}" if sig.startswith(head) else f"{sig} at {where}"
    return {**error, "where": where, "signature": sig, "signature_short": cut(sig, SHORT_CHARS)}


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
        return Verdict(status.TIMEOUT, _error("timeout", None, f"{what}; last event: {last}", raw,
                                         timed_out=raw.timed_out, last_event=last_event))
    if raw.oom_killed:
        return Verdict(status.OOM, _error("oom", None, "killed for memory (OOM killer)", raw, last_event=last_event))
    if workload is not None:
        outcome = workload.get("outcome")
        if outcome == OUTCOME_OK and raw.exit_code == 0:
            problem = not_engaged(workload, asked, utilisation)
            if problem:  # the counts are the finding: kept, not normalised away
                return Verdict(status.ERROR, {**_error("engagement", None, problem, raw),
                                         "signature": f"engagement: {problem}"})
            return Verdict(status.OK)
        if outcome == OUTCOME_UNSUPPORTED:
            return Verdict(status.UNSUPPORTED, reason=workload.get("reason"))
        if outcome == OUTCOME_ERROR:
            err = workload.get("error") or {}
            chain = err.get("chain") or [{"type": err.get("type") or "", "message": err.get("message") or "",
                                          "link": None}]
            word, error = _chained_error(chain, raw, traceback=err.get("traceback"))
            return Verdict(word, _at(error, err.get("where")))
    if raw.signal:
        return Verdict(status.CRASH, _at(_error("signal", None, f"killed by {raw.signal}; last event: {last}", raw,
                                                last_event=last_event), user_frame(stderr_tail)))
    if raw.exit_code == 0:
        return Verdict(status.CRASH, _error("silent-exit", None, f"exited 0 without a result; last event: {last}",
                                       raw, last_event=last_event))
    parsed = _last_exception(stderr_tail)
    if parsed:  # Python died before the workload could record it (e.g. the package would not import)
        word, error = _chained_error(parsed, raw)
        return Verdict(word, error)
    if raw.exit_code in (EXIT_ERROR, EXIT_UNSUPPORTED):
        message = f"exit code {raw.exit_code} but no workload.json; last event: {last}"
    else:
        message = f"exit code {raw.exit_code}; last event: {last}"
    return Verdict(status.CRASH, _error("exit", None, message, raw, last_event=last_event))
