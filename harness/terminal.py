"""Text from outside, made safe for a terminal.

Names, error messages, signatures, tracebacks and log lines come from matrix
files, from crashing processes and from result files someone else wrote. A
terminal obeys what it is sent: ``ESC ] 0 ;`` retitles the window, ``ESC [ 2 J``
clears the screen, a carriage return or a backspace overwrites what was just
printed (a failed cell can then read as ``ok``), and some terminals act on
longer sequences still. rich's ``escape`` stops rich's own markup only; it
passes these through. So every console print of outside text goes through
``shown`` (or ``visible`` where rich is not in the way): control characters,
escape sequences and bidirectional overrides are written out as ``\\x1b``,
``\\r``, ``\\u202e`` -- visible, never obeyed.
"""

from __future__ import annotations

import re
import unicodedata

from rich.markup import escape

# C0 and C1 controls and DEL; Unicode's format characters (bidi overrides and
# isolates, zero-width joiners...) which can reorder or hide what is shown.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _written_out(match: re.Match) -> str:
    ch = match.group()
    if ch in "\t":
        return ch
    code = ord(ch)
    if code <= 0xFF:
        return {"\r": "\\r", "\n": "\\n"}.get(ch, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def visible(text: object, lines: bool = False) -> str:
    """`text` with every control character written out; with `lines`, newlines
    are kept (a traceback, a table), every other control still written out."""
    text = str(text)
    if lines:
        return "\n".join(_UNSAFE.sub(_written_out, line) for line in text.split("\n"))
    return _UNSAFE.sub(_written_out, text)


def shown(text: object, lines: bool = False) -> str:
    """`visible` text that is also inert as rich markup: for console.print with markup on."""
    return escape(visible(text, lines))


def is_plain(text: str) -> bool:
    """True when `text` has nothing a terminal would act on (one printable line)."""
    return _UNSAFE.search(text) is None and all(unicodedata.category(c) != "Cs" for c in text)
