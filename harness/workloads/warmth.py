"""What a cell can tell about its own warmth: how it was launched, whether
its compiled programs came from a persistent cache, where its data came from.

Recorded in workload.json as ``warmth``, so a warm first epoch is never read
as if it were a cold one. JAX says itself which compilations hit its
persistent cache (its monitoring events); the count of cache entries before
and after is kept beside it. TensorFlow has no persistent cache for what the
workloads run (see the host's caches.py), so its cells say ``None`` there.
"""
import os

from .protocol import ENV_LAUNCH


def _entries(folder):
    count = 0
    for _, _, files in os.walk(folder):
        count += len(files)
    return count


class Watch(object):
    def __init__(self, stack):
        self.hits = self.misses = 0
        self.listening = False
        self.folder = os.environ.get("JAX_COMPILATION_CACHE_DIR") if stack.backend == "jax" else None
        self.before = _entries(self.folder) if self.folder else None
        if self.folder:
            try:
                from jax import monitoring
                monitoring.register_event_listener(self._event)
                self.listening = True
            except Exception:  # noqa: BLE001 - an old JAX without events: the entry count still tells
                pass

    def _event(self, name, *args, **kwargs):
        if name == "/jax/compilation_cache/cache_hits":
            self.hits += 1
        elif name == "/jax/compilation_cache/cache_misses":
            self.misses += 1

    def report(self):
        from . import data
        out = {"launch": os.environ.get(ENV_LAUNCH) or "fresh", "data": list(data.SOURCES),
               "compile_cache": None}
        if self.folder:
            after = _entries(self.folder)
            cache = {"kind": "jax", "entries_before": self.before, "entries_after": after}
            if self.listening:
                cache.update(hits=self.hits, misses=self.misses)
                hit = "all" if self.hits and not self.misses else ("some" if self.hits else "none")
            else:
                hit = "all" if self.before and after == self.before else "unknown"
            cache["hit"] = hit
            out["compile_cache"] = cache
        return out
