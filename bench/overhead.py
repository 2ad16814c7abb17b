"""Benchmark (b): one cell through the harness against the same workload started bare.

    python bench/overhead.py [MATRIX] [CELL_ID] [--engine venv] [--rounds 3]

The environment is prepared first (not timed). Then, alternating, `rounds`
times each: `harness run MATRIX --only CELL --rerun all --jobs 1`, and the
same `python -m workloads spec.json OUT` started bare in the same environment
(same interpreter, same staged workloads, same spec). Printed: the steady
epoch time of each (median of epochs 2..N, then median over rounds, with
min-max), their ratio (target <= 1.03), and the start-up the harness adds
per cell (host wall time minus the cell process's own time; target <= 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import harness, results, spread


def bare(python: str, workloads: Path, spec: Path, out: Path, devices: str | None) -> tuple[float, dict]:
    """The workload started by hand: its interpreter, its spec, the variables its environment
    needs (the Keras switches), the same GPUs -- and nothing of the harness."""
    out.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LD_LIBRARY_PATH")
           or k.startswith("NCCL_")}
    env.update(json.loads(spec.read_text())["environment"].get("variables") or {})
    # the workloads first, then whatever the stack was installed with (as the local engine does)
    path = os.pathsep.join(p for p in (str(workloads), os.environ.get("PYTHONPATH")) if p)
    env.update({"PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0"})
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    start = time.monotonic()
    proc = subprocess.run([python, "-m", "workloads", str(spec), str(out)], env=env, cwd=out,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the bare workload failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - start, json.loads((out / "workload.json").read_text())


def steady(epochs: list[dict]) -> float:
    return statistics.median(e["seconds"] for e in epochs[1:])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrix", nargs="?", default="matrices/smoke.yaml")
    p.add_argument("cell", nargs="?", default="tf2.15/gru-2x32/none-c1/b128/r0")
    p.add_argument("--engine", default="venv")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        common = ["run", a.matrix, "--engine", a.engine, "--jobs", "1", "--only", a.cell, "--results", str(tmp)]
        harness(*common)  # prepares the environment; not timed
        (first,) = results(tmp)
        folder = next(tmp.glob(f"*/{a.cell}"))
        python = first["seen"]["executable"]
        workloads = next(folder.parents[len(Path(a.cell).parts) - 1].glob(".workloads/*"))
        h_steady, b_steady, h_over, h_wall, b_wall = [], [], [], [], []
        for k in range(a.rounds):
            h_wall.append(harness(*common, "--rerun", "all"))
            (r,) = results(tmp)
            h_steady.append(steady(r["epochs"]))
            h_over.append(r["timing"]["harness_overhead_seconds"])
            took, w = bare(python, workloads, folder / "spec.json", tmp / f"bare-{k}",
                           (r.get("resources") or {}).get("cuda_visible_devices"))
            b_wall.append(took)
            b_steady.append(steady(w["epochs"]))
        print(f"cell {a.cell} ({a.engine}), {a.rounds} rounds, alternating")
        print(f"steady epoch, harness   {spread(h_steady)} s")
        print(f"steady epoch, bare      {spread(b_steady)} s")
        print(f"  ratio harness / bare  {statistics.median(h_steady) / statistics.median(b_steady):.3f} "
              "(target <= 1.03)")
        print(f"harness overhead / cell {spread(h_over)} s (host wall - cell process time; target <= 2 s)")
        print(f"whole command: harness {spread(h_wall)} s, bare {spread(b_wall)} s "
              "(the harness's own start-up -- imports, matrix, store -- is paid once per run)")


if __name__ == "__main__":
    main()
