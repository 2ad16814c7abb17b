"""What a cell process is given, whatever runs it: its variables and its container settings.

One place below both the engines (which start cells) and the recipes (which write a bundle's
``run.sh`` to start the same cell without the harness), so the two cannot drift apart and
neither has to import the other.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.cells import Cell
from harness.host.resources import Slot

# Variables every cell process gets, whatever the engine.
CELL_ENV = {
    "PYTHONFAULTHANDLER": "1",      # a segfault prints the Python stack to stderr
    "PYTHONUNBUFFERED": "1",        # logs reach the files before a crash, not after
    "PYTHONDONTWRITEBYTECODE": "1",  # the workloads folder may be read-only
    "PYTHONHASHSEED": "0",
}
# What a host-process cell inherits from the harness's own environment: what a
# process needs to run at all (paths, locale, temp, proxies and CA bundles,
# the driver's library path). Anything else a user exported for the harness
# stays out of cells, so a cell's inputs are what its spec and result say.
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
             "CUDA_HOME", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
             "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
# A host-process cell's home is a folder of its own, never the user's: a ~/.keras/keras.json
# there would set every cell's float type and image layout unrecorded (Keras reads it at import),
# ~/.config and ~/.cache hold other libraries' settings, and what one cell wrote there the next
# would read. What must pass from the host passes as a variable, on purpose and named in the
# result (a CA bundle's, the compile caches' folders), never through the home.
HOME_NOTE = "a folder of its own, empty when the cell started and removed with it (the user's home is not read)"
LAUNCHER_HOME_NOTE = ("the warm launcher imported the stack with a home of its own, empty when it started "
                      "(what Keras reads and writes at import)")
# Site settings of the communication libraries (a cluster's NCCL network, NVLink
# multicast switched off by the host's owner) must reach the cells as well.
INHERITED_PREFIXES = ("LC_", "NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_")


def inherited() -> dict[str, str]:
    """The part of the harness's own environment a cell process (or a self-check) gets."""
    return {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


def own_home(parent: str | Path) -> str:
    """A new, empty, only-the-user's home folder under `parent` (a cell's temp folder, a warm
    launcher's folder), for the process started there."""
    home = Path(parent) / "home"
    home.mkdir(mode=0o700)
    return str(home)


def cell_variables(cell: Cell, slot: Slot) -> dict[str, str]:
    """Variables the harness sets for a cell: the fixed ones, the environment's
    own (its Keras switches and the matrix's `env:`, decided by
    `Environment.variables`), and the devices it was given."""
    env = cell.environment.variables(inherit=CELL_ENV)
    if slot.gpus or cell.parallelism.device_kind == "gpu" or cell.environment.device == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = slot.visible_devices  # "" = no GPU: a CPU cell never takes one
    return env


# Container settings of every cell (Docker engine and a bundle's run.sh alike).
PIDS_LIMIT = 4096
TMPFS = {"/tmp": "rw,exec,nosuid,nodev,size=2g,mode=1777"}


def hardening() -> dict:
    """docker-py keyword arguments for every cell container."""
    return {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "pids_limit": PIDS_LIMIT,
            "read_only": True, "tmpfs": dict(TMPFS)}


def hardening_flags() -> list[str]:
    """The same settings as docker CLI flags, for a bundle's run.sh."""
    flags = ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", str(PIDS_LIMIT),
             "--read-only"]
    for where, options in TMPFS.items():
        flags += ["--tmpfs", f"{where}:{options}"]
    return flags
