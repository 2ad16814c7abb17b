"""The evidence of one blocker, each piece from the command that makes it, each optional
(`--no-reduce`, `--no-diverge`, `--nightly`) because each costs cells:

- a setting that mends it: tf-keras behind tf.keras (`keras_api: tf_keras`, which sets
  TF_USE_LEGACY_KERAS=1) for a Keras 2 workload on a TensorFlow that made tf.keras Keras 3 --
  one cell, the target with the setting, judged against the baseline;
- the first bad night below the releases (bisect's `below`);
- for a break of a script, `reduce`'s smallest script that still breaks on the first bad
  release and still passes on the last good one, with its ISSUE.md;
- for a value or accuracy shift of a model, `diverge`'s verdict on where the two models part.
A piece that cannot be had says why, in the report, instead of being left out silently."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from packaging.version import Version
from rich.console import Console

from harness import stacks
from harness.errors import UserError
from harness.index import releases
from harness.index.nightly import nightly_of
from harness.investigate import bisect
from harness.investigate.bisect_judge import Criteria
from harness.investigate.bisect_search import GOOD, Found
from harness.terminal import shown
from harness.upgrade.frontier import ACCURACY, BREAK, SPEED, VALUE, Answer, Search, judged, run_cells, values_compared

KERAS3_TENSORFLOW = Version("2.16")  # from here tf.keras is Keras 3; tf-keras keeps Keras 2 behind it


def setting(search: Search, answer: Answer, yardstick: dict, out_matrix) -> dict | None:
    """tf-keras at the target TensorFlow, for a Keras 2 baseline that the target broke. It mends the
    break when its cells end as the baseline's did (the status: what broke); whether it also keeps
    the baseline's value is said apart, from SPREAD_RUNS runs of each side, with the spread."""
    env = search.base_cells[0].environment
    if (search.package not in ("tensorflow", "tensorflow-cpu") or env.api != "tf.keras"
            or Version(answer.blocker["first_bad"]) < KERAS3_TENSORFLOW):
        return None

    def with_setting(cells):
        out = []
        for c in cells:
            e = c.environment
            e = dataclasses.replace(e, keras_api="tf_keras", name=f"{e.name}-tf_keras",
                                    uploaded_before=_with_tf_keras(e, search.resolver))
            out.append(dataclasses.replace(c, environment=e))
        return out

    cells = with_setting(search.cells_for(answer.target))
    verdict = judged(search.m, cells, search.engine, search.results, search.console, yardstick, Criteria())
    found = {"setting": "keras_api: tf_keras (tf-keras installed, TF_USE_LEGACY_KERAS=1)",
             "package": stacks.keras_package("tf_keras"), "at": answer.target, "mends": verdict.kind == GOOD,
             "why": verdict.why, "cells": verdict.evidence.get("cells", [])}
    if found["mends"] and yardstick.get("val_accuracy"):
        ref, new = search.spread_cells(answer.current), with_setting(search.spread_cells(answer.target))
        got = run_cells(search.m, ref + new, search.engine, search.results, search.console, search.outside_rounds)
        kept = values_compared([got[c.id] for c in new if c.id in got], [got[c.id] for c in ref if c.id in got],
                               search.criteria)
        found["values"] = {"kept": kept.kind == GOOD, "why": kept.why, "cells": [c.id for c in new],
                           "baseline_cells": [c.id for c in ref]}
    return found


def _with_tf_keras(env, resolver) -> str | None:
    """The cut-off of a tf-keras environment at a TensorFlow release: tf-keras for a TensorFlow
    minor comes out days after it (2.21's twelve), so TensorFlow's own cut-off finds none; the
    first tf-keras of that minor's upload is taken too, as its users met them, and the later wins."""
    if not env.uploaded_before or not env.tensorflow:
        return env.uploaded_before
    minor = Version(env.tensorflow)
    try:
        found = resolver.expand("tf_keras", f"~={minor.major}.{minor.minor}.0", env.python, releases.Options())
    except releases.ReleasesUnavailable:
        return env.uploaded_before
    if not found.versions:
        return env.uploaded_before
    first = min(found.versions, key=Version)
    cut = releases.cutoff_of([resolver.uploaded("tf_keras", first)])
    return max(env.uploaded_before, cut) if cut else env.uploaded_before


def nightly(search: Search, found: Found, console: Console) -> dict:
    try:
        name = nightly_of(search.package, "auto")
        cells_for = bisect.ReleaseCells(search.base_cells, search.package, search.resolver, None, True,
                                        search.cells_for.margin_days, nightly=name)
        return bisect.below(found, cells_for,
                            lambda cf, nights: bisect.Rounds(search.m, cf, nights, search.engine, search.results,
                                                              console, search.criteria, None, None),
                            console, 1, None)
    except UserError as exc:
        return {"problem": str(exc)}


def reduced(search: Search, answer: Answer, out: Path, budget: float, unconfined: bool) -> dict:
    # deferred: reduce loads the runner and the reducer, and `harness upgrade`'s verb module imports this
    # one as the CLI starts
    from harness.investigate.reduce import reduce
    b = answer.blocker
    if b["kind"] != BREAK:
        return {"problem": "reduce keeps a break of a script; this change is a " + b["kind"]}
    if search.base_cells[0].workload.model != "script":
        return {"problem": "reduce shrinks a script; the workload is a model factory"}
    good = search.cells_for(b["last_good"])[0]
    bad = search.cells_for(b["first_bad"])[0]
    try:
        record = reduce(search.m, good, bad, search.engine, out, search.console, budget=budget,
                        unconfined=unconfined)
    except UserError as exc:
        search.console.print(f"[yellow]no reduced script[/]: {shown(str(exc))}", highlight=False)
        return {"problem": str(exc)}
    folder = Path(record["folder"])
    return {"folder": str(folder), "issue": str(folder / "ISSUE.md"),
            "script": str(folder / "reduced" / record["script"]),
            "lines": record["lines"], "tried": record["candidates"]["tried"], "seconds": record["seconds"],
            "good": record["good"], "bad": record["bad"]}


def diverged(search: Search, answer: Answer, out: Path) -> dict:
    # deferred: diverge loads the runner and NumPy, and `harness upgrade`'s verb module imports this one
    # as the CLI starts
    from harness.investigate.diverge import run
    b = answer.blocker
    if b["kind"] not in (VALUE, ACCURACY, SPEED):
        return {"problem": "diverge compares two models that both train; this change is a " + b["kind"]}
    if search.base_cells[0].workload.model == "script":
        return {"problem": "diverge compares models layer by layer; a script's model is its own"}
    try:
        found, folder = run(search.m, search.cells_for(b["last_good"])[0], search.cells_for(b["first_bad"])[0],
                            search.engine, out, search.console)
    except UserError as exc:
        return {"problem": str(exc)}
    return {"diverges": bool(found.get("diverges")), "first": found.get("first"), "folder": str(folder)}
