"""Hands a Python list to code that asks NumPy for an array *without* a copy, the way much
pre-2.0 code did to mean "avoid a copy if you can". NumPy 1.x copied anyway; NumPy 2.0 made
copy=False mean "never copy" and raises when a copy is needed."""
import time

import numpy as np
from workloads.metrics import report

rows = [[float(i + j) for j in range(64)] for i in range(2000)]
started = time.perf_counter()
table = np.array(rows, copy=False)          # a list cannot be viewed: NumPy must copy
report("seconds", time.perf_counter() - started)
report("total", float(table.sum()))
