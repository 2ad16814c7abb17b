#!/usr/bin/env bash
# Warm launch on one GPU, A/B: does a warm cell train as a fresh one, and if not, what bends it?
# Run from the repository's root on a GPU host, with keras 3.15.1, namex and optree importable
# (PYTHONPATH) beside the host's JAX. Each ARM is one `bench/warm.py` invocation on seed 000's
# one-GPU cells (`--only` below), fresh and warm runs alternating, so its warm / fresh ratios are
# taken in one run:
#
#   standby-on      warm as it ships: the next cell prepares beside the training one, and warm
#                   cells take GPU memory as they go (XLA_PYTHON_CLIENT_PREALLOCATE=false)
#   standby-off     no cell prepares beside another (HARNESS_STANDBY=off, bench/warm.py --standby off)
#   alloc-alike     standby on, and the matrix's env asks fresh cells too to take memory as they go:
#                   fresh and warm then differ only in how they launch
#   deterministic   standby on, and XLA asked for deterministic GPU ops in every cell
#                   (XLA_FLAGS=--xla_gpu_deterministic_ops=true): fresh runs then give one answer,
#                   so whether warm gives the same is asked bit for bit, not against fresh's spread
#   ab              standing by on and off interleaved in every round (--standby on,off): the warm
#                   runs of the two arms compared round by round, minutes apart
#
#   bench/device/warm-gpu.sh ARM [ARM ...]      (OUT=folder for the tables; default ./warm-gpu)
set -euo pipefail
out="${OUT:-./warm-gpu}"
mkdir -p "$out"
only=(--only "${ONLY:-*/none-g1/b1024/*}")
rounds="${ROUNDS:-2}"
# seed 000's GPU matrix with one variable more in every environment's env:, written to a temp folder
with_env() {
  local path
  path="$(mktemp -d)/seed000-gpu-env.yaml"
  python3 - "$path" "$1" <<'PY'
import sys
import yaml
path, setting = sys.argv[1], sys.argv[2]
key, _, value = setting.partition("=")
data = yaml.safe_load(open("matrices/seed000-gpu.yaml"))
for env in data["environments"]:
    env.setdefault("env", {})[key] = value
open(path, "w").write(yaml.safe_dump(data, sort_keys=False))
PY
  echo "$path"
}
# the record says what ran in the words of this script, not its temporary paths: the matrix it was
# made from, the variable added to every environment, and the command that reproduces it
as_made() {
  python3 - "$1" "$2" "$3" <<'PY'
import json
import sys
path, arm, setting = sys.argv[1:]
record = json.load(open(path))
record["command"] = ["bench/device/warm-gpu.sh", arm]   # with ROUNDS: the record's own `rounds`
record["arm"] = arm
for measured in record["matrices"]:
    made = measured["matrix"]
    measured["matrix"] = "matrices/seed000-gpu.yaml"
    if setting:
        key, _, value = setting.partition("=")
        measured["env_added"] = {key: value}
    measured["verdicts"] = [v.replace(made, measured["matrix"]) for v in measured.get("verdicts", [])]
    for arm_record in measured["arms"].values():
        arm_record["verdict"] = arm_record["verdict"].replace(made, measured["matrix"])
open(path, "w").write(json.dumps(record, indent=1) + "\n")
PY
}
for arm in "$@"; do
  matrix=matrices/seed000-gpu.yaml
  standby=on
  setting=""
  case "$arm" in
    standby-on) ;;
    standby-off) standby=off ;;
    ab) standby=on,off ;;
    alloc-alike) setting=XLA_PYTHON_CLIENT_PREALLOCATE=false; matrix="$(with_env "$setting")" ;;
    deterministic) setting=XLA_FLAGS=--xla_gpu_deterministic_ops=true; matrix="$(with_env "$setting")" ;;
    *) echo "unknown arm: $arm (standby-on, standby-off, alloc-alike, deterministic, ab)" >&2; exit 2 ;;
  esac
  echo "== $arm: $(date -u +%FT%TZ)"
  python3 bench/warm.py "$matrix" --engine local --gpus 0 "${only[@]}" --rounds "$rounds" \
    --standby "$standby" --record "$out/warm-$arm.json" 2>&1 | sed "s#$matrix#matrices/seed000-gpu.yaml#g" \
    | tee "$out/warm-$arm.txt"
  as_made "$out/warm-$arm.json" "$arm" "$setting"
done
