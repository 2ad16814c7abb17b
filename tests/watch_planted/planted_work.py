"""A user's script whose behaviour depends on the release of the planted package:
`break` fails from 1.2 on, `slow` takes 15 % longer from 2.0 on."""
import sys
import time

import planted
from workloads.metrics import report

version = tuple(int(x) for x in planted.__version__.split("."))
mode = sys.argv[1]
if mode == "break" and version >= (1, 2):
    raise RuntimeError("planted break: this release refuses the call")
started = time.perf_counter()
# a second, not a fifth: a loaded machine wakes a sleeper tens of milliseconds late, which is noise
# next to the planted 150 ms and would be a "change" next to 30 ms (seen once in CI: 7 % "faster")
time.sleep(1.0 * (1.15 if mode == "slow" and version >= (2, 0) else 1.0))
report("seconds", time.perf_counter() - started)
