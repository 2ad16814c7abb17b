"""Which releases of a package the index serves, for which Python, uploaded when.

A version range in a matrix (``tensorflow: ">=2.10,<2.17"``) becomes one
environment per release. The list comes from the index the user's own pip
uses -- its ``index-url``, ``cert`` and ``proxy`` as ``pip config`` and the
``PIP_*`` variables say -- through the JSON simple API (PEP 691), which also
carries when each file was uploaded (PEP 700) and which Python it needs
(asking it: ``simpleapi.py``; what the answers mean for a range: here).
Each answer is cached with the time it was fetched under the harness cache,
so a matrix expands without the network once it has expanded with it, and
what a run expanded to is written beside its results (``.releases.json``)
so that re-running the same matrix runs the same cells.

An old release is tested with its contemporaries: the rest of its
environment resolves as of the release's upload time (``cutoff``). pip
>= 26.0 applies that itself (``--uploaded-prior-to``); older pips -- the
ones Python <= 3.8 needs -- get the same cut-off from an index the harness
serves on the loopback interface, which lists only files uploaded before it
(``cutoff.CutoffIndex``).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging import tags as ptags
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.files.paths import cache_dir, inside, read_json, write_json
from harness.index.pipsettings import DEFAULT_INDEX, PipSettings, pip_settings  # noqa: F401 - re-exported
from harness.index.simpleapi import File, ReleasesUnavailable, fetch, utc_text  # noqa: F401 - utc_text re-exported
from harness.stacks import keras_package

FRESH_SECONDS = 24 * 3600       # a cached list younger than this is used without asking the index
RECORD = ".releases.json"       # beside a run's results: what its ranges expanded to
EVERY = ("patch", "minor")      # every release, or the newest patch of each minor
CUTOFF_MARGIN_DAYS = 1          # companions released with it (keras with TF) fall inside
SPEC_START = re.compile(r"\s*(==|!=|<=|>=|<|>|~=|===)")
NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")  # a project name (PEP 508), bounded


def is_range(text: object) -> bool:
    """A version field that is a range (starts with an operator), not one version."""
    return isinstance(text, str) and bool(SPEC_START.match(text))


def parse_range(text: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def range_text(spec: str | SpecifierSet) -> str:
    """A range as the harness writes it -- its clauses sorted, joined by commas
    ('<2.1,>=1.26') -- in cache keys, records and results: the harness's own form, so a
    new `packaging` that prints ranges another way changes no key and no record."""
    clauses = spec if isinstance(spec, SpecifierSet) else SpecifierSet(spec)
    return ",".join(sorted(f"{c.operator}{c.version}" for c in clauses))


# -- one project's files, cached ----------------------------------------------------------
@dataclass
class Project:
    name: str
    index: str
    fetched: float
    files: list[File]
    cached: bool = False      # read from the cache, not the index
    stale: str = ""           # why a cached copy older than FRESH_SECONDS was used
    _by_version: dict | None = field(default=None, repr=False, compare=False)
    _fit: dict = field(default_factory=dict, repr=False, compare=False)

    def why_not(self, version: Version, python: str) -> str | None:
        """None if a file of this release fits `python` here, else why not (asked once each)."""
        if (version, python) not in self._fit:
            self._fit[(version, python)] = installable(self.releases()[version], python)
        return self._fit[(version, python)]

    def releases(self) -> dict[Version, list[File]]:
        if self._by_version is None:  # parsed once: a big project has thousands of files
            out: dict[Version, list[File]] = {}
            for f in self.files:
                v = f.version
                if v is not None:
                    out.setdefault(v, []).append(f)
            self._by_version = out
        return self._by_version

    def as_of(self, moment: str) -> Project:
        """The project as the index listed it at `moment` (UTC, ``utc_text``): only files uploaded
        before it. A file without an upload time is left out, as pip's ``--uploaded-prior-to`` does."""
        files = [f for f in self.files if f.uploaded and f.uploaded < moment]
        return Project(self.name, self.index, self.fetched, files, cached=self.cached, stale=self.stale)

    def uploaded(self, version: str) -> str | None:
        """When a release was uploaded: its last file's time (the release is whole from then)."""
        times = [f.uploaded for f in self.releases().get(Version(version), []) if f.uploaded]
        return max(times) if times else None


def _cache_root() -> Path:
    return cache_dir() / "releases"


def _cache_path(settings: PipSettings, name: str) -> Path:
    return inside(_cache_root(), _cache_root() / settings.key / f"{name}.json")


_read: dict[tuple, Project] = {}  # what this process already read: a matrix asks for one project many times


def project(name: str, *, refresh: bool = False, offline: bool = False, covers: str | None = None) -> Project:
    """A project's files from the cache when fresh, else from the index (and cached);
    a cached copy of any age when the index cannot be reached or `offline` is set.

    `covers` is a moment (``utc_text``) the list must be whole up to, as a cut-off needs:
    a copy fetched before that moment lacks what was uploaded after its fetch, however
    young it is, so it is fetched again."""
    memo = (_cache_root(), pip_settings().index, str(name).lower(), refresh, offline, covers)
    if memo not in _read:
        _read[memo] = _project(name, refresh=refresh, offline=offline, covers=covers)
    return _read[memo]


def _project(name: str, *, refresh: bool = False, offline: bool = False, covers: str | None = None) -> Project:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ReleasesUnavailable(f"{name!r} is not a package name (letters, digits, '.', '_', '-')")
    settings = pip_settings()
    name = canonicalize_name(name)
    path = _cache_path(settings, name)
    cached = read_json(path)
    if not isinstance(cached, dict) or not isinstance(cached.get("files"), list):
        cached = None
    age = time.time() - float(cached.get("fetched", 0)) if cached else None

    def from_cache(why: str = "") -> Project:
        files = [File(**{k: v for k, v in f.items() if k in File.__dataclass_fields__})
                 for f in cached["files"] if isinstance(f, dict) and "filename" in f and "url" in f]
        return Project(name, settings.index, float(cached["fetched"]), files, cached=True, stale=why)

    must_cover = dt.datetime.fromisoformat(covers[:19] + "+00:00").timestamp() if covers else None
    if cached and must_cover and float(cached.get("fetched", 0)) < must_cover:
        refresh = True  # fetched before the moment it must cover: what came after its fetch is missing
    if cached and (offline or (not refresh and age is not None and age < FRESH_SECONDS)):
        return from_cache(f"offline; cached {_age(age)} ago" if offline and age >= FRESH_SECONDS else "")
    if offline:
        raise ReleasesUnavailable(f"offline, and no list of {name}'s releases is cached "
                                  f"(run once with the network to fill {path.parent})")
    try:
        files = fetch(settings, name)
    except ReleasesUnavailable as exc:
        if cached:
            return from_cache(f"{exc}; used the copy cached {_age(age)} ago")
        raise ReleasesUnavailable(f"{exc}, and no list of {name}'s releases is cached") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fetched = time.time()
    write_json(path, {"project": name, "index": settings.index, "fetched": fetched,
                      "files": [asdict(f) for f in files]})
    return Project(name, settings.index, fetched, files)


def _age(seconds: float | None) -> str:
    seconds = seconds or 0
    return f"{seconds / 86400:.1f} days" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


# -- which files fit a Python ------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def _tags(python: str) -> frozenset:
    major, minor = (int(p) for p in python.split(".")[:2])
    platforms = list(ptags.platform_tags())  # this host's: cells run here (or in a Linux container like it)
    found = set(ptags.cpython_tags((major, minor), platforms=platforms))
    found |= set(ptags.compatible_tags((major, minor), platforms=platforms))
    return frozenset(found)


def why_not(f: File, python: str, tags: frozenset | None = None) -> str | None:
    """None if pip could take this file for `python` on this platform, else why not."""
    if f.yanked:
        return "yanked"
    if f.requires_python:
        try:
            if not SpecifierSet(f.requires_python).contains(python, prereleases=True):
                return f"requires Python {f.requires_python}"
        except InvalidSpecifier:
            pass
    if f.filename.endswith(".whl"):
        try:
            file_tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            return "not a valid wheel name"
        if not file_tags & (tags if tags is not None else _tags(python)):
            return f"no wheel for Python {python} on this platform"
    return None


def installable(files: list[File], python: str) -> str | None:
    """None if some file of a release fits `python`, else the reason (from its best file)."""
    tags = _tags(python)
    reasons = [why_not(f, python, tags) for f in files]
    if any(r is None for r in reasons):
        return None
    for preferred in ("requires Python", "no wheel"):
        hit = next((r for r in reasons if r and r.startswith(preferred)), None)
        if hit:
            return hit
    return reasons[0] if reasons else "no files"


# -- a range, expanded -----------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """The matrix's `releases:` section."""
    pre: bool = False           # pre-releases too
    every: str = "patch"        # "patch": every release; "minor": the newest patch of each minor
    cutoff: bool = True         # resolve the rest as of each release's upload time
    margin_days: float = CUTOFF_MARGIN_DAYS


@dataclass
class Expansion:
    package: str
    spec: str
    python: str
    versions: list[str]                                     # chosen, oldest first
    uploaded: dict[str, str | None] = field(default_factory=dict)   # version -> upload time
    unfit: dict[str, str] = field(default_factory=dict)     # chosen, but no file fits this Python here: why
    skipped: dict[str, str] = field(default_factory=dict)   # left out (yanked): why
    index: str = ""
    fetched: float = 0.0
    note: str = ""                                          # e.g. read offline from the cache

    def as_dict(self) -> dict:
        return asdict(self)


def key(package: str, spec: str, python: str, options: Options) -> str:
    return json.dumps([canonicalize_name(package), range_text(spec), python, options.pre, options.every])


def candidates(versions, spec: str, pre: bool = False, every: str = "patch") -> list[Version]:
    """The versions within `spec`, oldest first (PEP 440 order); `minor`: the newest of each minor."""
    chosen = sorted(SpecifierSet(spec).filter(versions, prereleases=pre))
    if every == "minor":
        newest: dict[tuple, Version] = {}
        for v in chosen:
            newest[v.release[:2]] = v
        chosen = sorted(newest.values())
    return chosen


def expand(package: str, spec: str, python: str, options: Options = Options(), *, refresh: bool = False,
           offline: bool = False, as_of: str | None = None) -> Expansion:
    """The releases of `package` in `spec`, oldest first. A release without a file for this
    Python and platform is kept -- its cells become `unavailable` with pip's own reason, which
    is a finding for a compatibility table -- and noted in `unfit`; a yanked one is left out.
    `minor` keeps the newest release of each minor that fits, else its newest. `as_of` (UTC):
    the releases the index had then (``harness watch --as-of`` replays a date)."""
    proj = project(package, refresh=refresh, offline=offline)
    if as_of:
        proj = proj.as_of(as_of)
    releases = proj.releases()
    fit, unfit, skipped = [], {}, {}
    for v in candidates(releases, spec, options.pre):
        why = proj.why_not(v, python)
        if why == "yanked":
            skipped[str(v)] = why
        elif why:
            unfit[v] = why
        else:
            fit.append(v)
    chosen = sorted([*fit, *unfit])
    if options.every == "minor":
        newest: dict[tuple, Version] = {}
        for v in chosen:  # oldest first: a newer release replaces one that does not fit, or when it fits
            current = newest.get(v.release[:2])
            if current is None or v in fit or current not in fit:
                newest[v.release[:2]] = v
        chosen = sorted(newest.values())
    return Expansion(package=proj.name, spec=range_text(spec), python=python,
                     versions=[str(v) for v in chosen], uploaded={str(v): proj.uploaded(str(v)) for v in chosen},
                     unfit={str(v): why for v, why in unfit.items() if v in chosen}, skipped=skipped,
                     index=proj.index, fetched=proj.fetched, note=proj.stale)


def uploaded(package: str, version: str, *, offline: bool = False) -> str | None:
    """When one release was uploaded (None if the index cannot say)."""
    try:
        return project(package, offline=offline).uploaded(version)
    except (ReleasesUnavailable, InvalidVersion):
        return None


def exact_pins(env) -> list[tuple[str, str]]:
    """(package, version) for every release an environment pins exactly: its cut-off
    must admit them all, so it is taken from the newest of them."""
    pins = []
    if env.tensorflow:  # as the package named installs it (tf-nightly's builds are its own)
        pins.append((env.tensorflow_package or "tensorflow", env.tensorflow))
    if env.keras:
        pins.append((keras_package(env.api) or "keras", env.keras))
    for text in env.packages:
        req = Requirement(text)
        exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
        if len(exact) == 1:
            pins.append((req.name, exact[0]))
    return pins


def cutoff_of(times: list[str | None], margin_days: float = CUTOFF_MARGIN_DAYS) -> str | None:
    """The cut-off for an environment: its newest pinned release's upload time plus a margin."""
    known = [t for t in times if t]
    if not known:
        return None
    newest = dt.datetime.fromisoformat(max(known).replace("Z", "+00:00"))
    return (newest + dt.timedelta(days=margin_days)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Resolver:
    """Expands ranges for one matrix: a run's recorded expansion first (the same
    matrix re-runs the same cells), then the cache / index. Collects what it
    expanded, for `record`."""

    def __init__(self, results_root: Path | None = None, *, refresh: bool = False, offline: bool = False):
        self.results_root = Path(results_root) if results_root else None
        self.refresh, self.offline = refresh, offline
        self.recorded: dict[str, dict] = {}
        self.used: dict[str, dict] = {}
        self.times: dict[str, str | None] = {}

    def bind(self, run_name: str) -> None:
        """Read what an earlier run of this matrix expanded to (unless refreshing)."""
        if self.results_root and not self.refresh:
            data = read_json(self.results_root / run_name / RECORD)
            if isinstance(data, dict) and isinstance(data.get("expansions"), dict):
                self.recorded = {k: v for k, v in data["expansions"].items() if isinstance(v, dict)}
            if isinstance(data, dict) and isinstance(data.get("uploaded"), dict):
                self.times.update(data["uploaded"])

    def expand(self, package: str, spec: str, python: str, options: Options) -> Expansion:
        k = key(package, spec, python, options)
        old = self.recorded.get(k)
        if old and isinstance(old.get("versions"), list):
            fields_ = Expansion.__dataclass_fields__
            found = Expansion(**{f: old[f] for f in fields_ if f in old})
            found.note = "as recorded by an earlier run of this matrix (--refresh-releases asks the index again)"
        else:
            found = expand(package, spec, python, options, refresh=self.refresh, offline=self.offline)
        self.used[k] = found.as_dict()
        for v in found.versions:
            self.times[f"{found.package}=={v}"] = found.uploaded.get(v)
        return found

    def uploaded(self, package: str, version: str) -> str | None:
        k = f"{canonicalize_name(package)}=={version}"
        if k not in self.times:
            self.times[k] = uploaded(package, version, offline=self.offline)
        return self.times[k]

    def record(self, run_dir: Path) -> Path | None:
        """Write what this matrix expanded to beside its results."""
        if not self.used:
            return None
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / RECORD
        write_json(path, {"expansions": self.used, "uploaded": self.times,
                          "recorded": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
        return path


SHOWN = 6  # releases named one by one on a line; more are summarised (first ... last, count)


def _span(versions: list[str]) -> str:
    if len(versions) <= SHOWN:
        return ", ".join(versions)
    return f"{versions[0]} ... {versions[-1]}"


def describe(resolver: Resolver, verbose: bool = False) -> list[str]:
    """What each expanded range became, from where, and what was left out (and why).

    A range may expand to a hundred releases (``tensorflow: ">=0"``): a line per finding then,
    each short -- the releases as first ... last with their count, and one line per reason
    some were left out or have no file for the Python, with its count and span. `verbose`
    names every release (so does the run's RECORD file, beside its results)."""
    lines = []
    for exp in resolver.used.values():
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(exp.get("fetched") or 0))
        versions = exp.get("versions") or []
        shown = ", ".join(versions) if verbose else _span(versions)
        text = (f"{exp['package']} {exp['spec']} for Python {exp['python']}: {len(versions)} release(s) "
                f"{shown} (from {exp.get('index')}, listed {when})")
        more = []
        for what, label in (("unfit", f"no file for Python {exp['python']} here (their cells will be "
                                         "unavailable with pip's reason)"), ("skipped", "left out")):
            reasons: dict[str, list[str]] = {}
            for v, why in (exp.get(what) or {}).items():
                reasons.setdefault(why, []).append(v)
            for why, vs in reasons.items():
                more.append(f"{label}: {len(vs)} release(s) {', '.join(vs) if verbose else _span(vs)} ({why})")
        if exp.get("note"):
            more.append(exp["note"])
        if verbose:
            lines.append("; ".join([text, *more]))
        else:
            lines += [text, *(f"  {line}" for line in more)]
    if not verbose and any(len(exp.get("versions") or []) > SHOWN or
                           any(len(exp.get(w) or {}) > SHOWN for w in ("unfit", "skipped"))
                           for exp in resolver.used.values()):
        lines.append(f"  (every release: `list --verbose`; a run also records them in its {RECORD})")
    return lines
