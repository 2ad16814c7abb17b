"""The local engine: cells run on an interpreter that already holds the stack.

For machines where nothing can be installed -- a GPU node without network or
container runtime, a cluster image with its own TensorFlow or JAX. Nothing
is built: the interpreter's installed versions are checked against the
environment's pins, and a mismatch makes the environment `unavailable` with
the versions found, so a run never reports numbers for a stack it did not pin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

from harness.cells import Environment
from harness.engines.base import Prepared, ProcessEngine
from harness.environments import interpreters
from harness.errors import EnvironmentUnavailable

_VERSIONS = (
    "import json, platform, sys\n"
    "from importlib import metadata\n"
    "out = {'python': platform.python_version()}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = metadata.version(name)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))\n"
)


class LocalEngine(ProcessEngine):
    name = "local"
    prepares_for_other_hosts = False  # the interpreter a node finds is the node's: only the node can check it

    def __init__(self, pythons: dict[str, str] | None = None):
        self.pythons = pythons or {}

    def find_interpreter(self, env: Environment) -> str:
        """`--python X.Y=PATH` if given, else the one running the harness if its
        version matches, else the usual search."""
        if env.python in self.pythons:
            return self.pythons[env.python]
        if interpreters.matches(".".join(map(str, sys.version_info[:3])), env.python):
            return sys.executable
        found = interpreters.find(env.python, self.pythons)
        if not found:
            raise EnvironmentUnavailable(f"no Python {env.python} interpreter on this host; "
                                         f"name one with --python {env.python}=PATH")
        return found[0]

    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        exe = self.find_interpreter(env)
        wanted = [Requirement(r) for r in env.requirements + list(env.force)]
        proc = subprocess.run([exe, "-c", _VERSIONS, *[r.name for r in wanted]], capture_output=True, text=True)
        if proc.returncode != 0:
            raise EnvironmentUnavailable(f"{exe} could not report its packages", proc.stderr[-3000:])
        found = json.loads(proc.stdout)
        wrong = [] if interpreters.matches(found["python"], env.python) else [
            f"python {env.python} (found {found['python']})"]
        wrong += [f"{r} (found {found.get(r.name) or 'nothing'})" for r in wanted
                 if found.get(r.name) is None or not r.specifier.contains(found[r.name], prereleases=True)]
        if wrong:
            raise EnvironmentUnavailable(f"{exe} does not hold the pinned stack: {'; '.join(wrong)}",
                                         json.dumps(found, indent=1))
        provenance = {"interpreter": exe, "python": found["python"], "installed": found,
                      "requirements": env.requirements}
        return Prepared(env, provenance, handle=exe, reused=True)

    def pythonpath(self, workloads_root: Path) -> str:
        """The workloads first, then whatever PYTHONPATH the stack was installed with."""
        return os.pathsep.join(p for p in (str(workloads_root), os.environ.get("PYTHONPATH")) if p)
