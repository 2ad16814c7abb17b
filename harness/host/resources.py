"""What a host offers cells, and how it is shared out: GPU sets and CPU sets.

The inventory is read the standard ways, first match wins:

1. ``--gpus 0,1,2`` (or ``HARNESS_GPUS``): a declared inventory. A cluster
   allocation, a test without GPUs, or a user keeping GPUs for other work.
2. ``CUDA_VISIBLE_DEVICES``, when set: what a scheduler such as Slurm granted.
3. NVML (``nvidia-ml-py``), else ``nvidia-smi``: every GPU of the host.

A cell is given specific GPUs and specific CPU cores and sees only those
(``CUDA_VISIBLE_DEVICES`` and CPU affinity for host processes, device ids and
a cpuset for containers), so cells side by side never touch each other's
devices, and a result says by index and UUID which ones it ran on.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

from harness.cells import Cell
from harness.errors import UserError


@dataclass(frozen=True)
class Gpu:
    index: str                 # what CUDA_VISIBLE_DEVICES / docker device ids name it by
    uuid: str | None = None
    name: str | None = None
    memory_mib: int | None = None
    compute_capability: str | None = None
    driver: str | None = None

    def describe(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Inventory:
    gpus: list[Gpu]
    cpus: list[int]
    source: str                       # where the GPU list came from
    links: dict[tuple[str, str], str] = field(default_factory=dict)  # (a, b) -> "NV18", "SYS", ...

    def describe(self) -> dict:
        return {"gpus": [g.describe() for g in self.gpus], "cpus": len(self.cpus), "gpu_source": self.source,
                "topology": {f"{a}-{b}": link for (a, b), link in sorted(self.links.items())}}


def _run(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _smi_gpus() -> list[Gpu]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    out = _run([exe, "--query-gpu=index,uuid,name,memory.total,compute_cap,driver_version",
                "--format=csv,noheader,nounits"])
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 6 and parts[0].isdigit():
            gpus.append(Gpu(parts[0], parts[1], parts[2], int(float(parts[3])) if parts[3] else None,
                            parts[4], parts[5]))
    return gpus


def nvml_gpus() -> list[Gpu]:
    """Every GPU of the host, through NVML where it loads, else nvidia-smi; [] without a driver.
    Asked once per process: the runner, the self-check and discovery all read this."""
    return list(_host_gpus())


@functools.lru_cache(maxsize=1)
def _host_gpus() -> tuple[Gpu, ...]:
    try:
        import pynvml  # optional dependency (nvidia-ml-py): without it nvidia-smi answers
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver: ask nvidia-smi
        return tuple(_smi_gpus())
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(Gpu(str(i), _text(pynvml.nvmlDeviceGetUUID(h)), _text(pynvml.nvmlDeviceGetName(h)),
                            pynvml.nvmlDeviceGetMemoryInfo(h).total // (1 << 20), f"{major}.{minor}",
                            _text(driver)))
        return tuple(gpus)
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def topology() -> dict[tuple[str, str], str]:
    """GPU-to-GPU links from ``nvidia-smi topo -m`` ("NV18" = 18 NVLinks, "SYS", "PIX", ...)."""
    exe = shutil.which("nvidia-smi")
    out = _run([exe, "topo", "-m"]) if exe else ""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in out.splitlines() if ln.strip()]
    if not lines:
        return {}
    header = lines[0].split()
    columns = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    links = {}
    for line in lines[1:]:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        for col, value in zip(columns, cells[1:1 + len(columns)], strict=False):
            a, b = cells[0][3:], col[3:]
            if a != b:
                links[(a, b)] = value
    return links


# What CUDA_VISIBLE_DEVICES accepts: an index, or a GPU's (or a MIG instance's) UUID.
_GPU_ID = re.compile(r"[0-9]{1,4}|(GPU|MIG)-[0-9A-Za-z-]{1,80}")


def parse_gpu_list(text: str, what: str = "") -> list[str]:
    """GPU indices or UUIDs, comma-separated; a UserError for anything else (a name, a
    range, '1.5', a GPU given twice, which would be handed to two cells at once)."""
    ids = [p.strip() for p in text.split(",") if p.strip()]
    for gpu in ids:
        if not _GPU_ID.fullmatch(gpu):
            raise UserError(f"{what}{gpu!r} is not a GPU index (0, 1, ...) or UUID (GPU-...)")
    twice = sorted({g for g in ids if ids.count(g) > 1})
    if twice:
        raise UserError(f"{what}GPU {', '.join(twice)} given twice")
    return ids


def discover(declared: str | None = None) -> Inventory:
    """The GPUs and CPU cores this process may hand out (see the module docstring)."""
    cpus = sorted(os.sched_getaffinity(0))
    declared_here = declared is not None
    declared = declared if declared_here else os.environ.get("HARNESS_GPUS")
    physical = {g.index: g for g in nvml_gpus()}
    by_uuid = {g.uuid: g for g in physical.values() if g.uuid}
    if declared is not None:
        what = "--gpus: " if declared_here else "HARNESS_GPUS: "
        ids, source = parse_gpu_list(declared, what), "declared (--gpus)"
    elif os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        ids, source = parse_gpu_list(os.environ["CUDA_VISIBLE_DEVICES"]), "CUDA_VISIBLE_DEVICES"
        ids = [i for i in ids if i != "-1"]
    else:
        return Inventory(list(physical.values()), cpus, "nvml" if physical else "none", topology())
    gpus = [physical.get(i) or by_uuid.get(i) or Gpu(i) for i in ids]
    return Inventory(gpus, cpus, source, topology() if physical else {})


@dataclass(frozen=True)
class Slot:
    """What one running cell was given."""

    gpus: tuple[Gpu, ...] = ()
    cpus: tuple[int, ...] = ()

    @property
    def visible_devices(self) -> str:
        return ",".join(g.index for g in self.gpus)

    def joined(self, other: Slot) -> Slot:
        """This slot and `other` as one: their GPUs in index order, their cores (a follower that
        joins a running set with free GPUs, standby.Relay)."""
        return Slot(tuple(sorted(self.gpus + other.gpus, key=lambda g: _index_key(g.index))),
                    tuple(sorted(self.cpus + other.cpus)))

    def describe(self) -> dict:
        return {"gpus": [g.describe() for g in self.gpus], "cpus": list(self.cpus),
                "cuda_visible_devices": self.visible_devices if self.gpus else None}


def gpus_needed(cell: Cell) -> int:
    return cell.parallelism.devices if cell.parallelism.device_kind == "gpu" else 0


class Pool:
    """Hands out disjoint GPU sets and CPU sets; thread-safe.

    GPU cells get ``n`` GPUs, chosen among the free ones so that as many pairs
    as possible are NVLink-connected, and a share of the cores in proportion
    to their GPUs. CPU cells get ``cpus_per_cell`` cores. ``jobs`` caps how
    many cells run at once.
    """

    def __init__(self, inventory: Inventory, jobs: int | None = None, cpus_per_cell: int | None = None,
                 cells: int | None = None):
        self.inventory = inventory
        n_cpus = len(inventory.cpus)
        # by default as many at once as there are cores (or GPUs), but never more slots than cells:
        # three cells on 64 cores get 21 cores each, not one
        self.jobs = max(1, jobs) if jobs else max(1, min(max(n_cpus, len(inventory.gpus)), cells or n_cpus))
        self.cpus_per_cell = max(1, min(n_cpus, cpus_per_cell or max(1, n_cpus // self.jobs)))
        self.free_gpus = [g.index for g in inventory.gpus]
        self.free_cpus = list(inventory.cpus)
        self.running = 0
        self._lock = threading.Lock()

    def impossible(self, cell: Cell) -> str | None:
        """Why this host can never run the cell, or None."""
        n = gpus_needed(cell)
        have = len(self.inventory.gpus)
        if n > have:
            return f"{n} GPUs asked, this host has {have} ({self.inventory.source})"
        return None

    def _cpus_for(self, n_gpus: int) -> int:
        if n_gpus and self.inventory.gpus:
            share = len(self.inventory.cpus) * n_gpus // len(self.inventory.gpus)
            return max(1, min(share, len(self.inventory.cpus)))
        return self.cpus_per_cell

    def take(self, cell: Cell, prefer=()) -> Slot | None:
        """A slot for the cell if its resources are free now, else None. `prefer`: sets of cores
        to give it if one is free and the size it gets (where its warm launcher lives)."""
        return self.take_gpus(gpus_needed(cell), prefer)

    def take_gpus(self, n: int, prefer=()) -> Slot | None:
        """`n` GPUs (none: a CPU slot) and their share of the cores as one running slot, if free
        now, else None. Also the free part of a follower that joins a smaller running set
        (standby.Relay)."""
        with self._lock:
            if self.running >= self.jobs or n > len(self.free_gpus):
                return None
            k = min(self._cpus_for(n), len(self.inventory.cpus))
            if k > len(self.free_cpus):
                return None
            chosen = self._best_set(n)
            for index in chosen:
                self.free_gpus.remove(index)
            free = set(self.free_cpus)
            cpus = next((sorted(c) for c in prefer if len(c) == k and set(c) <= free), self.free_cpus[:k])
            self.free_cpus = [c for c in self.free_cpus if c not in cpus]
            self.running += 1
        by_index = {g.index: g for g in self.inventory.gpus}
        return Slot(tuple(by_index[i] for i in chosen), tuple(cpus))

    def free(self, cpus) -> bool:
        """Whether every one of these cores is free now (and a cell may start)."""
        with self._lock:
            return self.running < self.jobs and set(cpus) <= set(self.free_cpus)

    def give_back(self, slot: Slot) -> None:
        with self._lock:
            self.free_gpus.extend(g.index for g in slot.gpus)
            self.free_gpus.sort(key=_index_key)
            self.free_cpus.extend(slot.cpus)
            self.free_cpus.sort()
            self.running -= 1

    def divided(self, parts: int) -> None:
        """A running slot was cut into `parts` slots (standby.Relay), each given back on its own;
        0: two running slots became one."""
        with self._lock:
            self.running += parts - 1

    def _best_set(self, n: int) -> list[str]:
        free = sorted(self.free_gpus, key=_index_key)
        if n <= 1 or not self.inventory.links:
            return free[:n]
        if len(free) > 12:  # combinations explode; NVLink hosts of that size are all-to-all anyway
            return free[:n]
        return list(max(itertools.combinations(free, n), key=lambda s: (self._nvlinked_pairs(s), [
            -_index_key(i)[0] for i in s])))

    def _nvlinked_pairs(self, gpus) -> int:
        return sum(1 for a, b in itertools.combinations(gpus, 2)
                   if self.inventory.links.get((a, b), "").startswith("NV"))


def _index_key(index: str) -> tuple[int, str]:
    return (int(index), "") if index.isdigit() else (1 << 30, index)
