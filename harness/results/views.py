"""Read-only views of the nested parts of a result (`seen`, `provenance`, `warmth`, `error`,
`expectation`), as `Result`'s properties hand them out.

A view is built from the stored dict on each access, so it always agrees with what
`Result.save` writes and is never saved itself; a key the cell did not record reads as
None, and a part of another type than documented reads as empty: a view never raises on
a result written by someone else.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


def nested(value: Any) -> dict:
    """A nested part as a dict: absent, null or (in a key `load` does not check) another type
    reads as empty, so a view never raises on a result written by someone else."""
    return value if isinstance(value, dict) else {}


def _picked(cls, data: Any) -> dict:
    """The keys of `data` that `cls` (a view) names, missing ones as None."""
    data = nested(data)
    return {f.name: data.get(f.name) for f in fields(cls)}


class _View:
    """A read-only view of one nested part of a result: the keys it names, missing ones None.
    `_lists` names the keys that hold lists, read as tuples (hashable), each item through the
    view given (None: as it is); a view whose part needs more overrides `of`."""

    _lists: dict = {}

    @classmethod
    def of(cls, data: Any):
        picked = _picked(cls, data)
        for key, item in cls._lists.items():
            picked[key] = tuple(item.of(v) if item else v for v in picked[key] or ())
        return cls(**picked)


@dataclass(frozen=True)
class Seen(_View):
    """`seen`: the versions and devices the cell's own process reported (workloads/compat.py).
    Hashable, so the report can count which stack an environment's cells agreed on."""

    python: str | None = None
    tensorflow: str | None = None
    keras: str | None = None
    numpy: str | None = None
    jax: str | None = None
    api: str | None = None       # tf.keras, keras (2) or keras3
    backend: str | None = None   # Keras 3's backend
    devices: Any = None
    gpus: tuple = ()
    cuda: Any = None
    cudnn: Any = None
    _lists = {"gpus": None}

    @property
    def has_versions(self) -> bool:
        """Whether the cell got far enough to report its framework at all."""
        return bool(self.tensorflow or self.keras)


@dataclass(frozen=True)
class Gpu(_View):
    """One GPU of `provenance.host_resources.gpus`, as the host reported it."""

    name: str | None = None
    memory_mib: int | None = None
    compute_capability: str | None = None
    driver: str | None = None


@dataclass(frozen=True)
class Provenance(_View):
    """`provenance`: which harness wrote the result, on what host, resolved as of when."""

    harness_commit: str | None = None
    harness_files_sha256: str | None = None  # an installed harness: the hash of its files
    harness_version: str | None = None
    gpus: tuple = ()          # host_resources.gpus
    gpu_links: tuple = ()     # the kinds of link in host_resources.topology, sorted
    uploaded_before: str | None = None  # cutoff.uploaded_before: the day the environment resolved as of
    resolved_at: str | None = None      # when the environment was resolved (built): what "no cut-off" means

    @classmethod
    def of(cls, data: Any) -> Provenance:
        data = nested(data)
        resources = nested(data.get("host_resources"))
        return cls(harness_commit=data.get("harness_commit"), harness_files_sha256=data.get("harness_files_sha256"),
                   harness_version=data.get("harness_version"),
                   gpus=tuple(Gpu.of(g) for g in resources.get("gpus") or ()),
                   gpu_links=tuple(sorted(set(nested(resources.get("topology")).values()))),
                   uploaded_before=nested(data.get("cutoff")).get("uploaded_before"),
                   resolved_at=data.get("resolved_at") if isinstance(data.get("resolved_at"), str) else None)


@dataclass(frozen=True)
class Beside(_View):
    """One item of `warmth.beside`: work of the harness's own that ran while the cell did."""

    _lists = {"cpus": None}
    kind: str | None = None           # "launcher import", "environment build", "next cell preparing" (beside.py)
    name: str | None = None           # the environment it was for (the next cell's id)
    cpus: tuple = ()                  # the cores it was pinned to; (): anywhere
    seconds: float | None = None      # of the cell's span it covered


@dataclass(frozen=True)
class Warmth(_View):
    """`warmth`: how the cell's process started (record.warmth_record)."""

    _lists = {"beside": Beside}
    launch: str | None = None         # warm (forked from a launcher) or fresh; None: not recorded
    compile_cache: dict | None = None
    settings: dict | None = None      # start-up variables a warm run set (allocation.py)
    beside: tuple = ()                # the harness's own work beside the cell; (): a quiet machine

    @property
    def cache_hit(self):
        """Whether compilation came from the cache; None when it was not looked at."""
        return nested(self.compile_cache).get("hit")


@dataclass(frozen=True)
class Failure(_View):
    """`error`: what failed, as the cell's process caught it."""

    signature: str | None = None
    where: str | None = None       # the frame in the user's code, for user workloads
    message: str | None = None
    traceback: str | None = None


@dataclass(frozen=True)
class ExpectedValue(_View):
    """One value a control cell was expected to give (harness/status/values.py) and what it gave."""

    metric: str | None = None
    want: Any = None
    got: Any = None
    met: bool | None = None
    peer: str | None = None   # the cell whose figure it was compared with
    why: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Expectation(_View):
    """`expectation`: a control cell's known answer (a status, or values) and whether it held."""

    status: str | None = None
    signature: str | None = None
    why: str | None = None
    met: bool | None = None
    values: tuple = ()
    _lists = {"values": ExpectedValue}
