"""Was a break announced? A removal the project carried out on purpose -- a deprecation expired, an
alias removed, an API replaced -- is not a bug: upstream closes a report of it, and the user's answer
is the code change the project names. Three sources say so, and each answer names its source:

- the run itself: the warning the last good release printed for the very name the first bad
  release's error names (`module 'x' has no attribute 'legacy_total'` after
  `legacy_total is deprecated ...; use total`) -- it usually says what to use instead, and it holds
  for a removal nobody here has heard of;
- the project's release notes: `NOTES`, each one sentence of our own with the release that carried
  it out, the errors that show it, the change to make and where the project says so;
- the error's own message, where it names the change as intended ("was a deprecated alias",
  "has been removed", "is deprecated ... use ..."): its sentence is the advice.

A break that neither explains is one to report upstream (`reduce`'s script and ISSUE.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Removal:
    package: str
    release: str           # the first release without it
    shows: str             # a pattern of the error it gives (re, case-insensitive)
    says: str              # what the notes say, in a sentence of our own
    change: str            # the code change to make
    source: str            # where the project says it


NOTES = (
    Removal("numpy", "1.24.0",
            r"module 'numpy' has no attribute '(?:float|int|bool|object|str|complex|long|unicode)'",
            "NumPy 1.24 removed the aliases of Python's builtin types (np.float, np.int, np.bool, np.object, "
            "np.str, np.complex), deprecated since 1.20.",
            "use the builtin (`float`, `int`, `bool`, `object`, `str`, `complex`), or a NumPy scalar type "
            "such as `np.float64` where a NumPy type was meant",
            "https://numpy.org/doc/stable/release/1.24.0-notes.html#expired-deprecations"),
    Removal("numpy", "2.0.0",
            r"`np\.\w+` was removed in the NumPy 2\.0 release",
            "NumPy 2.0 removed a set of aliases and functions from its main namespace.",
            "the replacement the error names (e.g. `np.float64` for `np.float_`, `np.inf` for `np.Inf`)",
            "https://numpy.org/doc/stable/numpy_2_0_migration_guide.html"),
    Removal("tensorflow", "2.11.0",
            r"(?:decay|lr) is deprecated in the new Keras optimizer|not recognized.*'decay'",
            "TensorFlow 2.11 made tf.keras.optimizers the new optimizers, which take no `decay` (and no `lr`); "
            "the old ones stay as tf.keras.optimizers.legacy.",
            "use `tf.keras.optimizers.legacy.Adam` (the optimizer the script had), or give `learning_rate` a "
            "schedule such as `tf.keras.optimizers.schedules.InverseTimeDecay` in place of `decay`",
            "https://github.com/tensorflow/tensorflow/releases/tag/v2.11.0"),
    Removal("tensorflow", "2.16.0",
            r"argument\(s\) not recognized|unrecognized keyword arguments|could not interpret optimizer|"
            r"(?:not|no longer|only) supported in keras [23]\b|keras 3 only supports",
            "From TensorFlow 2.16, tf.keras is Keras 3; Keras 2 code runs on with tf-keras installed and "
            "TF_USE_LEGACY_KERAS=1.",
            "install `tf-keras` (the minor of your TensorFlow) and set `TF_USE_LEGACY_KERAS=1`, or port the "
            "script to Keras 3 (here: the argument the error names, e.g. `learning_rate=` for `lr=`)",
            "https://github.com/tensorflow/tensorflow/releases/tag/v2.16.1"),
)

# Sentences in which an error names its own change as intended
_INTENDED = re.compile(r"[^.\n]*(?:\bwas a deprecated\b|\bwas removed\b|\bwere removed\b|\bhas been removed\b|"
                       r"\bhave been removed\b|\bis deprecated\b|\bare deprecated\b|\bno longer supported\b|"
                       r"\bis no longer\b)[^\n]*", re.I)
_CUT = 400


def _v(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


# A name an error quotes: `np.float`, 'legacy_total', "lr"
_QUOTED = re.compile(r"[`'\"]([A-Za-z_][\w.]*)[`'\"]")
# Names too common to tie a warning to an error
_COMMON = {"self", "none", "true", "false", "object", "module", "str", "int", "float", "type", "the"}


def names_in(messages: list[str], package: str) -> set[str]:
    """The names the errors quote, and the last part of each dotted one, less the package's own."""
    own = {canonicalize_name(package), package.replace("-", "_"), package.split("-")[0]}
    found = set()
    for message in messages:
        for name in _QUOTED.findall(message or ""):
            for part in {name, name.rsplit(".", 1)[-1]}:
                if part not in own and part.lower() not in _COMMON and len(part) > 1:
                    found.add(part)
    return found


def from_warnings(package: str, last_good: str, first_bad: str, messages: list[str],
                  warnings: list[dict]) -> dict | None:
    """The warning the last good release printed for a name the first bad release's error names."""
    names = names_in(messages, package)
    for w in warnings:
        line = w["line"]
        hit = next((n for n in sorted(names, key=len, reverse=True)
                    if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", line)), None)
        if hit:
            return {"by": f"the warning {package} {last_good} printed", "release": first_bad, "name": hit,
                    "says": line[:_CUT], "change": line[:_CUT],
                    "source": f"stderr of cell {w['cell']}"}
    return None


def explain(package: str, last_good: str, first_bad: str, messages: list[str],
            warnings: list[dict] = ()) -> dict | None:
    """How the break between `last_good` and `first_bad` was announced: by the project's notes (with
    the warning the last good release printed beside it, where it printed one), by that warning
    alone -- for the name the error gives (`warnings`: {line, cell} of its cells' stderr) --, or by
    the error's own words; None when none does (a report upstream is then the advice)."""
    warned = from_warnings(package, last_good, first_bad, messages, list(warnings))
    lo, hi = _v(last_good), _v(first_bad)
    text = "\n".join(m for m in messages if m)
    for note in NOTES:
        at = _v(note.release)
        if canonicalize_name(note.package) != canonicalize_name(package) or None in (lo, hi, at):
            continue
        if lo < at <= hi and re.search(note.shows, text, re.I):
            return {"by": "release notes", "release": note.release, "says": note.says, "change": note.change,
                    "source": note.source, **({"warned": warned} if warned else {})}
    if warned:
        return warned
    said = _INTENDED.search(text)
    if said:
        sentence = said.group(0).strip()
        return {"by": "the error's own message", "release": first_bad, "says": sentence[:_CUT],
                "change": sentence[:_CUT], "source": f"the error {package} {first_bad} gives"}
    return None
