"""The history as release series, and the changes found along them.

A series is one cell of the matrix with its release axis left open: the same stack (its
environment's specification with the axis package's release left open, ``release_cells.open_stack``:
never its name, which one series may spell several ways), workload, parallelism and batch size,
on one host; the points are the releases, oldest first (PEP 440), and a point's samples are
the cell's repeats. Metric series are split by launch too (warm and fresh timings are never
mixed), and never join two hosts. Only each cell's newest result counts (a cell re-run for new
code answers the new question), and only the cells the matrix expands to now.

The statistics are ``changes``'s and the entries ``changelog``'s; this module only feeds them and
names what they find.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from harness import status
from harness.claims import Change
from harness.stacks import release_key, short_version
from harness.watch import changelog
from harness.watch import changes as ch

TIME_WORDS = ("seconds", "_s", "time", "latency")
RATE_WORDS = ("per_sec", "_per_s", "throughput", "samples_s")


@dataclass(frozen=True)
class Key:
    """A series' identity is its structure (package, open stack, cell, host); `stack` is its name
    for people, taken from the first entry seen, so that a change's id (which the label is part
    of) stays the same from one watch to the next."""
    package: str
    spec: str       # release_cells.open_stack: the environment with the axis release left open
    rest: str       # workload/parallelism/batch
    host: str
    stack: str = field(default="", compare=False)   # the name with the release blanked ('py3.11-planted*')

    @property
    def label(self) -> str:
        return f"{self.stack}/{self.rest}"


def blank(env_name: str, version: str) -> str:
    """The environment's name with `version` (its rightmost occurrence: ranges' tags come last)
    replaced by '*'; a name that spells the release short (``tf2.11`` for 2.11.0) too."""
    for form in dict.fromkeys((version, short_version(version))):
        head, sep, tail = env_name.rpartition(form)
        if sep:
            return f"{head}*{tail}"
    return f"{env_name}@*"


def newest_per_cell(entries: list[dict], cells: set[str] | None = None) -> list[dict]:
    latest: dict[str, dict] = {}
    for e in entries:
        if isinstance(e.get("cell"), str) and (cells is None or e["cell"] in cells):
            latest[e["cell"]] = e
    return list(latest.values())


def keyed(entries: list[dict]):
    """(Key, version, entry) for every entry and every range of its environment.

    An entry written before histories recorded their stacks (no ``stacks``) joins the series
    its name points to: the one recorded stack of the same package and blanked name, where there
    is exactly one; else a series of its own, as it always was."""
    rows = []
    for e in entries:
        parts = e["cell"].split("/")
        rest = "/".join(parts[1:-1]) if len(parts) > 2 else ""
        stacks = e.get("stacks") if isinstance(e.get("stacks"), dict) else {}
        for package, _spec, version in e.get("releases") or []:
            rows.append((package, blank(e.get("environment") or parts[0], version), stacks.get(package), rest,
                         version, e))
    recorded: dict[tuple[str, str], set[str]] = defaultdict(set)
    for package, label, spec, *_ in rows:
        if isinstance(spec, str):
            recorded[(package, label)].add(spec)
    for package, label, spec, rest, version, e in rows:
        if not isinstance(spec, str):
            known = recorded.get((package, label), set())
            spec = next(iter(known)) if len(known) == 1 else f"name:{label}"
        yield Key(package, spec, rest, e.get("host") or "?", label), version, e


def outcomes(entries: list[dict]) -> dict[Key, list[ch.Outcome]]:
    by: dict[Key, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for key, version, e in keyed(entries):
        if e.get("status") not in status.NOT_RUN:   # could not be had or run here: no finding about the code
            by[key][version].append(e)
    out = {}
    for key, points in by.items():
        series = []
        for version in sorted(points, key=release_key):
            es = sorted(points[version], key=lambda x: x.get("repeat") or 0)
            bad = [x.get("family") for x in es if x.get("status") != status.OK and x.get("family")]
            series.append(ch.Outcome(label=version, statuses=tuple(x["status"] for x in es),
                                     family=Counter(bad).most_common(1)[0][0] if bad else None))
        out[key] = series
    return out


def metric_series(entries: list[dict]) -> dict[tuple[Key, str, str], list[ch.Point]]:
    """(key, launch, metric) -> points: the ok repeats' values of each metric per release."""
    by: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, version, e in keyed(entries):
        if e.get("status") != status.OK:
            continue
        values = dict(e.get("metrics") or {})
        speed = (e.get("timing") or {}).get("steady_samples_per_sec")
        if isinstance(speed, dict) and isinstance(speed.get("median"), (int, float)):
            values["steady_samples_per_sec"] = speed["median"]
        for metric, value in values.items():
            if tracked(metric) and isinstance(value, (int, float)):
                by[(key, e.get("launch") or "fresh", metric)][version].append(float(value))
    return {k: [ch.Point(label=v, samples=tuple(pts[v])) for v in sorted(pts, key=release_key)]
            for k, pts in by.items()}


def kind_of(metric: str) -> str | None:
    name = metric.lower()
    if any(w in name for w in RATE_WORDS):
        return "rate"
    if any(name.endswith(w) or w in name for w in TIME_WORDS):
        return "time"
    if "acc" in name:
        return "accuracy"
    return None


def tracked(metric: str) -> bool:
    """Speed and accuracy are followed along releases; other numbers through `expect:` only."""
    return kind_of(metric) is not None


def find(matrix: str, entries: list[dict], date: str, *, seed: int = 0) -> list[Change]:
    """Every change the history shows now; ids are stable (``changelog.change_id``), so a change
    found again by a later watch is the same entry."""
    found: dict[str, Change] = {}
    for key, points in sorted(outcomes(entries).items(), key=lambda kv: repr(kv[0])):
        drifted = {o.label for o in points if o.statuses and all(s == status.DRIFTED for s in o.statuses)}
        for sc in ch.status_changes(points):
            c = changelog.from_status(matrix, key.label, key.package, sc, date)
            if sc.kind == "broke" and sc.after in drifted:   # runs, but misses a value its matrix expects
                c.kind, c.id = "expectation", changelog.change_id(matrix, key.label, "expectation", sc.after)
                c.detail = "gives another value than the matrix expects"
                c.where["summary"] = changelog.describe(c)
            found.setdefault(c.id, c)
    for (key, launch, metric), points in sorted(metric_series(entries).items(), key=lambda kv: repr(kv[0])):
        if len(points) < 2:
            continue
        what = kind_of(metric)
        cell = f"{key.label} [{metric}, {launch}]"
        for sh in ch.find_shifts(points, seed=seed):
            c = changelog.from_shift(matrix, cell, key.package, sh, date,
                                     metric="speed" if what != "accuracy" else metric, higher_is_better=what != "time")
            found.setdefault(c.id, c)
    return list(found.values())
