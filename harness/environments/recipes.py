"""Replay recipes: the shell scripts a bundle's ``run.sh`` is made of.

A bundle is attached to bug reports and run by other people, so a value
never reaches a script as shell text: values go through ``shlex.quote``,
numbers through ``int()``, comments through ``comment`` (one line,
escaped), whatever validation let through. Each engine picks its recipe
(``Engine.write_replay``); the variables and the limits come from the same
places the engines use to run a cell.
"""

from __future__ import annotations

import re
import shlex

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness import stacks
from harness.cells import Cell, size_bytes
from harness.errors import UserError
from harness.launch.cellenv import CELL_ENV, hardening_flags
from harness.terminal import is_plain, visible


def _variables(cell: Cell) -> dict[str, str]:
    """What the harness sets for this cell's process (devices aside: the script runs on what it finds)."""
    return cell.environment.variables(inherit=CELL_ENV)


def lock_without_forced(freeze: str, force: tuple[str, ...] | list[str]) -> str:
    """The environment's `pip freeze` minus the packages `force:` installed last.

    The freeze holds the forced pins next to what they break (keras==2.2.4
    beside tensorflow-cpu==2.15.1), a set pip refuses as one install; so
    run.sh replays the making: this lock with --no-deps (every other package
    at its frozen version, no resolver), then forced.txt with --no-deps.
    """
    forced = {canonicalize_name(Requirement(r).name) for r in force}
    kept = [line for line in freeze.splitlines()
            if not line.strip() or line.lstrip().startswith("#")
            or canonicalize_name(re.split(r"[=<>!~ @\[;]", line.strip(), maxsplit=1)[0]) not in forced]
    head = ["# pip freeze of the environment" + (", without the packages forced.txt installs last" if forced else "")]
    return "\n".join(head + kept) + "\n"


# -- run.sh: everything taken from a cell or a result is quoted ---------------------------
# A bundle is made to be attached to a bug report and run by someone else, so
# the script never carries a value as shell text: values go through
# shlex.quote, numbers through int(), and comments through comment (one line,
# escaped), whatever validation let through.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _q(value) -> str:
    """One shell word for `value`. A control character (a newline, a NUL, an escape) has
    no business in a value and cannot always be quoted (bash drops what follows a NUL),
    so it is refused here, whatever validation let through, instead of written."""
    text = str(value)
    if not is_plain(text):
        raise UserError(f"refusing to write {visible(text[:80])!s} into a script: it holds control characters")
    return shlex.quote(text)


def comment(text: str) -> str:
    """Text for a '#' comment: one line, control and non-ASCII characters escaped."""
    return str(text).encode("unicode_escape").decode("ascii")


def _assignment(key: str, value: str) -> str:
    """'KEY=value' quoted as one word, for `export` or `docker run -e`."""
    if not _VARIABLE.fullmatch(key):
        raise UserError(f"{key!r} is not an environment variable name")
    return _q(f"{key}={value}")


_REPORT = """
code=$?
echo "exit code: $code"
if [ "$code" -gt 128 ]; then echo "killed by signal $((code - 128)) ($(kill -l $((code - 128)) 2>/dev/null))"; fi
if [ "$code" -eq 124 ]; then echo "timed out after {wall}s"; fi
if [ -f out/workload.json ]; then
  echo "workload.json: $(grep -o '"outcome": *"[a-z]*"' out/workload.json)"
else
  echo "no workload.json: the process died before it could record an outcome"
fi
exit "$code"
"""


def docker_script(cell: Cell, prov: dict, locked: bool = False) -> str:
    env = {**_variables(cell), "PYTHONPATH": "/opt/harness", "HOME": "/tmp"}
    run_flags = ["--rm", "--init", "--network", "none", "-u", '"$(id -u):$(id -g)"', "-w", "/tmp",
                 *(_q(flag) for flag in hardening_flags())]
    if cell.limits.memory:
        run_flags += ["--memory", _q(cell.limits.memory), "--memory-swap", _q(cell.limits.memory)]
    if cell.parallelism.device_kind == "gpu":
        run_flags += ["--gpus", _q(f"device={','.join(str(i) for i in range(int(cell.parallelism.devices)))}")]
    run_flags += [f"-e {_assignment(k, v)}" for k, v in sorted(env.items())]
    wall = int(cell.limits.wall)
    user_mount = _user_mount(cell)
    what = _LOCKED if locked else _PINNED
    return f"""#!/usr/bin/env bash
# Reproduce {comment(cell.id)}
# with plain Docker; nothing of the harness is needed. DOCKER=/path/to/docker to choose
# the client (the build needs BuildKit); PIP_CERT=bundle.pem if pip sits behind a TLS proxy.
# {what}
set -u
cd "$(dirname "$0")"
DOCKER="${{DOCKER:-docker}}"
IMAGE={_q(prov["image_tag"])}
if ! "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  : > environment/no-ca
  DOCKER_BUILDKIT=1 "$DOCKER" build -t "$IMAGE" \\
    --build-arg {_q("BASE_IMAGE=" + str(prov["base_used"]))} \\
    --build-arg {_q("BOOTSTRAP_PIP=" + stacks.pip_requirement(cell.environment.python))} \\
    --secret "id=ca,src=${{PIP_CERT:-environment/no-ca}}" environment || exit 125
fi
rm -rf out && mkdir -p out && cp spec.json out/
if [ -d inputs ]; then cp -a inputs out/; fi
timeout {wall} "$DOCKER" run {" ".join(run_flags)} \\
  -v "$PWD/workloads:/opt/harness/workloads:ro" -v "$PWD/out:/out" \\{user_mount}
  "$IMAGE" python3 -m workloads /out/spec.json /out
""" + _REPORT.format(wall=wall)


_LOCKED = ("Without the image, environment/requirements.txt remakes it: the pip freeze of the image the cell "
           "ran in.")
_PINNED = ("Without the image, environment/requirements.txt remakes it from the matrix's pins, resolved on "
           "the day of the build.")


def _user_mount(cell: Cell) -> str:
    """The user's own code (harness/usercode.py), mounted read-only where the staged tree has it,
    and a chain's inputs (harness/chains.py)."""
    mounts = ""
    if cell.workload.code is not None:
        mounts += '\n  -v "$PWD/user:/opt/harness/user:ro" \\'
    if cell.needs:  # a chain's producer files (copied into out/ above), read-only as in the harness
        mounts += '\n  -v "$PWD/out/inputs:/out/inputs:ro" \\'
    return mounts


def venv_script(cell: Cell, has_lock: bool) -> str:
    env = cell.environment
    python = "python" + ".".join(env.python.split(".")[:2])
    reqs = "environment/requirements.lock" if has_lock else "environment/requirements.txt"
    exports = "\n".join(f"export {_assignment(k, v)}" for k, v in sorted(_variables(cell).items()))
    limit = ""
    if cell.limits.memory:
        limit = f"ulimit -v {int(size_bytes(cell.limits.memory)) // 1024}\n"
    # the lock is complete (pip freeze --all): --no-deps installs exactly it, with no resolver
    no_deps = "--no-deps " if has_lock else ""
    force = ('\n  if [ -s environment/forced.txt ]; then .venv/bin/python -m pip install -q --no-deps '
             '-r environment/forced.txt || exit 125; fi')
    wall = int(cell.limits.wall)
    return f"""#!/usr/bin/env bash
# Reproduce {comment(cell.id)}
# in a virtualenv made the way the harness made it: the exact pins, then the forced ones
# (--no-deps), and the cell's variables. PYTHON=/path/to/{comment(python)} to choose the interpreter.
set -u
cd "$(dirname "$0")"
PYTHON="${{PYTHON:-}}"
[ -n "$PYTHON" ] || PYTHON={_q(python)}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv || exit 125
  .venv/bin/python -m pip install -q --upgrade {_q(stacks.pip_requirement(env.python))} || exit 125
  .venv/bin/python -m pip install -q {no_deps}-r {reqs} || exit 125{force if env.force else ""}
fi
rm -rf out && mkdir -p out && cp spec.json out/
if [ -d inputs ]; then cp -a inputs out/; fi
unset {" ".join(stacks.KERAS_SWITCHES)}  # the Keras this cell uses is set below, never inherited
{exports}
export PYTHONPATH="$PWD"
({limit}exec timeout {wall} .venv/bin/python -m workloads out/spec.json out)
""" + _REPORT.format(wall=wall)
