"""The unit of work: a cell = environment x workload x parallelism x batch x repeat."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from harness import stacks
from harness.workloads.protocol import FEEDS, WRAPPERS  # noqa: F401 - re-exported for the matrix

# How a cut-off is applied to an install (harness.environments.installer.cutoff_options); bump when that
# changes, so environments built the old way are built again (3: uv's --exclude-newer, setuptools
# lifted to the first that builds an sdist the PEP 517 way).
CUTOFF_RULE = 3


@dataclass(frozen=True)
class Environment:
    name: str
    python: str
    tensorflow: str | None = None
    keras: str | None = None
    backend: str | None = None
    packages: tuple[str, ...] = ()
    force: tuple[str, ...] = ()  # installed last with --no-deps: combinations pip's resolver refuses
    device: str = "cpu"
    base_image: str | None = None
    keras_api: str | None = None           # None: as the pins imply (stacks.api)
    tensorflow_package: str | None = None  # None: as the device implies (stacks.tensorflow_package)
    env: tuple[tuple[str, str], ...] = ()  # the matrix's `env:`, sorted by name
    # From a version range (harness.index.releases): which pins came from which range, and the
    # moment the rest of the environment resolves as of (its releases' upload time).
    ranges: tuple[tuple[str, str, str], ...] = ()  # (package, range, version chosen)
    uploaded_before: str | None = None             # ISO 8601 UTC; None: resolve as of today

    @property
    def api(self) -> str:
        return self.keras_api or stacks.api(self.tensorflow, self.keras)

    @property
    def asked_keras(self) -> str | None:
        """The Keras version this environment asks for (a pin or a forced one); None: whatever comes."""
        return stacks.asked_keras_version(self.api, self.keras, self.force)

    @property
    def requirements(self) -> list[str]:
        return stacks.requirements(self.tensorflow, self.keras, self.backend, self.device,
                                   list(self.packages), keras_api=self.api,
                                   tf_package=self.tensorflow_package, force=self.force,
                                   dated=bool(self.uploaded_before))

    def variables(self, inherit: Mapping[str, str] | None = None) -> dict[str, str]:
        """Every variable this environment's cell process needs, decided here only: the
        Keras switches its keras_api implies (KERAS_BACKEND, TF_USE_LEGACY_KERAS) and the
        matrix's `env:`. With `inherit` (the engine's base environment) the result is that
        base without any Keras switch it carried, plus these: a switch set for the harness
        never leaks into a cell unrecorded."""
        out = {k: v for k, v in (inherit or {}).items() if k not in stacks.KERAS_SWITCHES}
        out.update(self.env)
        if self.api == "keras3":
            out["KERAS_BACKEND"] = self.backend or "tensorflow"
        if self.api == "tf_keras":
            out["TF_USE_LEGACY_KERAS"] = "1"
        return out

    def content_hash(self) -> str:
        """Stable hash of everything that decides what gets installed."""
        what = {"python": self.python, "requirements": self.requirements, "force": list(self.force),
                "device": self.device, "base_image": self.base_image}
        if self.uploaded_before:  # only then: environments without a cut-off keep their hash
            what["uploaded_before"] = self.uploaded_before
            what["cutoff_rule"] = CUTOFF_RULE
        blob = json.dumps(what, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def describe(self) -> dict:
        out = {**asdict(self), "packages": list(self.packages), "force": list(self.force), "api": self.api,
               "ranges": [list(r) for r in self.ranges],
               "env": dict(self.env), "variables": self.variables(), "asked_keras": self.asked_keras,
               "requirements": self.requirements}
        for key in ("ranges", "uploaded_before"):  # only when used: stored specs of other cells stay equal
            if not out[key]:
                del out[key]
        return out


# The models the harness builds itself (workloads/models.py) and wraps.
BUILT_IN_MODELS = ("rnn", "convnet", "maxing", "dense")


@dataclass(frozen=True)
class Workload:
    """What a cell trains: a model the harness builds (BUILT_IN_MODELS), the user's model factory
    (`user`), the user's script (`script`), or a planted fault / an idle hold."""

    name: str
    model: str
    params: dict = field(default_factory=dict, hash=False, compare=False)
    # the user's code folder (usercode.Code) for `model: user` / `script:`; its hash is in params["code"]
    code: object | None = field(default=None, hash=False, compare=False)

    def spec(self) -> dict:
        return {"name": self.name, "model": self.model, **self.params}


@dataclass(frozen=True)
class Parallelism:
    wrapper: str = "none"
    devices: int = 1
    device_kind: str = "cpu"  # "gpu", or "cpu" for N virtual CPU devices
    ratios: tuple[int, ...] | None = None
    feed: str = "arrays"  # or "dataset": batches through tf.data instead of arrays to fit()

    @property
    def label(self) -> str:
        label = f"{self.wrapper}-{self.device_kind[0]}{self.devices}"
        if self.ratios:
            label += "-r" + "_".join(str(r) for r in self.ratios)
        if self.feed != "arrays":
            label += "-tfdata"
        return label

    def spec(self) -> dict:
        return {"wrapper": self.wrapper, "devices": self.devices, "device_kind": self.device_kind,
                "ratios": list(self.ratios) if self.ratios else None, "feed": self.feed}


_SIZE = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)([kmg]?)", re.I)


MAX_MEMORY = 64 << 40  # 64 TiB: more than any node has; a larger size is a typo (memory_limit, slurm.mem)


def size_bytes(size) -> int | None:
    """Bytes in a size like '4g', '512m', '1.5g' or '1073741824'; None if it is not one.
    The matrix validates with it; engines, recipes and the Slurm executor convert with it."""
    match = _SIZE.fullmatch(size) if isinstance(size, str) else None
    if not match:
        return None
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(match.group(1)) * units[match.group(2).lower()])


@dataclass(frozen=True)
class Limits:
    wall: float = 1800.0      # seconds for the whole cell
    progress: float = 600.0   # seconds without a new event = a hang
    memory: str | None = None  # e.g. "4g"; enforced where the engine can


@dataclass(frozen=True)
class Cell:
    environment: Environment
    workload: Workload
    parallelism: Parallelism
    batch_size: int
    epochs: int
    repeat: int
    seed: int = 1234
    limits: Limits = Limits()
    # `reseed: true` in the matrix: each repeat trains from its own seed (seed + repeat) on the
    # same data (drawn with `seed`), so the repeats measure the run-to-run spread of the accuracy,
    # not only of the timing (an accuracy difference means something only outside that spread)
    reseed: bool = False
    expect: dict | None = field(default=None, hash=False, compare=False)
    # chains (harness/chains.py): the cells whose files this one consumes, as
    # {"cell", "as", "spec_sha256"}; and the ids of the cells that consume this one's
    needs: tuple = field(default=(), hash=False, compare=False)
    feeds: tuple = field(default=(), hash=False, compare=False)

    @property
    def id(self) -> str:
        return "/".join([self.environment.name, self.workload.name, self.parallelism.label,
                         f"b{self.batch_size}", f"r{self.repeat}"])

    @property
    def group(self) -> str:
        """The id without the repeat: cells that only differ in repeat share it."""
        return self.id.rsplit("/", 1)[0]

    @property
    def training_seed(self) -> int:
        """The seed of the weights and the batch order: the data's, unless the repeats reseed."""
        return self.seed + self.repeat if self.reseed else self.seed

    def spec(self) -> dict:
        """What the in-environment side reads (spec.json)."""
        return {
            "cell": self.id,
            "environment": self.environment.describe(),
            "api": self.environment.api,
            "keras_version": self.environment.asked_keras,
            "backend": self.environment.backend,
            "workload": self.workload.spec(),
            "parallelism": self.parallelism.spec(),
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "repeat": self.repeat,
            "seed": self.seed,
            "training_seed": self.training_seed,
            "limits": asdict(self.limits),
            "expect": self.expect,
            **({"needs": [dict(n) for n in self.needs]} if self.needs else {}),
        }
