"""result.json as one typed model: one writer (`Result.save`), one reader (`load`).

The file on disk is a documented contract that users' own tools read (README
"Result contract": add freely, rename none), so the model keeps every key and
value exactly as written; it only *checks* them. A result.json is data, not
trust: it may have been written by an older harness, a newer one, a person or
a broken disk. `load` therefore answers either a `Result` whose fields have
the documented types (so readers never guard every access) or a
`Quarantined(path, why)` with a one-line reason; it never raises. Commands
print the reason and go on: `run` runs such a cell again, `status`, `report`
and `repro` leave it out.

Older schemas are brought up to date on load (`MIGRATIONS`, as asv's
`Results` does with its `api_version`); a schema newer than this harness
knows is quarantined rather than guessed at.

Fields of the model are open: keys this version does not know (a newer
harness, a neighbour's feature) are kept in `extra` and written back as they
were, so loading and saving a result never loses anything. The nested parts are
read through read-only views (``views.py``).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness import SCHEMA
from harness import status as statuses
from harness.files import ownfiles
from harness.files.paths import write_json
from harness.results.views import Expectation, Failure, Provenance, Seen, Warmth, nested
from harness.workloads.protocol import RESULT_FILE as RESULT

_ANY = object()  # any JSON value
NO_CUTOFF = "no cut-off"  # an environment resolved with the newest releases of the day it was built
_NUMBER = (int, float)


@dataclass
class Quarantined:
    """A result file that could not be read as a result: where, and why in one line."""

    path: Path
    why: str

    def note(self) -> str:
        return f"{self.path}: {self.why}; left out"


@dataclass(eq=False)
class Result:
    """One cell's result. Field names are result.json's keys, one for one."""

    cell: str
    status: str
    schema: int = SCHEMA
    reason: str | None = None
    engine: str | None = None
    environment: str | None = None
    workload: str | None = None
    parallelism: dict = field(default_factory=dict)
    batch_size: int | None = None
    epochs_asked: int | None = None
    repeat: int | None = None
    seen: dict = field(default_factory=dict)
    parameters: Any = None
    placement: Any = None
    engagement: dict | None = None
    resources: dict | None = None
    samples: Any = None
    metrics: dict = field(default_factory=dict)
    epochs: list = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    error: dict | None = None
    exit: dict | None = None
    expect: dict | None = None
    expectation: dict | None = None
    provenance: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept as written

    # -- the one writer and the reader ---------------------------------------------------
    def save(self, folder: Path) -> Path:
        """Write result.json into `folder` (atomically). The only code that writes a result file."""
        path = Path(folder) / RESULT
        write_json(path, self.to_dict())
        return path

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: Any) -> Result:
        """A result from parsed JSON; ValueError (one line) when its shape is not a result's."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {_kind(data)}")
        data = migrate(data)
        known = {f.name for f in fields(cls)} - {"extra"}
        for name, types in TYPES.items():
            if name not in data:
                if name in REQUIRED:
                    raise ValueError(f"no '{name}'")
                continue
            value = data[name]
            if types is _ANY or (value is None and name not in REQUIRED and name not in ALWAYS):
                continue
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                raise ValueError(f"'{name}' is {_kind(value)}, expected {' or '.join(_name(t) for t in types)}")
        if data["status"] not in statuses.ALL:
            raise ValueError(f"'status' is {str(data['status'])[:40]!r}, not one of {', '.join(statuses.ALL)}")
        if not data["cell"]:
            raise ValueError("'cell' is empty")
        for i, epoch in enumerate(data.get("epochs") or []):
            if not isinstance(epoch, dict):
                raise ValueError(f"'epochs[{i}]' is {_kind(epoch)}, expected an object")
        return cls(**{k: v for k, v in data.items() if k in known},
                   extra={k: v for k, v in data.items() if k not in known})

    # -- what readers ask of a result ----------------------------------------------------
    def __getitem__(self, key: str):
        """Dict-style reading of the on-disk keys (``r["status"]``), for code written against dict
        results (outside checkers, tests); the harness itself reads the attributes."""
        if key != "extra" and key in _FIELDS:
            return getattr(self, key)
        return self.extra[key]

    def get(self, key: str, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: str, value) -> None:
        """``r["new_key"] = value`` adds a key (kept in `extra`, written as a top-level key)."""
        if key != "extra" and key in _FIELDS:
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __contains__(self, key: str) -> bool:
        return (key != "extra" and key in _FIELDS) or key in self.extra

    @property
    def signature(self) -> str | None:
        return (self.error or {}).get("signature")

    @property
    def failure_text(self) -> str:
        """What the failure says in one line: its signature, else its reason (as `status.failure_text`)."""
        return self.signature or self.reason or ""

    @property
    def label(self) -> str:
        return self.parallelism.get("label") or _part(self.cell, 2)

    @property
    def devices(self) -> int:
        return int(self.parallelism.get("devices") or 1)

    @property
    def wrapper(self) -> str:
        return self.parallelism.get("wrapper") or self.label.split("-")[0]

    @property
    def env_name(self) -> str:
        return self.environment or _part(self.cell, 0)

    @property
    def workload_name(self) -> str:
        return self.workload or _part(self.cell, 1)

    @property
    def matrix(self) -> str:
        """The matrix file the result came from: figures are compared within one run only."""
        return self.provenance.get("matrix") or ""

    @property
    def host(self) -> str:
        return (self.provenance.get("host") or {}).get("name") or "?"

    @property
    def met(self) -> bool | None:
        """A control cell's verdict: True / False; None for a cell without an expected answer, or
        whose only expectations are values this host could not judge (harness/status/values.py)."""
        if self.expectation is None or self.expectation.get("judged") is False:
            return None
        return bool(self.expectation.get("met"))

    # -- read-only views of the nested parts (views.py) ----------------------------------
    # Built from the stored dicts on each access, so they always agree with what `save`
    # writes and are never saved themselves; a key the cell did not record reads as None.
    @property
    def inside(self) -> Seen:
        """What the cell saw from inside its environment (`seen`)."""
        return Seen.of(self.seen)

    @property
    def origin(self) -> Provenance:
        """Who wrote the result, where and when it resolved (`provenance`)."""
        return Provenance.of(self.provenance)

    @property
    def warmth(self) -> Warmth | None:
        """How the cell's process started; None when the result records none (decided
        without launching, or written before warm launches existed)."""
        data = self.extra.get("warmth")
        return Warmth.of(data) if isinstance(data, dict) and data else None

    @property
    def failure(self) -> Failure | None:
        """The cell's error (`error`); None for a cell that did not fail."""
        return None if self.error is None else Failure.of(self.error)

    @property
    def expected(self) -> Expectation | None:
        """A control cell's verdict (`expectation`); None for a cell without an expected answer."""
        return None if self.expectation is None else Expectation.of(self.expectation)

    @property
    def code_kind(self) -> str | None:
        """What user code the cell ran (`code.kind`: "script" for `script:`); None for built-in workloads."""
        return nested(self.extra.get("code")).get("kind")

    @property
    def releases(self) -> list[tuple]:
        """The (package, specifier, version) each version range of the environment resolved to
        (written by record.assemble). All or nothing: a malformed entry makes it [], since a
        half-read list would name the wrong release."""
        chosen = self.extra.get("releases")
        if not isinstance(chosen, list) or not all(isinstance(c, (list, tuple)) and len(c) == 3 for c in chosen):
            return []
        return [tuple(c) for c in chosen]

    @property
    def resolution(self) -> str:
        """What the packages of the cell's environment that no pin fixed were resolved as of, in the
        words every draft, report and page use -- taken from the record (what the engine applied),
        never from the matrix (what was asked): a draft once said "each resolved as of its release's
        day" of environments resolved the day they were built.
        - a cut-off in the provenance: that moment's index (``cutoff.uploaded_before``);
        - the local engine: nothing resolved, the interpreter's own packages;
        - else no cut-off: the newest releases the day the environment was built (``resolved_at``, which
          the engines record), or, in a record without it, by the day the cell started (a built
          environment is reused while its pins hold)."""
        cut = self.origin.uploaded_before
        if cut:
            return f"as of {str(cut)[:10]} (a cut-off: nothing uploaded later was installed)"
        if self.engine == "local":
            return "not by the harness: the local engine ran the packages the interpreter already held"
        if self.origin.resolved_at:
            return f"as of {self.origin.resolved_at[:10]}, the day its environment was built, {NO_CUTOFF}"
        day = str(self.started or "")[:10]
        return f"as of the day its environment was built, {NO_CUTOFF}" + (f" (by {day}, when it ran)" if day else "")

    def metric(self, name: str):
        return self.metrics.get(name)

    def timing_of(self, name: str):
        return self.timing.get(name)


_FIELDS = frozenset(f.name for f in fields(Result))


# The documented types of each key (None is accepted for optional keys).
TYPES: dict[str, Any] = {
    "schema": (int,), "cell": (str,), "status": (str,), "reason": (str,), "engine": (str,),
    "environment": (str,), "workload": (str,), "parallelism": (dict,), "batch_size": (int,),
    "epochs_asked": (int,), "repeat": (int,), "seen": (dict,), "parameters": _ANY, "placement": _ANY,
    "engagement": (dict,), "resources": (dict,), "samples": _ANY, "metrics": (dict,), "epochs": (list,),
    "timing": (dict,), "error": (dict,), "exit": (dict,), "expect": (dict,), "expectation": (dict,),
    "provenance": (dict,), "logs": (dict,), "started": (str,), "finished": (str,),
}
REQUIRED = ("schema", "cell", "status")
ALWAYS = ("parallelism", "seen", "metrics", "epochs", "timing", "provenance", "logs")  # never null


def _from_0(data: dict) -> dict:
    """Schema 0 (results written before `schema` was recorded): the same keys, some of them null."""
    out = dict(data)
    for key in ALWAYS:
        if out.get(key) is None:
            out[key] = [] if key == "epochs" else {}
    out["schema"] = 1
    return out


# schema N -> a function taking a schema-N dict to a schema N+1 one
MIGRATIONS: dict[int, Callable[[dict], dict]] = {0: _from_0}


def migrate(data: dict) -> dict:
    version = data.get("schema", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"'schema' is {_kind(version)}, expected a whole number")
    if version > SCHEMA:
        raise ValueError(f"schema {version} is newer than this harness reads ({SCHEMA}): a newer harness wrote it")
    while version < SCHEMA:
        step = MIGRATIONS.get(version)
        if step is None:
            raise ValueError(f"schema {version} is not one this harness can read")
        data = step(data)
        version = data["schema"]
    return data


def load(path: Path) -> Result | Quarantined:
    """The result in `path` (a result.json), or why it is not one. Never raises."""
    path = Path(path)
    try:  # never through a link, never blocking on a pipe, never an outsized file (ownfiles)
        data = ownfiles.read_bytes(path)
        if data is None:
            raise FileNotFoundError(errno.ENOENT, "no such file")
        text = data.decode()
    except ownfiles.NotOwn as exc:
        return Quarantined(path, exc.what)
    except (OSError, UnicodeDecodeError) as exc:
        return Quarantined(path, f"unreadable ({type(exc).__name__}: {exc.strerror or exc})"
                           if isinstance(exc, OSError) else "unreadable (not UTF-8 text)")
    try:
        data = json.loads(text)
    except ValueError as exc:
        return Quarantined(path, f"not JSON ({str(exc)[:80]})")
    try:
        return Result.from_dict(data)
    except ValueError as exc:
        return Quarantined(path, f"not a result: {exc}")
    except (TypeError, RecursionError) as exc:  # a shape no check above foresaw
        return Quarantined(path, f"not a result: {type(exc).__name__}")


def load_folder(folder: Path) -> Result | Quarantined | None:
    """The result of a cell folder: None when it has no result.json at all."""
    path = Path(folder) / RESULT
    if not path.exists() and not path.is_symlink():
        return None
    return load(path)


def _part(cell: str, index: int) -> str:
    parts = cell.split("/")
    return parts[index] if index < len(parts) else ""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _name(t: type) -> str:
    return {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number",
            bool: "a boolean"}.get(t, t.__name__)
