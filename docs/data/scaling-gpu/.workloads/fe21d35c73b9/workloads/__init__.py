"""The in-environment side of the harness.

This package runs *inside* the environment under test (a container or a
virtualenv), on every Python from 3.5 to 3.13 and every TensorFlow / Keras the
matrix names. So it is written in Python 3.5 syntax (no f-strings, no variable
annotations, no dataclasses) and imports only the standard library, numpy,
TensorFlow and Keras -- never the host-side ``harness`` package. Every version
difference lives in :mod:`workloads.compat`.

Entry point: ``python -m workloads SPEC.json OUTDIR``.
"""

# Exit codes shared with the host side (harness/outcome.py reads them).
EXIT_OK = 0
EXIT_ERROR = 3        # a Python exception ended the workload; details in workload.json
EXIT_UNSUPPORTED = 4  # the environment lacks what the cell needs; reason in workload.json

# File names shared with the host side.
EVENTS_FILE = "events.jsonl"
WORKLOAD_FILE = "workload.json"
