"""Caches that outlive a cell: compiled programs and generated data.

They live under the harness's cache folder (``paths.cache_dir()``),
not under a results folder, so a re-run, a repeat and another matrix reuse
them. What each stack offers:

* **Keras 3 on JAX** -- JAX's persistent compilation cache
  (``JAX_COMPILATION_CACHE_DIR``; every program is written, however quick its
  compile: ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0``,
  ``..._MIN_ENTRY_SIZE_BYTES=-1``). Whole programs only
  (``JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none``): by default JAX also
  shares XLA's GPU autotuning results among all programs in the folder, so
  the kernels one cell's program got would depend on which cells compiled
  before it. Without that sharing each program is autotuned on its own, as
  in a fresh process, and then kept: a cached cell is one fresh compilation
  replayed. (Autotuning times kernels, so on GPUs fresh compilations differ
  among themselves -- measured on an H200, two fresh runs of the same GRU /
  LSTM cells differed in validation accuracy in 5 of 8 cells, by up to
  0.0066 -- while warm runs, replaying one program, agree bitwise.)
* **Keras 3 on PyTorch** -- TorchInductor's caches (``TORCHINDUCTOR_CACHE_DIR``,
  with its whole-graph cache on: ``TORCHINDUCTOR_FX_GRAPH_CACHE=1``). A model compiled with
  ``torch.compile`` -- Keras 3 compiles a loaded model whose archive kept ``jit_compile=True``, as
  every archive a JAX writer saves does -- otherwise compiles its C++ kernels again in every cell
  (its default folder is under the cell's own temporary folder). Measured on 2 CPUs
  (bench/jit_load.py, Keras 3.15.1): a GRU's first predict 20.7 s with the cache empty, 7.0 s
  with it warm; what is left is the graph's tracing, which no cache keeps.
* **GPU cells** -- CUDA's own JIT cache (``CUDA_CACHE_PATH``): PTX compiled
  by the driver for a GPU the wheel carries no binary for.
* **TensorFlow** (TF 1.x, tf.keras, Keras 3 on TF) -- nothing persistent for
  what these cells run: TF keeps compiled graphs and kernels in memory only
  (its XLA persistent cache covers ``jit_compile=True`` functions, which the
  harness's workloads do not use). A warm launch is what helps there.

A compile cache is code the next process runs, so it is trusted: every
folder is made only-the-user-writable (0700) and one that someone else owns
or can write is not used (the cell then compiles from scratch and its result
says why). Entries are keyed by everything that decides a compiled program
-- the environment's content hash (Python, every pin), its variables (XLA
flags and the matrix's ``env:``), the device kind and count, and the GPUs'
model, compute capability and driver -- so two stacks, flag sets or GPU
models never share an entry.

Data: ``HARNESS_DATA_DIR`` names one private folder where the workloads write
each generated data set once (per generator, arguments, seed and numpy
version) and map it read-only into every later cell (``workloads/data.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from harness.cells import Cell
from harness.files.paths import cache_dir
from harness.host.resources import Slot
from harness.workloads.protocol import ENV_DATA_DIR

CACHE_VERSION = 2  # 2: whole programs only (no shared XLA autotuning): entries of 1 are not reused
# Variables this module sets; a matrix's `env:` that sets one itself wins.
JAX_VARIABLES = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES")
CUDA_VARIABLES = ("CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE")
TORCH_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE")
FOLDERS = ("JAX_COMPILATION_CACHE_DIR", "CUDA_CACHE_PATH", "TORCHINDUCTOR_CACHE_DIR")   # each one folder


def root() -> Path:
    return cache_dir()


def private(folder: Path) -> str | None:
    """Make `folder` (and its missing parents) ours only; None if it is safe to use, else why not.

    A folder that exists and belongs to someone else, or that others can write, is refused:
    whoever can write a compile cache can run code in the next cell."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = folder.lstat()
    except OSError as exc:
        return f"cannot create {folder}: {exc.strerror}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a plain folder"
    if info.st_uid != os.getuid():
        return f"{folder} belongs to another user"
    if info.st_mode & 0o022:
        return f"{folder} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def key(cell: Cell, slot: Slot) -> str:
    """What a compiled program depends on, as a folder name."""
    env = cell.environment
    gpus = sorted((g.name or "?", g.compute_capability or "?", g.driver or "?") for g in slot.gpus)
    blob = json.dumps({"version": CACHE_VERSION, "environment": env.content_hash(), "api": env.api,
                       "backend": env.backend, "variables": env.variables(),
                       "device_kind": cell.parallelism.device_kind, "devices": cell.parallelism.devices,
                       "gpus": gpus}, sort_keys=True)
    return f"{env.name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def variables(cell: Cell, slot: Slot) -> tuple[dict[str, str], list[str]]:
    """The cache variables for this cell, and notes on any cache not used (and why)."""
    env, out, notes = cell.environment, {}, []
    own = dict(env.env)
    data = root() / "data"
    why = private(data)
    if why:
        notes.append(f"data cache not used: {why}")
    else:
        out[ENV_DATA_DIR] = str(data)
    uses_jax = env.api == "keras3" and env.backend == "jax"
    uses_torch = env.api == "keras3" and env.backend == "torch"
    on_gpu = bool(slot.gpus) or env.device == "gpu"
    if not (uses_jax or uses_torch or on_gpu):
        return out, notes
    folder = root() / "compile" / key(cell, slot)
    why = private(folder.parent) or private(folder)
    if why:
        notes.append(f"compile cache not used: {why}")
        return out, notes
    wanted = {}
    if uses_jax:
        wanted.update(JAX_COMPILATION_CACHE_DIR=str(folder / "jax"),
                      JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1",
                      JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="none")
    if uses_torch:
        wanted.update(TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor"), TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    if on_gpu:
        wanted.update(CUDA_CACHE_PATH=str(folder / "cuda"), CUDA_CACHE_MAXSIZE=str(4 << 30))
    out.update({k: v for k, v in wanted.items() if k not in own})
    return out, notes


CONTAINER_DATA = "/harness-data"
CONTAINER_COMPILE = "/harness-compile"


def in_container(variables: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """The same caches for a container: (docker volumes, variables as the container sees them).
    The data folder is mounted read-only (a container cell reads sets that process-engine cells
    wrote; it generates a missing one in memory); the compile cache folder read-write, written
    as the user the container runs as."""
    volumes: dict = {}
    env = {k: v for k, v in variables.items() if k not in (ENV_DATA_DIR, *FOLDERS)}
    if ENV_DATA_DIR in variables:
        volumes[variables[ENV_DATA_DIR]] = {"bind": CONTAINER_DATA, "mode": "ro"}
        env[ENV_DATA_DIR] = CONTAINER_DATA
    for name in FOLDERS:
        if name in variables:
            path = Path(variables[name])
            volumes[str(path.parent)] = {"bind": CONTAINER_COMPILE, "mode": "rw"}
            env[name] = f"{CONTAINER_COMPILE}/{path.name}"
    return volumes, env
