"""What the suite's slowest files promise, the real run that proves it today, and the least run that
would -- the table docs/reference/tests.md shows beside each file's seconds in the newest record
(``bench/suite_cost.py --write-docs``).

Why a table of its own: the suite's cost is cut by proving each promise once, on the least that
proves it (a tiny model where the promise is not about the model, one stack where it is not about
stacks, a cell run once and read by every test that needs it), never by dropping one. A promise that
moves to another file is written here with the test that keeps it now, so the page says where it went.
The seconds are never typed here: they come from the records (``bench/records/suite/``);
``tests/test_suite_cost.py`` holds every file past `SLOW_SECONDS` in the newest record to an entry.

Each entry: ``file``; ``keeps`` (the promises, in a sentence); ``run`` (what proves them today);
``least`` (the smallest real run that would, or "already the least" and why).
"""

from __future__ import annotations

SLOW_SECONDS = 200   # a file past this in the newest record must say here what its time buys

PROMISES = (
    {"file": "tests/test_user_workloads.py",
     "keeps": "a user's own factory and script run on three stacks and two engines: statuses, the user's line "
              "in signatures, reported metrics, a rerun of only the changed code, a bundle replayed without "
              "the user's folder, a save-then-load chain, bad user code answered with file and line",
     "run": "one module run per engine (venv: three stacks; Docker: TF 2.15 only), then single-cell runs per "
            "promise; the warm fork's fresh side is the module run's (its factory cell starts fresh there)",
     "least": "the other single-cell runs (own feed, script labels, local engine) read the module run's "
              "cells instead of running their own where the promise is not about a fresh run"},
    {"file": "tests/test_upgrade.py",
     "keeps": "upgrade's report on a planted index (break, mend, accuracy shift; quick), a Keras 2 script on "
              "TF 2.15 blocked at 2.16 and mended by tf-keras (the README's example), a TF 2.10 project's "
              "Python from its pins and two announced removals",
     "run": "the planted course once per module; two real-TensorFlow courses",
     "least": "the TF 2.15 course shares its cells with test_verdict_tf.py's break (same stacks, same "
              "mend search to the newest release): one results folder for both would run them once"},
    {"file": "tests/test_wrappers.py",
     "keeps": "every seed workload under every wrapper a CPU can run, on TF 1.12, TF 2.15, Keras 3 on "
              "TensorFlow and on JAX; each unsupported answer with its reason; every two-device cell's "
              "proof that both devices worked (moved here from test_engagement.py, which keeps the trap)",
     "run": "one matrix run (matrices/wrappers-cpu.yaml) read by every test",
     "least": "already one run; a cell's cost is its first epoch's tracing and its start, not its "
              "data: fewer samples or epochs would save little (the steady epochs' seconds are in its results)"},
    {"file": "tests/test_warm.py",
     "keeps": "warm cells give the same statuses, signatures and numbers as fresh ones (venv and Docker), "
              "caches private and keyed, fallbacks to fresh where they must",
     "run": "the fidelity control fresh, warm and again on the venv engine, warm and again in containers, "
            "held to the venv pass's fresh side (the same bits either engine), on a one-layer GRU (the "
            "promise is the launch's, not the model's)",
     "least": "per cell kind, as now"},
    {"file": "tests/test_verdict_tf.py",
     "keeps": "a real bump verdict three ways: breaks (TF 2.16, with the Keras 3 cause, tf-keras's road "
              "and model.h5 on three stacks), safe (a NumPy patch, with the base's spread), cannot install "
              "(NumPy 2 beside TF 2.15, with the joint move)",
     "run": "three verdicts on one git repository, sharing one results folder; the break and the install "
            "at one run a release (said from the status), the safe verdict at three (said from the spread)",
     "least": "the break shares its TensorFlow stacks with test_upgrade.py's TF 2.15 course (see there)"},
    {"file": "tests/test_slurm.py",
     "keeps": "the Slurm executor on a real cluster: statuses as local, time limit, OOM, cancel and resume, "
              "GPUs granted, containers in array tasks, the user's code, bisect and the grid as arrays",
     "run": "one array per promise on a single-node cluster; the time limit's minute is submitted by the "
            "file's first test and waited for by its last, the others running beside it",
     "least": "the faults' array could carry the user's code and the container cells in one submission"},
    {"file": "tests/test_toolchain.py",
     "keeps": "the lock is what sessions install, `nox -s lock` makes the same lock either way, `--check` "
              "names what moved, `tests-latest` bisects a planted break to its release",
     "run": "real nox sessions and real resolutions against the index; the lock made now once, for "
            "both the two-pips test and the check",
     "least": "already the least: the time is the index's answers and real installs"},
    {"file": "tests/test_portability.py",
     "keeps": "the model-file grid: write, read, judge, explain, resume and check a user's own file, on "
              "tf.keras 2.15 and Keras 3 on JAX",
     "run": "one three-stack course in one test and planted judges (quick)",
     "least": "already one course; its stacks are the suite's shared ones"},
    {"file": "tests/test_trust.py",
     "keeps": "every field safe wherever it lands: names, output folders, owner files, control characters, "
              "numbers on the command line",
     "run": "real processes, most a harness start and one cell",
     "least": "the harness-start tests could call the API in process where the promise is not the exit code"},
    {"file": "tests/test_held_out.py",
     "keeps": "setups the harness was never tuned to give their status and the real cause",
     "run": "one matrix run (matrices/held-out.yaml) and a forced bundle replayed from an empty folder",
     "least": "already one run; the bundle replay is the promise of its own"},
    {"file": "tests/test_certify.py",
     "keeps": "the multi-device certificate: equivalent, a planted per-replica bug at its layer, a trap, a "
              "NaN finding, a control that agrees or does not, BatchNormalization under MirroredStrategy",
     "run": "Keras 3 on JAX on two CPU devices (tiny models) and one TF 2.15 pair",
     "least": "already tiny models; the TF 2.15 pair is the one tf.keras promise"},
    {"file": "tests/test_bisect_real.py",
     "keeps": "bisect on real NumPy releases and on Keras and keras-nightly (the release and night that "
              "mended what jax 0.6.1 broke), its report opened in Chromium",
     "run": "two real bisects",
     "least": "already the least that shows a real release and a real night"},
    {"file": "tests/test_atlas.py",
     "keeps": "the atlas machinery on a planted index (quick) and one real TensorFlow slice",
     "run": "two planted atlas matrices run once per module; one real slice",
     "least": "already planted where the promise is not about TensorFlow"},
    {"file": "tests/test_diverge.py",
     "keeps": "diverge finds each planted difference at its layer on two virtual devices",
     "run": "Keras 3 on JAX, one comparison per planted difference",
     "least": "the planted factories could share one run's one-device side"},
    {"file": "tests/test_programs_ahead.py",
     "keeps": "a cell that traces and compiles its steps while standing by trains bit for bit as it would "
              "have, with nothing traced in fit, on one and two (virtual) devices",
     "run": "real Keras 3 on JAX cells on the CPU, driven through the standby file as the host drives a "
            "follower, one run of one matrix",
     "least": "already one run; its cost is the JAX stack's start and compilation in each cell process"},
    {"file": "tests/test_build.py",
     "keeps": "images and GPU virtualenvs build and check; TF 1 GPU is unavailable with its reason",
     "run": "the TF 2.15 GPU image (the slowest image from nothing) and GPU virtualenvs",
     "least": "already the least: the promise is the GPU build itself"},
    {"file": "tests/test_reduce.py",
     "keeps": "a 150-line script reduced to at most 15 lines that still break; a value drift; a hanging "
              "candidate at its budget; bad input",
     "run": "reductions against a planted package's two releases",
     "least": "already planted; the 150-line reduction is the promise's size"},
)
