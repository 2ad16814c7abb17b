"""Report a named number from your own script: ``from workloads.metrics import report``.

    report("accuracy", 0.93)
    report("parameters", model.count_params())

Each call appends one JSON line ``{"name": ..., "value": ...}`` to the file named by
the ``HARNESS_METRICS`` environment variable, which the harness sets for every
cell. That line is the whole protocol: a script that cannot import this module
(or is written in another language) may append the same lines itself. Outside
the harness (the variable unset) ``report`` does nothing and returns False, so
the same script runs anywhere. The last value of each name becomes the cell's
metric, shown in the report's tables and plots and compared by
``report compare`` and by ``expect: {metric: NAME, ...}``.

Python 3.5+ and the standard library only.
"""
import json
import os
import time

from .protocol import ENV_METRICS


def report(name, value, **extra):
    """Record `value` (a number) under `name`; True when it was written."""
    path = os.environ.get(ENV_METRICS)
    if not path:
        return False
    if hasattr(value, "item") and not isinstance(value, (int, float)):
        value = value.item()  # a numpy scalar or 0-d array, as Python's own number
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # a numpy scalar, a 0-d array
        except (TypeError, ValueError):
            raise TypeError("report(%r, ...): the value must be a number, got %r" % (name, value))
    line = dict(extra, name=str(name), value=value, time=time.time())
    with open(path, "a") as fh:
        fh.write(json.dumps(line) + "\n")
    return True
