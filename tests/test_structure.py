"""The host side's structure, checked from its source (pure Python, fast):
no import circle, no executor importing the runner above it, and exactly one
function that writes result.json."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

HARNESS = ROOT / "harness"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """module -> the harness modules it imports, anywhere in it (a function-level import counts:
    it is a circle that only waits for the first call)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # `import harness.x.y` names a module or a package
                    target = target.rpartition(".")[0]
                if target.startswith("harness") and target != name and target != "harness":
                    edges.add(target)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    assert "harness.run.lifecycle" in graph and graph["harness.run.runner"], "the walker finds the modules"
    # a package's own __init__ importing its submodules is how packages work, not a circle
    plain = {m: {t for t in edges if not m.startswith(t + ".")} for m, edges in graph.items()}
    assert circles(plain) == []


def test_no_two_rooms_import_each_other():
    """A room is a package directly under harness/ (or a module there): the packages' own graph has no
    circle either, so each package can be read with only the ones below it in mind
    (docs/explanation/architecture.md draws them)."""
    rooms: dict[str, set[str]] = {}
    for module, edges in import_graph().items():
        for target in edges:
            here, there = ".".join(module.split(".")[:2]), ".".join(target.split(".")[:2])
            if here != there:
                rooms.setdefault(here, set()).add(there)
    assert "harness.run" in rooms and "harness.results" in rooms["harness.run"], "the walker finds the packages"
    assert circles(rooms) == []


MAX_MODULES_AT_THE_DOOR = 13  # more, and the folder no longer shows the packages that answer the questions


def test_few_modules_live_directly_under_harness():
    modules = sorted(p.name for p in HARNESS.glob("*.py"))
    assert len(modules) <= MAX_MODULES_AT_THE_DOOR, modules


def test_the_walker_finds_a_circle_when_there_is_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_executor_imports_the_runner():
    graph = import_graph()
    upward = {m: sorted(t for t in edges if t == "harness.run.runner" or t == "harness.cli")
              for m, edges in graph.items() if m.startswith("harness.run.executors")}
    assert {m: t for m, t in upward.items() if t} == {}
    assert "harness.run.lifecycle" in graph["harness.run.executors.slurm.task"], \
        "the node task runs cells via the lifecycle"


_WRITES = re.compile(r"\b(write_json|write_text|open|os\.replace|shutil\.copy2?|save)\s*\(")


def functions_writing_results(root: Path = HARNESS) -> list[str]:
    """Functions whose own body (nested functions are looked at on their own) names the result file
    (RESULT, RESULT_FILE, "result.json") and writes a file."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "workloads" in path.parts:
            continue  # the other side of the process boundary never writes result.json (only the host can)
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = ast.get_source_segment(source, node) or ""
            for inner in ast.walk(node):
                if inner is not node and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    body = body.replace(ast.get_source_segment(source, inner) or "\0", "")
            if re.search(r"\bRESULT(_FILE)?\b|[\"']result\.json[\"']", body) and _WRITES.search(body):
                found.append(f"{_module_name(path)}.{node.name}")
    return found


def test_exactly_one_function_writes_result_json():
    assert functions_writing_results() == ["harness.results.result.save"]


MAX_MODULE_LINES = 500  # a module past this is several rooms: split it along its seams (harness/matrix/)
MAX_FUNCTION_LINES = 80  # a function past this is several steps: name them


def test_no_module_is_several_rooms():
    sizes = {_module_name(p): len(p.read_text().splitlines()) for p in HARNESS.rglob("*.py")}
    assert sizes["harness.run.lifecycle"] > 0, "the walker finds the modules"
    assert {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_is_several_steps():
    long = {}
    for path in HARNESS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long[f"{_module_name(path)}.{node.name}"] = size
    assert long == {}


def imports_inside_functions_unexplained(root: Path = HARNESS) -> list[str]:
    """An import inside a function without a comment saying why -- on its own line, or on the line
    right above the block of import lines it belongs to. The reasons that hold: an optional
    dependency, the CLI starting without a verb's work, the framework imported inside a cell (the
    process boundary). Any other import belongs at the top, where a reader looks for it."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if not isinstance(inner, (ast.Import, ast.ImportFrom)):
                    continue
                at = inner.lineno - 1
                while at > 0 and re.match(r"\s*(from\s+\S+\s+)?import\s", lines[at - 1]) and "#" not in lines[at]:
                    at -= 1  # up through the block's import lines
                if "#" not in lines[inner.lineno - 1] and not (at > 0 and lines[at - 1].strip().startswith("#")) \
                        and "#" not in lines[at]:
                    found.append(f"{path.relative_to(root)}:{inner.lineno}")
    return sorted(set(found))


def test_an_import_inside_a_function_says_why():
    assert imports_inside_functions_unexplained() == []


def test_the_import_check_finds_an_unexplained_one(tmp_path):
    (tmp_path / "m.py").write_text("import os\n\n\ndef f():\n    import json\n    return json\n\n\n"
                                   "def g():\n    # optional dependency\n    import yaml\n    import toml\n"
                                   "    return yaml\n")
    found = imports_inside_functions_unexplained(tmp_path)
    assert [f.rsplit(":", 1)[1] for f in found] == ["5"], found


def test_the_matrix_is_a_package_whose_names_still_import_from_harness_matrix():
    import harness.matrix as matrix

    assert (HARNESS / "matrix" / "__init__.py").is_file() and not (HARNESS / "matrix.py").exists()
    # what the rest of the project imports from it (harness/, tests/, bench/), wherever it now lives
    for name in ("load", "parse", "Matrix", "MatrixError", "MODEL_DEFAULTS", "TOP_KEYS", "ENV_KEYS", "PAR_KEYS",
                 "RULE_KEYS", "EXPECT_KEYS", "TIMEOUT_KEYS", "MODEL_KEYS", "COMMON_WORKLOAD_KEYS", "MAX_DEPTH",
                 "MAX_MATCH_WORK", "_Checker", "_Rules"):
        assert hasattr(matrix, name), name


# Calls back up the import layering on a cell's walk, each one a seam on purpose: a base class
# calling its subclass's override, the executor's hooks into the runner (no executor imports the
# runner), supervise.watch's pause callback into the engine. A new one is a seam to look at.
EXPECTED_CLIMBS = {("harness.engines.base", "harness.engines.local"),
                   ("harness.run.executors.local", "harness.run.runner"),
                   ("harness.host.supervise", "harness.engines.base"),
                   # the launchers ask their engine why a cell starts fresh (Engine.fresh_because)
                   ("harness.launch.launcher", "harness.engines.base")}


def test_a_cells_walk_climbs_back_up_only_where_a_seam_is_meant():
    from bench.walk import walk

    got = walk()  # one real cell: this interpreter, a one-line script, the local engine
    assert got["statuses"] == ["ok"]
    assert {"harness.run.runner", "harness.run.lifecycle", "harness.results.store",
            "harness.engines.local"} <= set(got["rooms"])
    assert set(got["climbs"]) <= EXPECTED_CLIMBS, got["climbs"]
    assert "harness.engines.base" not in got["entered_from"]["harness.run.lifecycle"], "an engine never calls back up"


def test_the_quick_tier_needs_no_docker_slurm_or_tensorflow():
    """`nox -s tests -- -m quick` (the README's tier for contributors) selects whole files of fast tests:
    none asks for the fixtures that bring a Docker engine or a Slurm cluster, and none carries the marks
    of a test that runs TensorFlow, needs an engine or a cluster, or takes minutes (pyproject.toml)."""
    import subprocess
    import sys

    def collect(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
                               "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    quick = collect("-m", "quick", "--fixtures-per-test")
    assert quick.returncode == 0, quick.stdout[-2000:] + quick.stderr[-2000:]
    tests = re.findall(r"^-+ fixtures used by (\S+)", quick.stdout, re.M)
    assert len(tests) >= 400, quick.stdout[-2000:]
    assert not re.search(r"^(docker_client|slurm)\b", quick.stdout, re.M), "a quick test needs an engine or a cluster"
    heavy = collect("-m", "quick and (tf or docker or slurm or slow)")
    assert heavy.returncode == 5, heavy.stdout[-2000:]   # pytest's "no tests collected"
