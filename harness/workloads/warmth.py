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


TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


class Watch(object):
    """Counts, from JAX's own monitoring events, the compile cache's hits and misses and the
    functions traced while fit ran (`fit_begins`): a first epoch that traced nothing had its
    programs ready (workloads/ahead.py)."""

    def __init__(self, stack):
        self.hits = self.misses = self.traces = 0
        self.listening = False
        self.traces_at_fit = None
        jax = stack.backend == "jax"
        self.folder = os.environ.get("JAX_COMPILATION_CACHE_DIR") if jax else None
        self.before = _entries(self.folder) if self.folder else None
        self.counting = False
        if jax:
            try:
                # the framework: a cell on JAX has imported it; any other never reaches this
                from jax import monitoring
                monitoring.register_event_listener(self._event)
                self.listening = True
                monitoring.register_event_duration_secs_listener(self._duration)
                self.counting = True
            except Exception:  # noqa: BLE001 - an old JAX without events: the entry count still tells
                pass

    def _event(self, name, *args, **kwargs):
        if name == "/jax/compilation_cache/cache_hits":
            self.hits += 1
        elif name == "/jax/compilation_cache/cache_misses":
            self.misses += 1

    def _duration(self, name, *args, **kwargs):
        if name == TRACE_EVENT:
            self.traces += 1

    def fit_begins(self):
        self.traces_at_fit = self.traces

    def report(self):
        # deferred: workloads.data imports numpy at its top, and numpy is the stack's to import
        from . import data
        out = {"launch": os.environ.get(ENV_LAUNCH) or "fresh", "data": list(data.SOURCES),
               "compile_cache": None}
        if self.counting and self.traces_at_fit is not None:
            out["traced_in_fit"] = self.traces - self.traces_at_fit
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
