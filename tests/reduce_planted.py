"""The planted case `harness reduce` is tested on (tests/test_reduce*.py): a package with two
releases (1.0 has ``legacy_total`` and ``scale`` doubles; 2.0 dropped ``legacy_total`` and
``scale`` triples), served by a loopback index, and the scripts that break on 2.0."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import harness
from .planted_index import PlantedIndex

BODIES = {
    ("plantedlib", "1.0"): "def legacy_total(xs):\n    return sum(xs)\n\n\ndef scale(x):\n    return 2 * x\n",
    ("plantedlib", "2.0"): "def scale(x):\n    return 3 * x\n",
}
RELEASES = {"plantedlib": {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-06-01T00:00:00Z"}}

MATRIX = """\
name: reduce
environments:
  - {name: old, python: "3.11", packages: ["plantedlib==1.0"]}
  - {name: new, python: "3.11", packages: ["plantedlib==2.0"]}
workloads:
  - {name: train, script: code/train.py, path: code}
  - {name: value, script: code/value.py, path: code}
  - {name: loop, script: code/loop.py, path: code}
  - {name: same, script: code/same.py, path: code}
expect:
  - {workload: value, metric: scaled, equals: 2.0}
timeouts: {wall: 120, progress: 120}
"""

HELPERS = "\n\n".join(f'''def helper_{i}(values, factor={i + 1}):
    """Helper {i}: scales, clips and sums (the kind of code a real script carries)."""
    scaled = [v * factor for v in values]
    clipped = [min(max(v, -100.0), 100.0) for v in scaled]
    return sum(clipped) / max(len(clipped), 1)''' for i in range(11))

TRAIN = f'''"""A small training script: data, a linear model, gradient descent, logging, a report."""
import argparse
import math
import random

import plantedlib


{HELPERS}


class Config:
    def __init__(self):
        self.epochs = 3
        self.lr = 0.05
        self.samples = 64
        self.seed = 1234
        self.verbose = False


def make_data(cfg):
    rng = random.Random(cfg.seed)
    xs = [rng.uniform(-1, 1) for _ in range(cfg.samples)]
    ys = [3.0 * x + 0.5 + rng.gauss(0, 0.1) for x in xs]
    return xs, ys


def predict(w, b, x):
    return w * x + b


def loss(w, b, xs, ys):
    return sum((predict(w, b, x) - y) ** 2 for x, y in zip(xs, ys)) / len(xs)


def step(w, b, xs, ys, lr):
    gw = sum(2 * (predict(w, b, x) - y) * x for x, y in zip(xs, ys)) / len(xs)
    gb = sum(2 * (predict(w, b, x) - y) for x, y in zip(xs, ys)) / len(xs)
    return w - lr * gw, b - lr * gb


class Logger:
    def __init__(self, verbose):
        self.verbose = verbose
        self.lines = []

    def log(self, text):
        self.lines.append(text)
        if self.verbose:
            print(text)


def train(cfg, log):
    xs, ys = make_data(cfg)
    w, b = 0.0, 0.0
    for epoch in range(cfg.epochs):
        for _ in range(20):
            w, b = step(w, b, xs, ys, cfg.lr)
        log.log("epoch %d loss %.4f" % (epoch, loss(w, b, xs, ys)))
    return w, b, xs, ys


def summarise(w, b, xs, ys):
    stats = [helper_0(xs), helper_1(ys), helper_2(xs), helper_3(ys)]
    stats += [helper_4(xs), helper_5(ys), helper_6(xs), helper_7(ys), helper_8(xs), helper_9(ys), helper_10(xs)]
    total = plantedlib.legacy_total(stats)
    return {{"w": w, "b": b, "total": total, "rmse": math.sqrt(loss(w, b, xs, ys))}}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    cfg = Config()
    cfg.epochs = args.epochs
    cfg.verbose = args.verbose
    log = Logger(cfg.verbose)
    w, b, xs, ys = train(cfg, log)
    report = summarise(w, b, xs, ys)
    for key in sorted(report):
        log.log("%s = %.4f" % (key, report[key]))
    return report


if __name__ == "__main__":
    main([])
'''

VALUE = '''import plantedlib
from workloads.metrics import report


def prepare(n):
    values = []
    for i in range(n):
        values.append(i * 0.5)
    return values


def mean(values):
    return sum(values) / len(values)


data = prepare(10)
centre = mean(data)
spread = max(data) - min(data)
print("centre", centre, "spread", spread)
report("scaled", float(plantedlib.scale(1)))
report("centre", centre)
'''

LOOP = '''import plantedlib

attempts = 0
while True:
    attempts += 1
    if attempts > 3:
        break
    if attempts == 2:
        plantedlib.legacy_total([attempts, 1, 2])
print("attempts", attempts)
'''


def write_case(root: Path) -> None:
    """The matrix and its code folder under `root` (the tests' fixture and bench/reduce.py)."""
    (root / "code").mkdir()
    for name, text in (("train.py", TRAIN), ("value.py", VALUE), ("loop.py", LOOP)):
        (root / "code" / name).write_text(text)
    (root / "code" / "same.py").write_text("import plantedlib\nprint(plantedlib.scale(2))\n")
    (root / "m.yaml").write_text(MATRIX)


def planted_case(tmp_path_factory):
    """A module's fixture: the matrix, the code folder and the index, as (root, the variables a
    harness process needs); its own cache, so the planted releases stay out of the user's."""
    root = tmp_path_factory.mktemp("reduce")
    write_case(root)
    with PlantedIndex(RELEASES, bodies=BODIES) as served:
        yield root, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def reduce(root: Path, env: dict, workload: str, *extra: str):
    return harness("reduce", str(root / "m.yaml"), f"old/{workload}/", f"new/{workload}/", "--engine", "venv",
                   "--out", str(root / "out"), "--results", str(root / "results"), *extra, env=env, timeout=1500)


def record(root: Path, workload: str) -> dict:
    folder = next((root / "out").glob(f"*__{workload}__*"))
    return {**json.loads((folder / "reduce.json").read_text()), "folder": folder}


def code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]
