"""What a `reduce` candidate's source alone decides, before any run.

pysource-minimize asks about thousands of candidates; some are answered from their text: one
that differs from the last kept only by moving a float to an unround value or cutting a string
short is not worth a run (`not_worth_a_run`), and one that calls a seeder the original seeds
with no seed would hold, or not, by chance (`seeders`, `unseeded`). Pure functions of source
text, kept apart from the driver that runs candidates as cells (``reduce``), so they are tested
without running anything.
"""

from __future__ import annotations

import ast
import functools

UNROUND = "it only moves a float to an unround value"
SHORTENED = "it only cuts a string short"


def not_worth_a_run(current: str, candidate: str) -> str | None:
    """Why `candidate` is refused without a run, or None: it differs from `current` only in its
    constants, and only by moving a float to an unround value or cutting a string short.

    pysource-minimize shrinks a float by halving it towards 0 while the break holds: a dropout rate
    or a learning rate that does not matter to the break would cost a run on each of some thousand
    halvings (0.2, 0.1, 0.05, ... 5e-324); round values (two significant digits) are tried, so a
    float still shrinks to 0 or to the roundest value that keeps the break. It cuts a string
    character by character, two runs per character where the cut fails: a path, a layer's name or
    an activation cut short is no simpler to read, and a script's strings were most of a small
    reduction's runs (a 9-line script: 303 candidates, 93 without the cuts). A string may still go
    whole (to ""), and any other difference -- an int, a name, a line gone -- is a candidate like
    any other."""
    (before, shape), (after, other) = _shape(current), _shape(candidate)
    if shape is None or shape != other:
        return None
    for x, y in zip(before, after, strict=True):
        if x == y:
            continue
        if isinstance(y, float) and float(f"{y:.2g}") != y:
            return UNROUND
        if isinstance(y, (str, bytes)) and y:
            return SHORTENED
    return None


@functools.lru_cache(maxsize=8)  # the current source is asked about with every candidate
def _shape(source: str) -> tuple[list, str | None]:
    """The source's float and string constants, and its tree's dump with them blanked: what stays
    when only they move (None: it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], None
    constants = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, MOVABLE)]
    values = [n.value for n in constants]
    for node in constants:
        node.value = type(node.value)()
    return values, ast.dump(tree)


MOVABLE = (float, str, bytes)


# What seeds random numbers (numpy's RandomState / default_rng / seed, random.seed, TF's and Keras's
# set_seed, JAX's PRNGKey / key): called with a seed in the original, called with none in a
# candidate, the candidate's outcome is chance -- the reducer likes that cut, as it is shorter.
SEEDERS = frozenset({"RandomState", "default_rng", "seed", "set_seed", "set_random_seed", "PRNGKey", "key",
                     "Generator", "SeedSequence"})


def _calls(source: str):
    """(name, given a seed) for each call of a seeder in `source`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in SEEDERS:
                yield name, bool(node.args or node.keywords)


def seeders(source: str) -> set[str]:
    """The seeders the script calls with a seed."""
    return {name for name, seeded in _calls(source) if seeded}


def unseeded(source: str, seeded: set[str]) -> bool:
    """Whether a candidate calls one of those seeders with no seed."""
    return any(name in seeded and not given for name, given in _calls(source))
