"""Shared by the benchmark scripts: run the harness as a user would, read results."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.results.store import iter_results  # noqa: E402


def harness(*args: str, env: dict | None = None) -> float:
    """Run `python -m harness ARGS` (with `env` added to this environment); return its wall time
    in seconds (it must succeed)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    took = time.monotonic() - start
    if proc.returncode not in (0, 1):  # 1 = a control cell drifted: still a timing
        sys.exit(f"harness {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return took


def results(folder: Path) -> list[dict]:
    return [r for _, r in iter_results(folder)]


def run_records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/.runs/*.json"))]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] (n={len(values)})"
