"""What the host can decide about a cell without launching it.

Some cells are `unsupported` for a reason the matrix alone settles: a
wrapper that the environment's Keras has no way to express (data_parallel
off Keras 3 on JAX, multi_gpu_model on Keras 3, tf.device replicas on the
JAX backend, any placement on the torch backend), a cuDNN layer Keras 3
does not have or a CPU environment cannot run, a tf.data feed without TensorFlow. Launching such a cell
costs an interpreter start, the stack's import and, on GPUs, the devices it
holds meanwhile -- to learn what is known already. These reasons are the
in-environment side's own (``workloads/wrappers.py``, ``compat.py``), word
for word, in the order the workload meets them, so a cell decided here reads
exactly as if it had run.

Only what follows from the pins is decided here. An environment whose Keras
is forced over pip's resolver (``force:``) is always launched: what really
loads there is the finding. Whatever depends on what the stack does when it
runs (a Keras version's multi_gpu_model failing, JAX refusing an odd last
batch) is never decided here.
"""

from __future__ import annotations

import re

from harness.cells import BUILT_IN_MODELS, Cell
from harness.workloads.protocol import MIRRORED_NEEDS, NO_CUDNN

_EXACT = re.compile(r"[0-9]+(\.[0-9]+)*")


def _minor(version: str) -> tuple[int, int]:
    """(major, minor) of a version text ("1.13.2" -> (1, 13)); (0, 0) when it names none."""
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(found[1]), int(found[2])) if found else (0, 0)


def unsupported(cell: Cell) -> str | None:
    """The reason this cell is `unsupported`, when the host knows it without running; else None."""
    env, par = cell.environment, cell.parallelism
    # only the harness's own models: a planted fault fires first, a user's factory is the user's finding
    if env.force or cell.workload.model not in BUILT_IN_MODELS:
        return None
    name, n = par.wrapper, par.devices
    keras3 = env.api == "keras3"
    backend = (env.backend or "tensorflow") if keras3 else "tensorflow"
    has_tf = bool(env.tensorflow) and backend == "tensorflow"
    tf1 = has_tf and env.tensorflow.split(".")[0] == "1"
    keras_known = env.asked_keras if env.asked_keras and _EXACT.fullmatch(env.asked_keras) else None
    # wrappers.Plan, in its order
    if name == "none":
        if n != 1:
            return f"wrapper 'none' trains on one device, {n} were asked"
    else:
        if n < 2 and name in ("ratio", "make_parallel"):
            return f"{name} splits batches across devices; it needs at least 2, {n} asked"
        if keras3 and backend == "torch":
            return "the torch backend has no device placement the wrappers can use"
        before_114 = tf1 and _minor(env.tensorflow) < (1, 14)
        if name == "mirrored" and (not has_tf or before_114 or env.api == "standalone") and keras_known:
            return MIRRORED_NEEDS % (env.api, keras_known, env.tensorflow if has_tf else None)
        if name == "data_parallel" and not (keras3 and backend == "jax"):
            return ("keras.distribution.DataParallel runs on Keras 3 with the JAX backend only; "
                    f"this is {env.api} with backend {env.backend or 'tensorflow'}")
        if name in ("ratio", "make_parallel") and keras3 and not has_tf:
            return (f"{name} places replicas with tf.device; the {backend} backend has none "
                    "(its successor there is data_parallel)")
        if name == "multi_gpu_model" and keras3:
            return ("Keras 3 has no multi_gpu_model (removed with Keras 2); "
                    "its successor is keras.distribution.DataParallel")
    # models.build: the recurrent layer
    cell_kind = cell.workload.params.get("cell")
    if cell.workload.model == "rnn" and keras3 and cell_kind in ("cudnn_gru", "cudnn_lstm"):
        layer = "CuDNNGRU" if cell_kind == "cudnn_gru" else "CuDNNLSTM"
        return (f"Keras 3 has no {layer} layer (its GRU/LSTM pick cuDNN themselves "
                "on the torch and tensorflow backends)")
    if cell.workload.model == "rnn" and cell_kind in ("cudnn_gru", "cudnn_lstm") and env.device == "cpu":
        return NO_CUDNN % ("CuDNNGRU" if cell_kind == "cudnn_gru" else "CuDNNLSTM")
    # run._train: the feed
    if par.feed == "dataset" and (not has_tf or tf1 or env.api == "standalone"):
        return ("fitting from tf.data needs TF 2 with tf.keras or Keras 3 (standalone Keras 2 and TF 1 "
                f"Keras take arrays); this is {env.api} on TF {env.tensorflow if has_tf else None}")
    return None
