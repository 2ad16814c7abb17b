"""Matrix files: load, validate, expand into cells.

Validation runs before anything is built or run, and reports every problem
with the file, the key path and what was expected (plus the closest valid key
for a typo), because a matrix that dies an hour into a run on a misspelt key
is the failure users remember. A matrix is also untrusted input: every number
has limits, every name follows ``names``, and the file's size, nesting and
alias expansion are bounded before validation walks it, so any document ends
in a MatrixError within milliseconds (tests/test_fuzz_matrix.py).

Every name other code imports from ``harness.matrix`` is re-exported here, so
callers never need to know which module of the package holds it.
"""

from harness.errors import MatrixError
from harness.matrix.checker import _Checker
from harness.matrix.environment import is_plain
from harness.matrix.loading import Matrix, load, parse
from harness.matrix.rules import _Rules
from harness.matrix.schema import (
    BATCH_LIMITS,
    COMMON_WORKLOAD_KEYS,
    DEVICE_LIMITS,
    ENV_KEYS,
    EXPECT_KEYS,
    IMAGE_RE,
    MAX_CELLS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_MATCH_WORK,
    MAX_PROBLEMS,
    MAX_RANGE_ENVIRONMENTS,
    MAX_RANGES,
    MAX_REQUIREMENT,
    MAX_RULES,
    MAX_TEXT,
    MAX_VALUES,
    MAX_WIDTHS,
    MIN_MEMORY,
    MODEL_DEFAULTS,
    MODEL_KEYS,
    PAR_KEYS,
    PYTHON_RE,
    RANGE_EXAMPLE,
    RATIO_LIMITS,
    RELEASES_KEYS,
    RULE_KEYS,
    TIMEOUT_KEYS,
    TIMEOUT_LIMITS,
    TOP_KEYS,
    TOP_LIMITS,
    VALUE_KEYS,
    VARIABLE_RE,
    VERSION_CHARS_RE,
    WATCH_KEYS,
    WIDTHS_LIMITS,
    WORKLOAD_LIMITS,
)

__all__ = [
    "BATCH_LIMITS", "COMMON_WORKLOAD_KEYS", "DEVICE_LIMITS", "ENV_KEYS", "EXPECT_KEYS", "IMAGE_RE", "MAX_CELLS",
    "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_MATCH_WORK", "MAX_PROBLEMS", "MAX_RANGE_ENVIRONMENTS", "MAX_RANGES",
    "MAX_REQUIREMENT", "MAX_RULES", "MAX_TEXT", "MAX_VALUES", "MAX_WIDTHS", "MIN_MEMORY", "MODEL_DEFAULTS",
    "MODEL_KEYS", "PAR_KEYS", "PYTHON_RE", "RANGE_EXAMPLE", "RATIO_LIMITS", "RELEASES_KEYS", "WATCH_KEYS", "RULE_KEYS",
    "TIMEOUT_KEYS", "TIMEOUT_LIMITS", "TOP_KEYS", "TOP_LIMITS", "VALUE_KEYS", "VARIABLE_RE", "VERSION_CHARS_RE",
    "WIDTHS_LIMITS", "WORKLOAD_LIMITS", "Matrix", "MatrixError", "_Checker", "_Rules", "is_plain", "load", "parse",
]
