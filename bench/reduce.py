"""Benchmark: `harness reduce` on the planted 150-line script, warm against fresh.

    python bench/reduce.py [--rounds 1]

The planted case of the test suite (tests/reduce_planted.py: a package whose 2.0 dropped an API,
served by a loopback index; a 150-line training script with one line that breaks on 2.0). Its two
virtualenvs are built first (not timed). Then, alternating, `rounds` times each, in one
invocation: the reduction with candidates forked from warm launchers (the default) and with every
candidate in a new interpreter (`--fresh`). Printed per mode: candidates tried, candidates per
second (median [min-max]), the whole reduction's seconds, and the reduced script's lines; and the
ratio fresh / warm of the whole time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, spread

from tests.planted_index import PlantedIndex  # noqa: E402 - after _common put the project on the path
from tests.reduce_planted import BODIES, RELEASES, TRAIN, write_case  # noqa: E402


def reduce(root: Path, env: dict, out: Path, *extra: str) -> tuple[float, dict]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", "reduce", str(root / "m.yaml"), "old/train/", "new/train/",
                           "--engine", "venv", "--out", str(out), "--results", str(root / "results"), *extra],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env})
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"reduce exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    record = json.loads(next(out.glob("new__train__*/reduce.json")).read_text())
    shutil.rmtree(out)
    return took, record


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reduce-") as tmp, PlantedIndex(RELEASES, bodies=BODIES) as served:
        root = Path(tmp)
        write_case(root)
        env = {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}
        subprocess.run([sys.executable, "-m", "harness", "build", str(root / "m.yaml"), "--engine", "venv"],
                       cwd=ROOT, capture_output=True, env={**os.environ, **env}, check=True)
        got: dict[str, list[tuple[float, dict]]] = {"warm": [], "fresh": []}
        for _ in range(args.rounds):
            got["warm"].append(reduce(root, env, root / "out-warm"))
            got["fresh"].append(reduce(root, env, root / "out-fresh", "--fresh"))
    print(f"the planted 150-line script ({len(TRAIN.splitlines())} lines), {args.rounds} round(s), "
          f"{os.cpu_count()} cores")
    for mode, runs in got.items():
        rates = [r["candidates"]["tried"] / max(r["candidate_seconds"], 1e-9) for _, r in runs]
        print(f"{mode:>5}: {runs[0][1]['candidates']['tried']} candidates, {spread(rates)} candidates/s; "
              f"whole reduction {spread([t for t, _ in runs])} s; reduced to {runs[0][1]['lines']['reduced']} lines; "
              f"{runs[0][1]['candidates']['forked_cell_runs']} of {runs[0][1]['candidates']['cell_runs']} cell runs "
              "forked")
    ratio = statistics.median(t for t, _ in got["fresh"]) / statistics.median(t for t, _ in got["warm"])
    print(f"whole reduction, fresh / warm: {ratio:.2f}")


if __name__ == "__main__":
    main()
