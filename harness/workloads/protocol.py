"""The contract between the host and the in-environment side, in one place.

Everything both sides of the process boundary must agree on lives here: file
names, outcome words, exit codes, and the names a matrix may use for faults,
recurrent cells, wrappers and feeds. It imports nothing, so the host can read
it without importing anything that runs inside an environment; it is the
only workloads module the host imports (tests/test_boundary.py enforces it).
Python 3.5 syntax, like the rest of the package.
"""

# Files a cell folder holds. The host writes SPEC_FILE and RESULT_FILE; the
# workload writes EVENTS_FILE as it goes and WORKLOAD_FILE at the end.
SPEC_FILE = "spec.json"
EVENTS_FILE = "events.jsonl"
WORKLOAD_FILE = "workload.json"
RESULT_FILE = "result.json"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
# Written by workloads/reaper.py when the cell's main process has ended: the processes it left
# running, and how each was ended (SIGTERM, then SIGKILL after LEFTOVER_GRACE seconds).
REAPED_FILE = "reaped.json"
# Present while the cell's GPUs are still another cell's (harness/standby.py): the workload
# prepares, then waits before training until the host removes it.
STANDBY_FILE = "standby"
# The standby file's content where the host allows the cell to trace and compile its steps while
# it waits (workloads/ahead.py): its programs are in the compile cache already.
STANDBY_PROGRAMS = "programs ahead"
LEFTOVER_GRACE = 3.0

# workload.json "outcome": what the workload itself can tell. The host turns
# it into a status (only the host can know oom or timeout).
OUTCOME_OK = "ok"
OUTCOME_ERROR = "error"
OUTCOME_UNSUPPORTED = "unsupported"

# Exit codes of `python -m workloads SPEC OUTDIR`.
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ERROR = 3        # a Python exception ended the workload; details in workload.json
EXIT_UNSUPPORTED = 4  # the environment lacks what the cell needs; reason in workload.json

# Names a matrix may use, checked on the host before anything runs.
FAULTS = ("segfault", "abort", "memory", "hang", "exception", "import", "silent_exit")
RNN_CELLS = ("gru", "cudnn_gru", "lstm", "cudnn_lstm")
WRAPPERS = ("none", "multi_gpu_model", "ratio", "make_parallel", "mirrored", "data_parallel")
FEEDS = ("arrays", "dataset")
# Known traps a matrix can plant on purpose to prove they are caught.
TRAPS = ("clear_session", "loss_times_devices")

# Environment variables the host sets for the cell process.
ENV_WALL_DEADLINE = "HARNESS_WALL_DEADLINE"   # epoch seconds after which the cell ends itself
ENV_DATA_DIR = "HARNESS_DATA_DIR"             # a private folder where generated data is kept (data.py)
ENV_LAUNCH = "HARNESS_LAUNCH"                 # "warm" in a child of workloads/forkserver.py
# What the host asks of a cell it confines (workloads/confine.py, harness/confinement.py): JSON
# {"how": "landlock" or "mount-namespace", "writable": [folders]}; absent, the cell is not confined.
ENV_CONFINE = "HARNESS_CONFINE"
# "1" where the environment is the harness's own (a virtualenv of its cache, kept between cells):
# the stack's import may write the bytecode of what it compiles there (compat.stack_bytecode).
ENV_STACK_BYTECODE = "HARNESS_STACK_BYTECODE"

# The user's own code (workloads/user.py, harness/usercode.py, harness/chains.py). In a cell
# folder: what a cell leaves for the cells that need it, what it was handed by them, and the
# metrics a script reported. The variables are set for the user's code by workloads/user.py.
OUTPUT_DIR = "artifacts"
INPUTS_DIR = "inputs"
METRICS_FILE = "metrics.jsonl"
ENV_METRICS = "HARNESS_METRICS"   # append JSON lines {"name": ..., "value": ...} to this file
ENV_OUTPUT = "HARNESS_OUTPUT"     # a folder: files left here are handed to the cells that need this one
ENV_INPUT = "HARNESS_INPUT"       # the (first) producer's files; HARNESS_INPUT_<NAME> for each
ENV_SPEC = "HARNESS_SPEC"         # the cell's spec.json (batch size, devices, wrapper, params)

# `harness diverge` (workloads/layerwise.py, harness/diverge.py): what each side leaves under
# OUTPUT_DIR, and the name the reference's files are handed to the other side under.
DIVERGE_LAYERS = "layers.json"
DIVERGE_ARRAYS = "layers.npz"
DIVERGE_REFERENCE = "reference"

# The message that marks a multi-device run that did not use its devices.
NOT_ENGAGED = "parallelism not engaged: asked %d, ran on %d"


# Versions as libraries report them inside and as results and reports show them: CUDA's
# runtime and cuDNN give integers (13000, 91900); people and release notes say 13.0 and
# 9.19.0. Both sides format with these (results written before them hold the integers).
def cuda_version_text(value):
    """'13.0' for 13000 (CUDA encodes major * 1000 + minor * 10); anything else as given."""
    number = _integer(value)
    if number is None or number < 1000:
        return value
    return "%d.%d" % (number // 1000, (number % 1000) // 10)


def cudnn_version_text(value):
    """'9.19.0' for 91900 (cuDNN 9 encodes major * 10000 + minor * 100 + patch), '8.9.2'
    for 8902 (cuDNN 8 and earlier: major * 1000 + minor * 100 + patch); else as given."""
    number = _integer(value)
    if number is None or number < 1000:
        return value
    if number >= 90000:
        return "%d.%d.%d" % (number // 10000, (number % 10000) // 100, number % 100)
    return "%d.%d.%d" % (number // 1000, (number % 1000) // 100, number % 100)


def _integer(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 9:
        return int(value)
    return None

# The reason a cuDNN layer (CuDNNGRU, CuDNNLSTM) is `unsupported` where no GPU is seen: its only
# kernels are cuDNN's. One sentence for the host (preflight) and the process (compat).
MIRRORED_NEEDS = ("MirroredStrategy needs TF 1.14 or later with tf.keras, or Keras 3 on the tensorflow backend; "
                  "this is %s %s on TF %s")
NO_CUDNN = "%s runs on cuDNN kernels only, which need an NVIDIA GPU; this environment has none"
