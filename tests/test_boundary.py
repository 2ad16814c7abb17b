"""The process boundary: the workloads package must run on Python 3.5+ and
import only the standard library, numpy, TensorFlow, Keras (and Keras 3's
backends) -- never the host side."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.environments import interpreters

from .conftest import ROOT

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

WORKLOADS = ROOT / "harness" / "workloads"
ALLOWED = {"numpy", "tensorflow", "keras", "jax", "jaxlib", "torch"} | set(sys.stdlib_module_names)


def test_workloads_parse_on_python_35():
    vermin = shutil.which("vermin", path=str(Path(sys.executable).parent)) or shutil.which("vermin")
    assert vermin, "vermin is a test dependency (pip install -e .[test])"
    proc = subprocess.run([vermin, "-t=3.5-", "--no-tips", "--violations",
                           "--eval-annotations", str(WORKLOADS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workloads_compile_on_a_real_old_interpreter():
    found = interpreters.find("3.6")
    if not found:
        pytest.skip("no Python 3.6 on this host")
    exe, _ = found
    proc = subprocess.run([exe, "-m", "compileall", "-q", "-f", "-d", "workloads", str(WORKLOADS)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workloads_import_nothing_from_the_host_side():
    for path in WORKLOADS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module.split(".")[0]]
            else:
                continue
            for name in names:
                assert name in ALLOWED or name.endswith("planted_fault"), f"{path.name} imports {name}"


def _imports(path: Path):
    """Every import in a file, at any depth (function-level imports included), as absolute module names."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module
            yield from (f"{module}.{a.name}" for a in node.names)


def test_the_host_reads_the_workloads_through_the_protocol_module_only():
    """The host may import `harness.workloads.protocol` and nothing else of the
    in-environment side (that code runs inside environments, on other Pythons)."""
    for path in (ROOT / "harness").rglob("*.py"):
        if WORKLOADS in path.parents:
            continue
        for module in _imports(path):
            if module.startswith("harness.workloads") and module not in (
                    "harness.workloads", "harness.workloads.protocol",
                    "harness.workloads.protocol." + module.rsplit(".", 1)[-1]):
                pytest.fail(f"{path.relative_to(ROOT)} imports {module}")


def test_the_protocol_module_imports_nothing():
    assert list(_imports(WORKLOADS / "protocol.py")) == []
