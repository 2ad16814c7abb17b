"""Hands a Python list to code that asks NumPy for an array *without* a copy, the way much
pre-2.0 code did to mean "avoid a copy if you can". NumPy 1.x copied anyway; NumPy 2.0 made
copy=False mean "never copy" and raises when a copy is needed.

It reports no timing on purpose: a few milliseconds of copying, timed in two environments, differ
by more than the watch's 5 % floor for reasons that have nothing to do with the break this
example is about (and would be reported, correctly, as a speed shift)."""
import numpy as np
from workloads.metrics import report

rows = [[float(i + j) for j in range(64)] for i in range(2000)]
table = np.array(rows, copy=False)          # a list cannot be viewed: NumPy must copy
report("total", float(table.sum()))
