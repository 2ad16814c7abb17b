"""GPU utilisation sampled on the host through NVML while cells run.

One sampler thread for the whole run: it reads every GPU's utilisation a few
times a second, and a cell asks afterwards for the samples of its own GPUs
within its steady epochs (from the wall-clock times in its event log). The
same samples tell how busy the host was over the run (occupancy). Without
NVML (no driver, no ``nvidia-ml-py``) there is simply no sampler: nothing is
estimated in its place.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque

from harness.host.resources import Gpu
from harness.stats import spread_of


class GpuMonitor(threading.Thread):
    def __init__(self, gpus: list[Gpu], interval: float = 0.2, keep: int = 200_000):
        super().__init__(daemon=True, name="gpumon")
        import pynvml  # optional dependency (nvidia-ml-py): without it `maybe` answers None, no sampler
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handles = {}
        for gpu in gpus:
            try:
                handle = (pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid) if gpu.uuid
                          else pynvml.nvmlDeviceGetHandleByIndex(int(gpu.index)))
            except (pynvml.NVMLError, ValueError):
                continue
            self.handles[gpu.index] = handle
        self.interval = interval
        self.samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=keep)
        self._halt = threading.Event()
        self.started_at = time.time()
        self.start()

    @classmethod
    def maybe(cls, gpus: list[Gpu]) -> GpuMonitor | None:
        """A monitor if NVML answers for these GPUs, else None."""
        if not gpus or not any(g.uuid for g in gpus):
            return None
        try:
            monitor = cls(gpus)
        except Exception:  # noqa: BLE001 - no library or no driver: no sampling, said as such
            return None
        return monitor if monitor.handles else None

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            now = time.time()
            sample = {}
            for index, handle in self.handles.items():
                try:
                    sample[index] = self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                except self.nvml.NVMLError:
                    continue
            self.samples.append((now, sample))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=2)
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def window(self, indices: list[str], start: float, end: float) -> dict:
        """Per-GPU utilisation (percent) between two wall-clock times: median, min, max, n."""
        out = {}
        for index in indices:
            values = [s[index] for t, s in list(self.samples) if start <= t <= end and index in s]
            if values:
                out[index] = spread_of(values).as_dict()
        return out

    def occupancy(self, start: float, end: float) -> dict | None:
        """How busy the host's GPUs were over a span: the share of samples in
        which any GPU was busy, and the mean number of busy GPUs."""
        rows = [s for t, s in list(self.samples) if start <= t <= end]
        if not rows:
            return None
        busy = [sum(1 for v in s.values() if v > 0) for s in rows]
        return {"samples": len(rows), "gpus": len(self.handles),
                "any_busy_fraction": round(sum(1 for b in busy if b) / len(rows), 3),
                "mean_busy_gpus": round(sum(busy) / len(rows), 2),
                "mean_utilisation": round(statistics.mean(v for s in rows for v in s.values()), 1)}
