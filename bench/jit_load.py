"""What a `.keras` archive written on JAX costs to load on Keras 3 over PyTorch.

JAX resolves `jit_compile="auto"` to True, and the archive's compile configuration keeps it; Keras 3
over PyTorch then compiles the loaded model with `torch.compile` at its first predict (from Keras
3.9 with torch 2.6 on Python 3.13 here: Keras 3.7-3.8 come with torch 2.5.1, whose compile refuses
Python 3.13). This times that first predict, each in a process of its own, three ways:

- `cold`: `load_model(path)`, TorchInductor's cache empty;
- `warm`: the same, its cache as the cold run left it (the harness keeps it between cells);
- `compile=False`: `load_model(path, compile=False)`, which compiles nothing.

    python bench/jit_load.py --python VENV/bin/python --model JAX_WRITER/artifacts/gru/model.keras \\
        --inputs JAX_WRITER/artifacts/gru.inputs.npy --repeats 3

`--python` is a Keras 3 on PyTorch interpreter (a venv the harness built for a `keras3.*-torch`
stack), `--model` a writer cell's archive from a portability run on a `keras3.*-jax` stack. Prints
median [min-max] per way and the ratios to `compile=False`, all from this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile

CHILD = """
import json, sys, time
path, inputs, way = sys.argv[1:4]
import numpy as np, keras, torch
model = keras.saving.load_model(path, **({"compile": False} if way == "compile=False" else {}))
x = np.load(inputs)
started = time.perf_counter()
model.predict(x, verbose=0)
print(json.dumps({"seconds": time.perf_counter() - started, "keras": keras.__version__,
                  "torch": torch.__version__, "jit_compile": bool(getattr(model, "jit_compile", False))}))
"""


def first_predict(python: str, model: str, inputs: str, way: str, inductor: str) -> dict:
    env = {**os.environ, "KERAS_BACKEND": "torch", "TORCHINDUCTOR_CACHE_DIR": inductor,
           "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}
    done = subprocess.run([python, "-c", CHILD, model, inputs, way], env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{way}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    took: dict[str, list[float]] = {"cold": [], "warm": [], "compile=False": []}
    seen = {}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="inductor-") as inductor:
            for name, way in (("cold", "default"), ("warm", "default"), ("compile=False", "compile=False")):
                seen = first_predict(args.python, args.model, args.inputs, way, inductor)
                took[name].append(seen["seconds"])
    print(f"Keras {seen['keras']}, torch {seen['torch']}: the first predict of {args.model}")
    base = statistics.median(took["compile=False"])
    for name, values in took.items():
        ratio = statistics.median(values) / base if base else float("nan")
        print(f"  {name:14} {statistics.median(values):8.3f} s [{min(values):.3f}-{max(values):.3f}] "
              f"(n={len(values)}), {ratio:,.0f} x compile=False")


if __name__ == "__main__":
    main()
