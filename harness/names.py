"""Names that become paths, ids, image tags and script text: one rule.

A matrix, environment or workload name ends up as a folder under the
results, a part of every cell id, a virtualenv folder in the cache, an image
tag, a bundle folder and a line of a bundle's ``run.sh``. A name is therefore
held to what is safe in all of these at once: letters, digits and ``. _ + -``,
starting with a letter, digit or underscore (no hidden file, no option-like
``-x``), no ``..``, at most 64 characters. Nothing is rewritten silently:
a name that breaks the rule is a validation error naming the key.
"""

from __future__ import annotations

import hashlib
import re

MAX_LENGTH = 64
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
RULE = f"letters, digits and . _ + - only, starting with a letter, digit or _, no '..', at most {MAX_LENGTH} characters"


def problem(name: object) -> str | None:
    """Why `name` cannot be used as a name, or None when it can."""
    if not isinstance(name, str):
        return f"expected a string, got {type(name).__name__}"
    if len(name) > MAX_LENGTH:
        return f"'{name[:MAX_LENGTH]}...' is {len(name)} characters long ({RULE})"
    if not NAME_RE.fullmatch(name) or ".." in name:
        return f"{name!r} is not a valid name ({RULE})"
    return None


def is_valid(name: object) -> bool:
    return problem(name) is None


# -- file names for cell ids: one-to-one -------------------------------------------------
# A cell id (`env/workload/parallelism/batch/repeat`) becomes a report page, a
# bundle folder and part of a plot's file name. Replacing characters by '_'
# (the old rule) sent 'a+b' and 'a_b', or 'A' and 'a' on a case-insensitive
# file system, to one file, so one cell's page or bundle overwrote another's.
# The encoding below is reversible instead: '/' -> '__', '_' -> '_-', every
# other character outside [a-z0-9.-] (capitals included, so names differ on
# any file system) -> '_xHH' per UTF-8 byte. Every '_' starts a two-character
# code, so the text decodes one way only; '_s' (never a code) joins the parts
# of a many-part name, and '_h' marks a long name cut and closed by its hash.
MAX_FILE_NAME = 200  # bytes: room for a suffix ('.html', '.png', '-plots') within the usual 255
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")


def _encode(text: str) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "/":
            out.append("__")
        elif ch == "_":
            out.append("_-")
        elif ch in _PLAIN and not (i == 0 and ch in ".-"):  # never a hidden file, never an option
            out.append(ch)
        else:
            out.append("".join(f"_x{b:02x}" for b in ch.encode("utf-8", "surrogatepass")))
    return "".join(out)


def file_name(*parts: str) -> str:
    """A file or folder name for `parts` (a cell id, or a run, an environment and a
    workload) that no other parts map to, on any file system, in at most
    MAX_FILE_NAME characters."""
    encoded = "_s".join(_encode(str(p)) for p in parts)
    if len(encoded) <= MAX_FILE_NAME:
        return encoded
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    head = encoded[:MAX_FILE_NAME - 34]
    head = (head[:head.rfind("_")] if "_" in head[-4:] else head).rstrip("_")  # never cut a code in two
    return f"{head}_h{digest}"


def decode_file_name(name: str) -> list[str]:
    """The parts `file_name` encoded (for names it did not cut); a ValueError otherwise."""
    parts, current, i = [], bytearray(), 0
    codes = {"_": b"/", "-": b"_"}
    while i < len(name):
        ch = name[i]
        if ch != "_":
            current += ch.encode()
            i += 1
            continue
        code = name[i + 1:i + 2]
        if code in codes:
            current += codes[code]
            i += 2
        elif code == "x":
            current.append(int(name[i + 2:i + 4], 16))
            i += 4
        elif code == "s":
            parts.append(current.decode("utf-8", "surrogatepass"))
            current = bytearray()
            i += 2
        else:
            raise ValueError(f"not a name file_name made: {name!r}")
    parts.append(current.decode("utf-8", "surrogatepass"))
    return parts
