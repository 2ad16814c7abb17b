"""Benchmark (a): a matrix packed side by side against the same matrix with --jobs 1.

    python bench/packing.py [MATRIX] [--engine venv] [--gpus 0,1,2,3] [--packed-only]

Both runs start from empty results folders, one after the other, on the same
host, with the environments already prepared (a warm-up run builds them
first and is not timed). Printed: both wall times, the speedup, and the
packing target: packed wall <= 1.2 x max(sum over cells of devices x seconds
/ host devices, longest cell), with each cell's seconds taken from the
packed run itself (devices = GPUs for GPU cells, cores for CPU cells).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import harness, results, run_records


def bound(rs: list[dict], record: dict) -> tuple[float, float, float]:
    """(lower bound on the packed wall, device-seconds / devices, longest cell)."""
    res = record["resources"]
    gpus, cpus = len(res["gpus"]), res["cpus"]
    gpu_work = cpu_work = longest = 0.0
    for r in rs:
        seconds = (r.get("timing") or {}).get("host_seconds") or (r.get("timing") or {}).get("total_seconds")
        given = r.get("resources") or {}
        if not seconds or not given:
            continue
        longest = max(longest, seconds)
        if given.get("gpus"):
            gpu_work += len(given["gpus"]) * seconds
        else:
            cpu_work += len(given.get("cpus") or [1]) * seconds
    spread_work = max(gpu_work / gpus if gpus else 0.0, cpu_work / cpus if cpus else 0.0)
    return max(spread_work, longest), spread_work, longest


def warm_up(matrix: str, extra: list[str], folder: Path) -> None:
    """Prepare every environment (one cell of each, not timed), so both timed runs reuse them."""
    from harness.matrix import load
    first = {}
    for cell in load(matrix).cells:
        first.setdefault(cell.environment.name, cell.id)
    only = [arg for cell_id in first.values() for arg in ("--only", cell_id)]
    harness("run", matrix, *extra, "--results", str(folder), *only)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrix", nargs="?", default="matrices/faults.yaml")
    p.add_argument("--engine", default="venv")
    p.add_argument("--gpus")
    p.add_argument("--packed-only", action="store_true", help="skip the --jobs 1 run (costly on GPU hosts)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="environments need no preparing (--engine local): skip the untimed warm-up")
    p.add_argument("--keep", metavar="DIR", help="write the packed run's results here instead of a temp folder")
    a = p.parse_args()
    extra = ["--engine", a.engine] + (["--gpus", a.gpus] if a.gpus else [])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not a.no_warm_up:
            warm_up(a.matrix, extra, tmp / "warm")
        packed_dir = Path(a.keep) if a.keep else tmp / "packed"
        packed = harness("run", a.matrix, *extra, "--results", str(packed_dir))
        rs = results(packed_dir)
        record = run_records(packed_dir)[-1]
        low, work, longest = bound(rs, record)
        print(f"matrix {a.matrix}: {len(rs)} cells, engine {a.engine}, host {record['resources']['cpus']} cores "
              f"/ {len(record['resources']['gpus'])} GPUs, up to {record['jobs']} cells at once")
        print(f"packed wall            {packed:8.1f} s  (harness run, process start to exit)")
        print(f"  lower bound          {low:8.1f} s  = max(device-seconds / devices {work:.1f}, "
              f"longest cell {longest:.1f})")
        print(f"  packed / bound       {packed / low:8.2f}   (target <= 1.2)")
        if record.get("gpu_occupancy"):
            occ = record["gpu_occupancy"]
            print(f"  GPU occupancy        any GPU busy in {occ['any_busy_fraction']:.0%} of samples, "
                  f"{occ['mean_busy_gpus']} of {occ['gpus']} busy on average")
        if not a.packed_only:
            serial = harness("run", a.matrix, *extra, "--jobs", "1", "--results", str(tmp / "serial"))
            print(f"--jobs 1 wall          {serial:8.1f} s")
            print(f"  speedup packed       {serial / packed:8.2f}x (same host, same run of this script)")


if __name__ == "__main__":
    main()
