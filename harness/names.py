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
