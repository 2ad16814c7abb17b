"""The in-environment side of the harness.

This package runs *inside* the environment under test (a container or a
virtualenv), on every Python from 3.5 to 3.13 and every TensorFlow / Keras the
matrix names. So it is written in Python 3.5 syntax (no f-strings, no variable
annotations, no dataclasses) and imports only the standard library, numpy,
TensorFlow and Keras -- never the host-side ``harness`` package. Every version
difference lives in :mod:`workloads.compat`; everything the host shares with
this side lives in :mod:`workloads.protocol`.

Entry point: ``python -m workloads SPEC.json OUTDIR``.
"""
