#!/usr/bin/env bash
# The harness for the action: its runtime pins from the lock (with their hashes), installed with the
# lock's own uv into a virtualenv under the runner's temporary folder; the harness itself is this
# checkout of the action, put on that environment's path. Writes HARNESS_PYTHON and HARNESS_CACHE
# to the job's environment for the steps after it.
set -euo pipefail
here="${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}"
temp="${RUNNER_TEMP:-$(mktemp -d)}"
python="$(command -v python3 || command -v python)"
tools="$temp/harness-tools"
env="$temp/harness-env"
"$python" -m venv "$tools"
PYTHONPATH="$here" "$python" -m harness.toolchain.lockfile requirements nox --lock "$here/lock.txt" > "$tools/nox.txt"
"$tools/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps --only-binary=:all: \
  -r "$tools/nox.txt"
PYTHONPATH="$here" "$python" -m harness.toolchain.lockfile requirements runtime --lock "$here/lock.txt" \
  > "$tools/runtime.txt"
"$tools/bin/uv" venv -q --python "$python" "$env"
"$tools/bin/uv" pip install -q --python "$env/bin/python" --require-hashes --no-deps --only-binary=:all: \
  -r "$tools/runtime.txt"
site="$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$here" > "$site/tfkeras-harness-action.pth"
"$env/bin/python" -m harness --help > /dev/null
{
  echo "HARNESS_PYTHON=$env/bin/python"
  echo "HARNESS_CACHE=${HARNESS_CACHE:-$temp/harness-cache}"
} >> "${GITHUB_ENV:-/dev/null}"
