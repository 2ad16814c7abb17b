"""Benchmark: the fixed cost of a cell, fresh against warm, in one invocation.

    python bench/warm.py [MATRIX] [--engine venv|local|docker] [--only GLOB ...] [--jobs N] [--gpus IDS]
                         [--python X.Y=PATH ...]

Environments are prepared first (`harness build`, not timed). Then the matrix
runs three times into temporary results folders, one after the other:

1. `--fresh`: every cell in a new interpreter, no caches (today's behaviour);
2. warm, first pass: forked from a warm launcher, with whatever the compile
   and data caches already hold;
3. warm, second pass: the same again, caches now certainly warm.

Printed per cell: its wall (the cell process's life, on the host's clock)
and its fixed cost (wall minus steady epoch seconds x epochs) in each run,
the fresh / warm ratio of the walls, the first epoch (where compilation
lands) of each, how it launched and whether compilation hit a cache; then
each run's wall against the steady-work bound (sum over cells of steady
epoch seconds x epochs x devices, divided by the GPUs -- or, without GPUs,
by the cells the run let side by side), and whether fresh and warm cells
agree (status, accuracy). Ratios are taken within this one invocation.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import yaml
from _common import harness, results, run_records


def fixed_cost(r: dict) -> float | None:
    t = r.get("timing") or {}
    if t.get("total_seconds") is None or t.get("steady_epoch_seconds") is None:
        return None
    return t["total_seconds"] - t["steady_epoch_seconds"] * r["epochs_asked"]


def bound(rs: list[dict], divisor: int) -> float:
    work = sum((r["timing"].get("steady_epoch_seconds") or 0) * r["epochs_asked"] * r["parallelism"]["devices"]
               for r in rs if r["status"] == "ok")
    return work / max(1, divisor)


def divisor(record: dict) -> tuple[int, str]:
    gpus = len(((record.get("resources") or {}).get("gpus")) or [])
    return (gpus, "GPUs") if gpus else (record.get("jobs") or 1, "cells side by side")


def fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrix", nargs="?", default="matrices/smoke.yaml")
    p.add_argument("--engine", default="venv")
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--jobs")
    p.add_argument("--gpus")
    p.add_argument("--python", action="append", default=[])
    p.add_argument("--repeats", type=int,
                   help="run each cell this many times (the matrix's `repeats:` replaced): cells of one "
                        "environment share a warm launcher, as in a real matrix")
    a = p.parse_args()
    common = ["--engine", a.engine]
    for item in a.python:
        common += ["--python", item]
    select = [x for g in a.only for x in ("--only", g)]
    extra = (["--jobs", a.jobs] if a.jobs else []) + (["--gpus", a.gpus] if a.gpus else [])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if a.repeats:
            data = yaml.safe_load(Path(a.matrix).read_text())
            data["repeats"] = a.repeats
            copy = Path(a.matrix).with_name(f".bench-{Path(a.matrix).stem}-r{a.repeats}.yaml")
            copy.write_text(yaml.safe_dump(data, sort_keys=False))
            a.matrix = str(copy)
        try:
            run_all(a, tmp, common, select, extra)
        finally:
            if a.repeats:
                Path(a.matrix).unlink(missing_ok=True)


def run_all(a, tmp: Path, common: list[str], select: list[str], extra: list[str]) -> None:
    harness("build", a.matrix, *common, *select, "--results", str(tmp / "build"))
    runs = {}
    for label, flags in (("fresh", ["--fresh"]), ("warm-1", []), ("warm-2", [])):
        wall = harness("run", a.matrix, *common, *select, *extra, *flags, "--results", str(tmp / label))
        record = run_records(tmp / label)[-1]
        runs[label] = (wall, {r["cell"]: r for r in results(tmp / label)}, record)
    fresh, warm1, warm = runs["fresh"][1], runs["warm-1"][1], runs["warm-2"][1]
    print(f"{a.matrix} ({a.engine}): cell wall and fixed cost (wall - steady epoch x epochs), seconds")
    print("| cell | status | fresh wall | warm wall | fresh/warm | fixed fresh | fixed warm-1 | fixed warm | "
          "epoch 1 fresh | epoch 1 warm | launch | compile cache | same accuracy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, fixed_f, fixed_w = [], [], []
    for cell in sorted(fresh):
        f, w, w1 = fresh[cell], warm.get(cell), warm1.get(cell)
        if w is None:
            continue
        tf, tw = f["timing"].get("total_seconds"), w["timing"].get("total_seconds")
        ratio = tf / tw if tf and tw else None
        if ratio and f["status"] == "ok":
            ratios.append(ratio)
        ff, fw = fixed_cost(f), fixed_cost(w)
        if ff is not None and fw is not None:
            fixed_f.append(ff)
            fixed_w.append(fw)
        warmth = (w.get("warmth") or {})
        cache = (warmth.get("compile_cache") or {}).get("hit", "none offered")
        same = f["metrics"].get("val_accuracy") == w["metrics"].get("val_accuracy")
        status = f["status"] if f["status"] == w["status"] else f"{f['status']} / {w['status']} (DIFFERS)"
        launch = (w.get("warmth") or {}).get("launch", "not launched")
        first_f, first_w = f["timing"].get("first_epoch_seconds"), w["timing"].get("first_epoch_seconds")
        print(f"| {cell} | {status} | {fmt(tf)} | {fmt(tw)} | {fmt(ratio)} | {fmt(ff)} | "
              f"{fmt(fixed_cost(w1) if w1 else None)} | {fmt(fw)} | {fmt(first_f)} | {fmt(first_w)} | {launch} "
              f"| {cache} | {'bitwise' if same else 'no'} |")
    if ratios:
        print(f"\nfresh / warm cell wall: median {statistics.median(ratios):.2f}x "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] over {len(ratios)} ok cells")
    if fixed_f:
        print(f"fixed cost per cell: fresh median {statistics.median(fixed_f):.2f} s, "
              f"warm median {statistics.median(fixed_w):.2f} s [{min(fixed_w):.2f}-{max(fixed_w):.2f}]")
    for label, (wall, rs, record) in runs.items():
        n, what = divisor(record)
        b = bound(list(rs.values()), n)
        ratio = f"{record['wall_seconds'] / b:.2f}x the bound" if b else "no steady work"
        print(f"run {label:>6}: command {wall:.1f} s, cells' run {record['wall_seconds']:.1f} s; steady-work bound "
              f"{b:.1f} s ({n} {what}): {ratio}")


if __name__ == "__main__":
    main()
