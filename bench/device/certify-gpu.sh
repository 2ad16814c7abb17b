#!/usr/bin/env bash
# The certificate on a GPU host: Keras 3 on JAX, the one-device side on GPU 0 and on one CPU device,
# each against two virtual CPU devices (data_parallel), for a plain model, a planted per-replica bug
# and the seeds' GRU. Run from the repository's root on the GPU host, with keras 3.15.1, namex and
# optree importable (PYTHONPATH) beside the host's JAX; writes CERTIFICATE.md, certificate.json and
# the GPU cells' result.json under OUT (default: ./certify-gpu). The control for the GPU's side: the same
# stack with float32 matrix products at full precision (JAX_DEFAULT_MATMUL_PRECISION=highest).
set -euo pipefail
root="$(pwd)"
out="${OUT:-$root/certify-gpu}"
work="$(mktemp -d)"
mkdir -p "$out" "$work/f"
PYTHONPATH="$root:${PYTHONPATH:-}" python3 - "$work" <<'PY'
import sys
from pathlib import Path
from tests.test_certify import FACTORY
work = Path(sys.argv[1])
(work / "f" / "factory.py").write_text(FACTORY)
(work / "m.yaml").write_text("""\
name: certify-gpu
environments:
  - {name: jax-gpu, python: "3.12", keras: "3.15.1", backend: jax, device: gpu}
  - {name: jax-gpu-f32, python: "3.12", keras: "3.15.1", backend: jax, device: gpu,
     env: {JAX_DEFAULT_MATMUL_PRECISION: highest}}
workloads:
  - {name: plain, model: user, path: ./f, build: "factory:build", data: "factory:data"}
  - {name: planted, model: user, path: ./f, build: "factory:planted", data: "factory:data"}
  - {name: gru, model: rnn, cell: gru, layers: 2, units: 32, dense: 16, timesteps: 16, features: 8, classes: 4,
     samples: 2560}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: none, devices: 1, device_kind: cpu}
  - {wrapper: data_parallel, devices: 2, device_kind: cpu}
batch_sizes: [32]
epochs: 2
timeouts: {wall: 600, progress: 300}
""")
PY
cd "$work"
set +e
PYTHONPATH="$root:${PYTHONPATH:-}" python3 -m harness certify m.yaml --engine local --results r --out c \
  --control jax-gpu=jax-gpu-f32:precision
code=$?
set -e
cp c/CERTIFICATE.md c/certificate.json "$out/" 2>/dev/null || true
for w in plain planted gru; do
  f="r/certify-gpu/jax-gpu/$w/none-g1/b32/r0/result.json"
  if [ -f "$f" ]; then cp "$f" "$out/result-$w-g1.json"; fi
done
echo "certify exited $code"
