"""The virtualenv engine: one venv per environment, cells in host processes.

For machines without a container engine. A venv pins Python + packages but
not the OS, CUDA or cuDNN, which is why its provenance records the interpreter
and ``pip freeze`` and why Docker is preferred when it answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .. import interpreters, stacks
from ..cells import Cell, Environment
from ..errors import EnvironmentUnavailable
from ..record import tail
from ..supervise import RawOutcome, watch
from .base import CELL_ENV, Engine, Prepared, cache_dir, pip_failure

MARKER = "harness-env.json"
RECIPE_VERSION = 1  # bump when the way venvs are built changes


def parse_size(size: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    size = size.strip().lower()
    if size[-1] in units:
        return int(float(size[:-1]) * units[size[-1]])
    return int(size)


class VenvEngine(Engine):
    name = "venv"

    def __init__(self, root: Path | None = None, pythons: dict[str, str] | None = None):
        self.root = Path(root) if root else cache_dir() / "venvs"
        self.pythons = pythons or {}

    def location(self, env: Environment) -> Path:
        return self.root / f"{env.name}-{env.content_hash()}"

    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        where = self.location(env)
        marker = where / MARKER
        if marker.exists():
            return Prepared(env, json.loads(marker.read_text()), handle=where, reused=True)
        found = interpreters.find(env.python, self.pythons)
        if not found:
            looked = ", ".join(interpreters.candidates(env.python, self.pythons)) or "nothing found"
            raise EnvironmentUnavailable(
                f"no Python {env.python} interpreter on this host (tried: {looked}); install one "
                f"(e.g. with pyenv) or name it with --python {env.python}=PATH")
        exe, full = found
        building = where.with_name(where.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log:
            def step(*args: str) -> None:
                log.write(f"$ {' '.join(args)}\n")
                log.flush()
                proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
                if proc.returncode != 0:
                    log.flush()
                    text = tail(log_path, 6000)
                    raise EnvironmentUnavailable(f"{args[2] if len(args) > 2 else args[0]} failed: "
                                                 f"{pip_failure(text)}", text)

            started = time.monotonic()
            step(exe, "-m", "venv", str(building))
            py = str(building / "bin" / "python")
            step(py, "-m", "pip", "install", "--upgrade", stacks.pip_requirement(full))
            if env.requirements:
                step(py, "-m", "pip", "install", *env.requirements)
            if env.force:
                step(py, "-m", "pip", "install", "--no-deps", *env.force)
            freeze = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True).stdout
        (building / "requirements.lock").write_text(freeze)
        provenance = {
            "venv": str(where),
            "interpreter": exe,
            "python": full,
            "requirements": env.requirements,
            "lock_sha256": hashlib.sha256(freeze.encode()).hexdigest(),
            "build_seconds": round(time.monotonic() - started, 1),
            "recipe": RECIPE_VERSION,
        }
        (building / MARKER).write_text(json.dumps(provenance, indent=2))
        shutil.rmtree(where, ignore_errors=True)
        os.replace(building, where)
        return Prepared(env, provenance, handle=where)

    def pythonpath(self, workloads_root: Path) -> str:
        """Only the workloads: a venv holds everything else the cell may import."""
        return str(workloads_root)

    def _argv(self, prepared: Prepared, workdir: Path) -> list[str]:
        return [str(prepared.handle / "bin" / "python"), "-m", "workloads",
                str(workdir / "spec.json"), str(workdir)]

    def run(self, prepared: Prepared, cell: Cell, workdir: Path, workloads_root: Path) -> RawOutcome:
        workdir, workloads_root = workdir.resolve(), workloads_root.resolve()  # the cell runs in workdir
        env = cell.environment.variables(inherit={**os.environ, **CELL_ENV,
                                                  "PYTHONPATH": self.pythonpath(workloads_root)})
        env.pop("PYTHONHOME", None)
        limit = parse_size(cell.limits.memory) if cell.limits.memory else None

        def preexec() -> None:
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        with open(workdir / "stdout.log", "wb") as out, open(workdir / "stderr.log", "wb") as err:
            proc = subprocess.Popen(self._argv(prepared, workdir), cwd=workdir, env=env, stdout=out,
                                    stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=preexec)

            def kill() -> None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

            try:
                code, timed_out, seconds = watch(proc.poll, kill, workdir / "events.jsonl",
                                                 cell.limits.wall, cell.limits.progress)
            except BaseException:
                kill()
                proc.wait()
                raise
        sig = None
        if code is not None and code < 0:
            from ..outcome import signal_name
            sig = signal_name(-code)
        return RawOutcome(exit_code=code, signal=sig, timed_out=timed_out, seconds=seconds,
                          detail={"pid": proc.pid, "memory_limit_bytes": limit})
