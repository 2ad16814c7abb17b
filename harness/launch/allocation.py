"""How a warm GPU cell takes its device memory.

JAX reserves 75 % of every visible GPU's memory at a process's first
allocation (``XLA_PYTHON_CLIENT_PREALLOCATE``, on by default). Once imports
come from a warm launcher and programs from the compile cache, that
reservation is the largest part of what a Keras 3 on JAX GPU cell still pays
at its start: measured on an H200 in forked Keras 3.15.1 children (a
4 x GRU-512 model, cache warm), creating the first layer's weights took
2.1 s with the reservation and 0.3 s without; the steady epochs were the same
(0.603 s). So a warm run asks JAX to allocate as it goes.

The trade-off, as JAX documents it: memory taken as needed can fragment, so
a program that needs nearly all of a GPU may run out of memory where one
that reserved it up front would not. A cell on that edge runs as its stack
ships with ``--fresh`` (which sets nothing here), or with the variable set in
the matrix's ``env:`` (the matrix wins). TensorFlow's own reservation
(``TF_FORCE_GPU_ALLOW_GROWTH``) is left alone: TF cells have not been
measured on GPUs this way.

A result records what was set (``warmth.settings``), beside the caches.

The same question decides whether the next cell may prepare on a GPU set
while another cell trains there (standby.py): `shares_memory`.
"""

from __future__ import annotations

from harness.cells import Cell
from harness.host.resources import Slot

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
TF_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"


def variables(cell: Cell, slot: Slot) -> dict[str, str]:
    """The allocation variables a warm run gives this cell: none off JAX or off GPUs, none the
    matrix's `env:` sets itself."""
    env = cell.environment
    on_gpu = bool(slot.gpus) or env.device == "gpu"
    if env.api != "keras3" or env.backend != "jax" or not on_gpu or PREALLOCATE in dict(env.env):
        return {}
    return {PREALLOCATE: "false"}


def shares_memory(cell: Cell) -> bool:
    """Whether a warm cell of this stack leaves its GPUs' memory to others: it takes what it
    uses (JAX without its reservation, as `variables` asks; TensorFlow only with memory growth
    asked in the matrix's `env:`; PyTorch's caching allocator), or touches no GPU at all (an idle
    hold). Only then may another cell prepare beside it (standby.py). A planted fault never does:
    it acts before the point where a cell waits its turn."""
    env = cell.environment
    own = dict(env.env)
    if cell.workload.model == "idle":
        return True
    if cell.workload.model == "fault":
        return False
    if env.api == "keras3" and env.backend == "jax":
        return own.get(PREALLOCATE, "false").lower() == "false"
    if env.api == "keras3" and env.backend == "torch":
        return True
    return own.get(TF_GROWTH, "").lower() == "true"
