"""What a matrix file may say: its keys and their types, each model's parameters
and defaults, and the limits on every number and size.

One table per level of the file, so the checks, the README's schema table and
the fuzz tests (tests/test_fuzz_matrix.py draws documents from these tables)
read the same declaration.
"""

from __future__ import annotations

import re
from typing import Any

# Patterns are matched with fullmatch: '$' would let a trailing newline through.
PYTHON_RE = re.compile(r"3\.[0-9]{1,2}(\.[0-9]{1,2})?")
VERSION_CHARS_RE = re.compile(r"[0-9A-Za-z.+!_-]{1,64}")
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")

# -- limits: what a matrix file may ask for (the README's schema table lists them) --
MAX_FILE_BYTES = 1 << 20          # a matrix is a few KiB; this bounds the time spent reading one
MAX_DEPTH = 32                    # nesting (after aliases); real matrices use 4
MAX_VALUES = 20_000               # values after aliases are expanded: an alias bomb stops here
MAX_CELLS = 100_000               # cells one matrix may expand to
MAX_RULES = 200                   # entries in each of include / exclude / expect
MAX_MATCH_WORK = 2_000_000        # pattern tests include / exclude / expect may cost (_Rules.work)
MAX_TEXT = 2_000                  # description, why, signature, a fault's message
MAX_REQUIREMENT = 200             # one pip requirement string
MIN_MEMORY = 64 << 20             # a limit below this cannot start Python + numpy
MAX_PROBLEMS = 20                 # problems listed in one message
MAX_RANGES = 50                   # version ranges in one matrix: each may ask the package index once
MAX_RANGE_ENVIRONMENTS = 500      # environments the ranges of one matrix may expand to
# (low, high) inclusive for integers; for floats, `open_low` / `open_high` exclude the bound.
TOP_LIMITS = {"epochs": (1, 10_000), "repeats": (1, 1_000), "seed": (0, 2**32 - 1)}
BATCH_LIMITS = (1, 1_000_000)
DEVICE_LIMITS = (1, 256)
RATIO_LIMITS = (1, 1_000)
TIMEOUT_LIMITS = (0.0, 7 * 24 * 3600.0)   # seconds, > 0
WORKLOAD_LIMITS: dict[str, tuple] = {
    "layers": (1, 64), "units": (1, 65_536), "dense": (1, 65_536), "timesteps": (1, 100_000),
    "features": (1, 1_000_000), "classes": (1, 100_000), "samples": (1, 100_000_000),
    "height": (1, 4_096), "width": (1, 4_096), "channels": (1, 64), "blocks": (1, 16),
    "convs_per_block": (1, 16), "filters": (1, 4_096),
    "dropout": (0.0, 1.0),           # [0, 1)
    "noise": (0.0, 100.0),           # [0, 100]
    "learning_rate": (0.0, 10.0),    # (0, 10]
    "seconds": (0.0, 86_400.0),      # an idle cell: [0, a day]
}
WIDTHS_LIMITS = (1, 65_536)
# The recurrent layers' arguments a matrix may pin (`layer_args:` of an rnn workload): the ones whose
# defaults a release changed (TF 2.0: reset_after, recurrent_activation, implementation), so a
# change between two releases can be measured on the same model; GRU and LSTM only (the CuDNN
# layers take none of them). A value the stack's layer refuses is that cell's error, as it would be
# in the user's code.
RNN_LAYER_ARGS: dict[str, type] = {"reset_after": bool, "recurrent_activation": str, "activation": str,
                                   "implementation": int, "unroll": bool, "use_bias": bool}
RNN_ARG_CELLS = ("gru", "lstm")
MAX_WIDTHS = 64

# Keys each workload model accepts (beyond name/model), with their types.
MODEL_KEYS: dict[str, dict[str, type | tuple]] = {
    "rnn": {"cell": str, "layers": int, "units": int, "dense": int, "dropout": float,
            "timesteps": int, "features": int, "classes": int, "samples": int, "layer_args": dict},
    "convnet": {"height": int, "width": int, "channels": int, "classes": int, "samples": int,
                "dense": int, "noise": float},
    "maxing": {"height": int, "width": int, "channels": int, "classes": int, "samples": int,
               "blocks": int, "convs_per_block": int, "filters": int, "dense": int},
    "dense": {"features": int, "widths": list, "samples": int},
    "fault": {"fault": str, "message": str},
    "idle": {"seconds": (int, float)},
    # the user's own code (harness/usercode.py): a model factory, or a script that is the cell
    "user": {"build": str, "data": str, "path": str, "params": dict, "loss": str, "needs": (str, list, dict),
             "after": (str, list, dict)},
    "script": {"script": str, "args": list, "path": str, "needs": (str, list, dict), "after": (str, list, dict)},
}
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "rnn": {"cell": "gru", "layers": 4, "units": 512, "dense": 128, "timesteps": 32, "features": 16,
            "classes": 4, "samples": 4096},
    "convnet": {"classes": 10, "samples": 6000},
    "maxing": {"classes": 10, "samples": 4096},
    "dense": {"features": 8000, "widths": [4000, 2000, 500, 300], "samples": 8192},  # seed 002: ~41M parameters
    "fault": {},
    "idle": {"seconds": 1.0},
}  # user and script workloads have none: they name the user's code
COMMON_WORKLOAD_KEYS = {"name": str, "model": str, "learning_rate": float, "trap": str}

ENV_KEYS = {"name": str, "python": str, "tensorflow": str, "keras": str, "backend": str,
            "packages": list, "force": list, "device": str, "base_image": str,
            "keras_api": str, "tensorflow_package": str, "env": dict}
VARIABLE_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
PAR_KEYS = {"wrapper": str, "devices": int, "device_kind": str, "ratios": list, "feed": str}
RULE_KEYS = {"environment": (str, list), "workload": (str, list), "wrapper": (str, list),
             "devices": (int, list), "device_kind": (str, list), "feed": (str, list),
             "batch_size": (int, list), "repeat": (int, list)}
# A value expectation (harness/status/values.py): a metric equal to / within a tolerance of a number,
# or of the same cell's value in another environment.
VALUE_KEYS = {"metric": str, "equals": (int, float), "within": (int, float), "relative": (int, float),
              "same_as": str}
EXPECT_KEYS = {**{k: v for k, v in RULE_KEYS.items() if k != "repeat"},
               "status": str, "signature": str, "why": str, **VALUE_KEYS}
TOP_KEYS = {"name": str, "description": str, "environments": list, "workloads": list,
            "parallelism": list, "batch_sizes": list, "epochs": int, "repeats": int, "seed": int,
            "reseed": bool, "timeouts": dict, "memory_limit": str, "include": list, "exclude": list, "expect": list,
            "slurm": dict, "releases": dict, "watch": dict}
# How version ranges expand (harness.index.releases.Options); the README's "Version ranges" lists them.
RELEASES_KEYS = {"pre": bool, "every": str, "cutoff": bool, "margin_days": (int, float)}
# How `harness watch` expands this matrix (harness/watch); other commands ignore it.
WATCH_KEYS = {"pre": bool, "nightly": (bool, str)}
TIMEOUT_KEYS = {"wall": (int, float), "progress": (int, float)}

# How a version or a range is written (harness.index.releases), for the messages.
RANGE_EXAMPLE = "e.g. '2.15.1', or a range such as '>=2.10,<2.17'"
