"""The virtualenv engine: one venv per environment, cells in host processes.

For machines without a container engine. A venv pins Python + packages but
not the OS, CUDA or cuDNN, which is why its provenance records the interpreter
and what the environment holds (``uv pip freeze``), and why Docker is preferred
when it answers. uv builds it (``installer``): its files hard-linked from uv's
cache, so a second environment with the same wheels costs neither a download
nor their disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from harness.cells import CUTOFF_RULE, Environment
from harness.engines.base import Prepared, ProcessEngine, cache_dir
from harness.environments import buildlock, installer, interpreters, ledger
from harness.errors import EnvironmentUnavailable
from harness.files.paths import inside
from harness.launch.cellenv import inherited
from harness.launch.launcher import stack_imports

MARKER = installer.MARKER  # the marker's name is decided where the uv cache it records is
RECIPE_VERSION = 5  # bump when the way venvs are built changes (2: folders named by content alone; 3: uv; 4-5: seeded)


class VenvEngine(ProcessEngine):
    name = "venv"
    own_environments = True

    def __init__(self, root: Path | None = None, pythons: dict[str, str] | None = None):
        self.root = Path(root) if root else cache_dir() / "venvs"
        self.pythons = pythons or {}
        self._uses: dict[Path, buildlock.Use] = {}

    def location(self, env: Environment) -> Path:
        """The venv's folder, named for what is installed in it and nothing else: two environments
        that differ only in name (or in what a venv does not hold: the device, a base image) share
        one venv, so none is built twice. The name is not part of it, so no name can move it."""
        what = {"python": env.python, "requirements": env.requirements, "force": list(env.force),
                "recipe": RECIPE_VERSION}
        if env.uploaded_before:
            what.update(uploaded_before=env.uploaded_before, cutoff_rule=CUTOFF_RULE)
        digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
        return inside(self.root, self.root / f"py{env.python}-{digest}")

    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        """Build the venv once; concurrent runs (and cluster jobs sharing the
        cache) wait for the one that builds it instead of racing it. The venv is then in use
        until the engine closes: nothing removes it under this run's cells (buildlock.Use)."""
        where = self.location(env)
        # the in-use hold before the build lock, in the order a removal takes the two; once per venv
        fresh = where not in self._uses or self._uses[where].fd is None
        if fresh:
            self._uses[where] = buildlock.Use(where)
        try:
            with buildlock.held(where.name, where):
                return self._prepare(env, where, log_path)
        except BaseException:
            if fresh:   # nothing of this run is in it
                self._uses.pop(where).release()
            raise

    def close(self) -> None:
        super().close()
        for use in self._uses.values():
            use.release()
        self._uses.clear()

    def _prepare(self, env: Environment, where: Path, log_path: Path) -> Prepared:
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
        try:
            return self._build(env, where, building, exe, full, log_path)
        except BaseException:
            # a failed or interrupted install can leave gigabytes (a half TF); its log says what happened
            shutil.rmtree(building, ignore_errors=True)
            raise

    def _build(self, env: Environment, where: Path, building: Path, exe: str, full: str,
               log_path: Path) -> Prepared:
        unsupported = installer.supported(full)
        if unsupported:
            raise EnvironmentUnavailable(unsupported)
        with open(log_path, "w") as log:
            started = time.monotonic()
            installer.run(installer.create(exe, building), log, log_path, "creating the virtualenv")
            py = str(building / "bin" / "python")
            seeded = installer.seed(exe)
            offline = installer.populate(py, env, log, log_path, seeded)
            freeze = installer.freeze(py)
            imported = import_stack(py, env, log)
        (building / "requirements.lock").write_text(freeze)
        provenance = {
            "venv": str(where),
            "interpreter": exe,
            "python": full,
            "requirements": env.requirements,
            "lock_sha256": hashlib.sha256(freeze.encode()).hexdigest(),
            "build_seconds": round(time.monotonic() - started, 1),
            "recipe": RECIPE_VERSION,
            **installer.note(env),
            "seeded": Path(seeded).name if seeded else None,  # as python -m venv seeds it (installer.SEED)
            "resolved_offline": offline,  # from uv's cache alone: every page in it newer than the cut-off
            "resolved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # the day "no cut-off" means
            "uv_cache": str(installer.cache()),  # its files are links into it: the two go together
            "stack_imported": imported,
        }
        (building / MARKER).write_text(json.dumps(provenance, indent=2))
        shutil.rmtree(where, ignore_errors=True)
        os.replace(building, where)
        ledger.append("build", engine=self.name, environment=env.name, seconds=provenance["build_seconds"])
        return Prepared(env, provenance, handle=where)

    def interpreter(self, prepared: Prepared) -> str:
        return str(Path(prepared.handle) / "bin" / "python")

    def shell(self, cell, prepared: Prepared, bundle: Path) -> tuple[list[str], dict]:
        argv, env = super().shell(cell, prepared, bundle)
        env["VIRTUAL_ENV"] = str(prepared.handle)
        return argv, env


# One process imports the stack's modules in order; one that fails to import is left to the cells,
# which meet the same failure and say why (a build does not fail on what a cell reports better).
_IMPORT = ("import importlib, sys\n"
           "for name in sys.argv[1:]:\n"
           "    try:\n"
           "        importlib.import_module(name)\n"
           "    except BaseException as exc:\n"
           "        sys.stderr.write('importing %s at build failed: %r\\n' % (name, exc))\n")
IMPORT_TIMEOUT = 600


def import_stack(python: str, env: Environment, log) -> list[str]:
    """Import the stack once at build, so that its bytecode is in the virtualenv for every later
    process -- as an image does at its build (images/venv/Dockerfile). Cells run with
    PYTHONDONTWRITEBYTECODE=1; a built-in cell's own import writes the stack's bytecode
    (compat.stack_bytecode), but a user's script imports the stack itself, so every script cell
    compiled it again (TensorFlow 2.16 with tf-keras: a 14.7 s script took 10.6 s from bytecode).
    Only the stack's import writes, with a home of its own (Keras writes ~/.keras at import) and the
    environment's own Keras switches; the modules are those a launcher preloads
    (launcher.stack_imports). Returns what it imported: nothing for a bare Python."""
    modules = stack_imports(env)
    if not modules:
        return []
    variables = env.variables(inherit=inherited())  # no PYTHONDONTWRITEBYTECODE: Python writes
    log.write(f"$ {python} -c <import> {' '.join(modules)}   (the stack's bytecode, written once)\n")
    log.flush()
    with tempfile.TemporaryDirectory(prefix="harness-import-") as home:
        variables["HOME"] = home
        try:
            subprocess.run([python, "-c", _IMPORT, *modules], stdout=log, stderr=subprocess.STDOUT,
                           env=variables, cwd=home, timeout=IMPORT_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            log.write(f"(the stack's import took over {IMPORT_TIMEOUT} s: left to the cells)\n")
    return modules
