"""What the report says, computed from result records alone (no TensorFlow).

Every figure carries its spread: timings are the median of the steady-state
epochs (epoch 1 holds compilation) pooled over the repeats, with min and max;
a figure whose max-min exceeds SPREAD_WIDE of its median is marked. Ratios
compare cells of the same run folder, never numbers from different hosts.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.results.result import Result
from harness.results.views import Seen
from harness.stacks import release_key, short_version
from harness.stats import SPREAD_WIDE, Spread, spread_of, steady  # noqa: F401 - re-exported for the writers
from harness.status import FAILED, NOT_RUN, OK  # noqa: F401 - the vocabulary is the status module's
from harness.status.outcome import normalise

ACCURACY_TOLERANCE = 0.05  # N devices more than this below 1 device: "degraded"


# -- identity of a result -----------------------------------------------------------
def env_of(r: Result) -> str:
    return r.env_name


def workload_of(r: Result) -> str:
    return r.workload_name


def label_of(r: Result) -> str:
    return r.label


def devices_of(r: Result) -> int:
    return r.devices


def wrapper_of(r: Result) -> str:
    return r.wrapper


def not_run(r: Result) -> bool:
    return r.status in NOT_RUN


def run_of(r: Result) -> str:
    """Which run a result belongs to (its matrix file): figures are only ever
    compared within one run, never across runs that share cell ids."""
    return r.matrix


def group_id(r: Result) -> tuple[str, str]:
    """The run and the cell id without the repeat: what repeats share."""
    return run_of(r), r.cell.rsplit("/", 1)[0]


@dataclass
class Group:
    """The repeats of one (environment, workload, parallelism, batch)."""
    results: list[Result]

    @property
    def first(self) -> Result:
        return self.results[0]

    @property
    def ok(self) -> list[Result]:
        return [r for r in self.results if r.status == OK]

    @property
    def all_ok(self) -> bool:
        return len(self.ok) == len(self.results)

    @property
    def status(self) -> str:
        bad = [r.status for r in self.results if r.status != OK]
        if not bad:
            return OK
        text = bad[0]
        return text if len(bad) == len(self.results) else f"{text} {len(bad)}/{len(self.results)}"

    def epoch_seconds(self) -> Spread | None:
        return spread_of(e.get("seconds") for r in self.ok for e in steady(r.epochs))

    def samples_per_sec(self) -> Spread | None:
        return spread_of(e.get("samples_per_sec") for r in self.ok for e in steady(r.epochs))

    def metric(self, name: str) -> Spread | None:
        return spread_of(r.metric(name) for r in self.ok)


def groups(results: list[Result]) -> dict[tuple[str, str], Group]:
    out: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in results:
        out[group_id(r)].append(r)
    return {k: Group(sorted(v, key=lambda r: r.repeat or 0)) for k, v in out.items()}


# -- the stacks: what ran inside each environment ------------------------------------
SEEN_KEYS = ("python", "tensorflow", "keras", "api", "backend", "numpy")


@dataclass(frozen=True)
class Stack:
    """One environment as its cells saw it from inside. Rows are labelled and
    sorted by these versions, not by the matrix's name for them: names sort as
    text (tf1.10 before tf1.9) and say what was asked, not what ran."""
    name: str
    seen: Seen   # only SEEN_KEYS; empty (has_versions False) when no cell reported its framework
    cells: int

    @property
    def label(self) -> str:
        s = self.seen
        if not s.has_versions:
            return f"{self.name} (versions not seen)"
        parts = [f"TF {s.tensorflow}"] if s.tensorflow else []
        if s.keras:
            api = s.api or "keras"
            if api == "keras3":
                # results from before the backend was always recorded: Keras 3 without one ran on TF
                parts.append(f"Keras {s.keras} on {s.backend or 'tensorflow'}")
            else:
                # standalone Keras ("keras" in results from before the API was recorded) is plain Keras
                parts.append(f"{'Keras' if api in ('keras', 'standalone') else api} {s.keras}")
        if s.python:
            parts.append(f"Python {s.python}")
        return " · ".join(parts)

    @property
    def key(self) -> tuple:
        """PEP 440 order: TensorFlow, then Keras, then Python (1.9 < 1.10)."""
        s = self.seen
        tf = s.tensorflow or _from_name(r"tf(\d+(?:\.\d+)*)", self.name)
        keras = s.keras or _from_name(r"keras(\d+(?:\.\d+)*)", self.name)
        return (_version(tf), _version(keras), _version(s.python), s.backend or "", self.name)


def _from_name(pattern: str, name: str) -> str | None:
    m = re.search(pattern, name)
    return m.group(1) if m else None


def _version(text: str | None) -> Version:
    try:
        return Version(text) if text else Version("0")
    except InvalidVersion:
        return Version("0")


def stacks(results: list[Result]) -> dict[str, Stack]:
    """Per environment name, the versions its cells saw (the most common
    answer, should cells disagree), sorted by version. Two environments that
    saw the same versions (a CPU and a GPU build, a forced NumPy) keep apart
    through their names in `labels`."""
    seen: dict[str, Counter] = defaultdict(Counter)
    count: Counter = Counter()
    for r in results:
        env = env_of(r)
        count[env] += 1
        s = r.inside
        if s.has_versions:
            seen[env][Seen(**{k: getattr(s, k) for k in SEEN_KEYS})] += 1
    out = [Stack(env, seen[env].most_common(1)[0][0] if seen[env] else Seen(), n) for env, n in count.items()]
    return {st.name: st for st in sorted(out, key=lambda st: st.key)}


def labels(stacks_: dict[str, Stack]) -> dict[str, str]:
    """A row label per environment: its versions, with its name added where
    another environment saw the very same versions."""
    by_label = Counter(st.label for st in stacks_.values())
    return {name: st.label + (f" [{name}]" if by_label[st.label] > 1 else "") for name, st in stacks_.items()}


# -- seed 000: 1 device against N, per batch ---------------------------------------
def _baseline(candidates: list[Group]) -> Group | None:
    ones = [g for g in candidates if devices_of(g.first) == 1 and g.all_ok]
    ones.sort(key=lambda g: wrapper_of(g.first) != "none")  # the plain model first
    return ones[0] if ones else None


def seed_comparison(results: list[Result]) -> list[dict]:
    """Rows of seed 000's table: per environment, workload and batch, the
    1-device baseline next to each N-device cell, with the time ratio and the
    degraded / slower flags."""
    by_key: dict[tuple, list[Group]] = defaultdict(list)
    for g in groups(results).values():
        by_key[(run_of(g.first), env_of(g.first), workload_of(g.first), g.first.batch_size)].append(g)
    rows = []
    for (run, env, workload, batch), gs in by_key.items():
        base = _baseline(gs)
        for g in gs:
            if devices_of(g.first) < 2 or base is None:
                continue
            t1, tn = base.epoch_seconds(), g.epoch_seconds()
            v1, vn = base.metric("val_accuracy"), g.metric("val_accuracy")
            row = {
                "run": run, "environment": env, "workload": workload, "batch": batch,
                "epochs": g.first.epochs_asked,
                "parallelism": label_of(g.first), "devices": devices_of(g.first), "status": g.status,
                "cell": g.first.cell, "baseline_cell": base.first.cell,
                "acc_1": base.metric("accuracy"), "val_acc_1": v1, "seconds_1": t1,
                "acc_n": g.metric("accuracy"), "val_acc_n": vn, "seconds_n": tn,
                "time_ratio": None, "degraded": False, "slower": False,
            }
            if t1 and tn:
                row["time_ratio"] = tn.median / t1.median
                row["slower"] = tn.median > t1.hi  # beyond the 1-device spread, not jitter
            if v1 and vn:
                row["degraded"] = vn.median < v1.median - ACCURACY_TOLERANCE
            rows.append(row)
    return sorted(rows, key=lambda r: (r["environment"], r["workload"], r["batch"] or 0, r["devices"],
                                       r["parallelism"]))


# -- seeds 003/004: throughput against device count ---------------------------------
def scaling(results: list[Result]) -> list[dict]:
    """Samples/s per device count, with speedup and efficiency against the
    1-device cell of the same environment and workload at the same per-device
    batch (so "batch 128 on 1" is the base of both "128 on 2" and "256 on 2")."""
    gs = list(groups(results).values())
    base_at: dict[tuple, Group] = {}
    for g in gs:
        if devices_of(g.first) == 1 and g.all_ok:
            key = (run_of(g.first), env_of(g.first), workload_of(g.first), g.first.batch_size)
            if key not in base_at or wrapper_of(g.first) == "none":
                base_at[key] = g
    rows = []
    for g in gs:
        n = devices_of(g.first)
        batch = g.first.batch_size or 0
        run, env, workload = run_of(g.first), env_of(g.first), workload_of(g.first)
        base = base_at.get((run, env, workload, batch // n if n > 1 and batch % n == 0 else batch)) \
            or base_at.get((run, env, workload, batch))
        sps = g.samples_per_sec()
        row = {"run": run, "environment": env, "workload": workload, "wrapper": wrapper_of(g.first), "devices": n,
               "batch": batch, "policy": "fixed" if base is None or base.first.batch_size == batch
               else "x devices", "status": g.status, "cell": g.first.cell, "samples_per_sec": sps,
               "epoch_seconds": g.epoch_seconds(), "val_accuracy": g.metric("val_accuracy"),
               "speedup": None, "efficiency": None}
        base_sps = base.samples_per_sec() if base else None
        if sps and base_sps and base_sps.median > 0:
            row["speedup"] = sps.median / base_sps.median
            row["efficiency"] = row["speedup"] / n
        rows.append(row)
    return sorted(rows, key=lambda r: (r["run"], r["environment"], r["workload"], r["wrapper"], r["policy"],
                                       r["devices"], r["batch"]))


# -- failures grouped across versions ------------------------------------------------
def failure_families(results: list[Result]) -> list[dict]:
    """One family per signature string, whatever the status or stack: the
    signature is already the normalised root cause (outcome.signature), so two
    families never show the same text."""
    fams: dict[str, dict] = {}
    for r in results:
        if r.status not in FAILED:
            continue
        sig = r.signature or r.status
        fam = fams.setdefault(sig, {"signature": sig, "statuses": [], "cells": [], "environments": []})
        fam["cells"].append(r.cell)
        for key, value in (("statuses", r.status), ("environments", env_of(r))):
            if value not in fam[key]:
                fam[key].append(value)
    return sorted(fams.values(), key=lambda f: (-len(f["cells"]), f["signature"]))


def not_run_reasons(results: list[Result]) -> list[dict]:
    """Cells that never ran (`unsupported`, `unavailable`), one entry per
    reason: reasons are normalised like signatures (numbers, paths stripped),
    so "2 devices" and "3 devices" of one refusal count together (bracketed
    lists too: a list of 3 device names is not another reason). The text
    shown is a real reason, the first cell's."""
    out: dict[tuple, dict] = {}
    for r in results:
        if not not_run(r):
            continue
        reason = re.sub(r"\[[^\]]*\]", "[...]", r.reason or "")  # device lists differ by count
        key = (r.status, normalise(reason) or r.status)
        entry = out.setdefault(key, {"status": r.status, "reason": r.reason or "", "cells": [],
                                     "environments": []})
        entry["cells"].append(r.cell)
        if env_of(r) not in entry["environments"]:
            entry["environments"].append(env_of(r))
    return sorted(out.values(), key=lambda e: (-len(e["cells"]), e["status"], e["reason"]))


def drifted_controls(results: list[Result]) -> list[Result]:
    return [r for r in results if r.met is False]


# -- one run against another ----------------------------------------------------------
def compare_runs(a: list[Result], b: list[Result], noise: float = 0.10) -> dict[str, list[dict]]:
    """Regressions and fixes from run A to run B, by cell id.

    Status: ok -> a failure is a regression, the reverse a fix. Time: a change
    counts only when it leaves A's own min-max range *and* moves the median by
    more than `noise`, so epoch-to-epoch jitter is not reported."""
    ga = {cell: g for (_, cell), g in groups(a).items()}
    gb = {cell: g for (_, cell), g in groups(b).items()}
    out: dict[str, list[dict]] = {"regressions": [], "fixes": [], "slower": [], "faster": [], "only_a": [],
                                  "only_b": []}
    for key in sorted(set(ga) | set(gb)):
        if key not in gb:
            out["only_a"].append({"cell": key})
            continue
        if key not in ga:
            out["only_b"].append({"cell": key})
            continue
        x, y = ga[key], gb[key]
        entry = {"cell": key, "a": x.status, "b": y.status,
                 "a_signature": x.first.signature, "b_signature": y.first.signature}
        if x.all_ok and not y.all_ok and y.first.status in FAILED:
            out["regressions"].append(entry)
        elif not x.all_ok and x.first.status in FAILED and y.all_ok:
            out["fixes"].append(entry)
        elif x.all_ok and y.all_ok:
            ta, tb = x.epoch_seconds(), y.epoch_seconds()
            if ta and tb and ta.median > 0:
                change = tb.median / ta.median - 1
                entry.update(a_seconds=ta, b_seconds=tb, change=change)
                if tb.median > ta.hi and change > noise:
                    out["slower"].append(entry)
                elif tb.median < ta.lo and change < -noise:
                    out["faster"].append(entry)
    return out


# -- trends across releases (a matrix with a version range) ---------------------------------
def release_of(r: Result) -> tuple[str, str] | None:
    """(package, version) of the one range a result's environment came from; None otherwise."""
    chosen = r.releases
    if len(chosen) != 1:
        return None
    package, _, version = chosen[0]
    return str(package), str(version)


def trends(results: list[Result]) -> list[dict]:
    """One row per (run, workload, swept package, rest of the stack, parallelism, batch,
    release): its status and figures, and the speed-up of N devices over 1 device on the
    same release and batch. The "rest of the stack" is the environment name with the
    release taken out, so two ranges of one matrix (TF 1 and TF 2 stacks) stay apart."""
    rows = []
    for g in groups(results).values():
        first = g.first
        rel = release_of(first)
        if rel is None:
            continue
        package, version = rel
        worst = next((r for r in g.results if r.status != OK), None)
        rows.append({"run": run_of(first), "workload": workload_of(first), "package": package,
                     "stack": _without_release(env_of(first), version), "version": version,
                     "label": label_of(first), "wrapper": wrapper_of(first), "devices": devices_of(first),
                     "batch": first.batch_size or 0, "status": g.status,
                     "word": worst.status if worst else OK, "cell": (worst or first).cell,
                     "val_accuracy": g.metric("val_accuracy") if g.all_ok else None,
                     "samples_per_sec": g.samples_per_sec() if g.all_ok else None,
                     "speedup": None, "degraded": False, "as_of": _as_of(g.results),
                     "drifted": any(r.met is False for r in g.results),  # ok, but not what `expect:` says
                     "with": _companions(g.results, package)})
    one = {(r["run"], r["workload"], r["stack"], r["version"], r["batch"]): r for r in rows if r["devices"] == 1}
    for r in rows:
        base = one.get((r["run"], r["workload"], r["stack"], r["version"], r["batch"]))
        if r["devices"] > 1 and base and r["samples_per_sec"] and base["samples_per_sec"]:
            r["speedup"] = r["samples_per_sec"].median / base["samples_per_sec"].median
        if r["devices"] > 1 and base and r["val_accuracy"] and base["val_accuracy"]:
            r["degraded"] = r["val_accuracy"].median < base["val_accuracy"].median - ACCURACY_TOLERANCE
    return rows


def _without_release(env: str, version: str) -> str:
    """The environment's name with its release replaced by '*': as written in full
    (numpy2.0.0), or as TensorFlow's token shortens it (tf2.8 for 2.8.0)."""
    for token in (version, short_version(version)):
        if token in env:
            return env.replace(token, "*", 1)
    return env


COMPANIONS = (("tensorflow", "TF"), ("keras", "Keras"), ("jax", "JAX"), ("numpy", "NumPy"))


def _as_of(results: list[Result]) -> str:
    """The day the rest of the environment resolved as of (its cut-off), if it had one."""
    for r in results:
        cut = r.origin.uploaded_before
        if cut:
            return str(cut)[:10]
    return ""


def _companions(results: list[Result], package: str) -> str:
    """What the release was tested with, as the cells saw it: TF, Keras, JAX, NumPy."""
    seen = next((r.seen for r in results if r.seen), {})
    return ", ".join(f"{label} {seen[key]}" for key, label in COMPANIONS
                     if seen.get(key) and key != package.lower())


def trend_series(results: list[Result]) -> dict[tuple, list[dict]]:
    """Rows of `trends` by (run, workload, package, stack), releases in PEP 440 order;
    only where at least two releases are present (one release is no trend)."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in trends(results):
        out[(r["run"], r["workload"], r["package"], r["stack"])].append(r)
    return {k: sorted(v, key=lambda r: (release_key(r["version"]), r["devices"], r["label"], r["batch"]))
            for k, v in sorted(out.items()) if len({r["version"] for r in v}) >= 2}
