"""Hostile and careless input, through the command line a user types: every
matrix the loader cannot accept, and every results folder it cannot write,
is one clear error naming the file and key, exit 2, no traceback, within a
few seconds, with nothing written anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.list_bound import matrix as rules_matrix
from harness import matrix, names
from harness.cells import Cell, Environment, Parallelism, Workload
from harness.engines.venv import VenvEngine
from harness.environments import installer
from harness.errors import MatrixError, UserError
from harness.files.paths import inside
from harness.results.store import ResultStore

from .conftest import ROOT

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

BASE = 'environments: [{python: "3.11", tensorflow: "2.15.0"}]\nworkloads: [{model: rnn}]\n'
SECONDS = 5.0  # one or two on an idle machine; CI machines are shared


def bomb(levels: int = 9, width: int = 10) -> str:
    """Billion laughs: `levels` anchors, each a list of `width` aliases to the one before."""
    lines = ["  - &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  - &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    # case: (document, the key, the place or the harness's own words the one-line message must name)
    "non-utf8": (b"name: \xff\xfe\n" + BASE.encode(), "not UTF-8"),
    "unhashable-model": (BASE.replace("{model: rnn}", "{model: [rnn]}"), "workloads[0].model"),
    # 20,000 levels on one line: the harness's depth limit or the parser's own (libyaml >= 0.2.6 stops
    # at 1,000 while scanning ahead), whichever comes first -- the promise is the place, not the wording
    "deep-flow": (BASE + "x: " + "[" * 20_000 + "]" * 20_000 + "\n", "line 3, column"),
    "deep-flow-40": (BASE + "x: " + "[" * 40 + "]" * 40 + "\n", f"nested deeper than {matrix.MAX_DEPTH}"),
    "deep-block": ("- " * 20_000 + "y\n", f"nested deeper than {matrix.MAX_DEPTH}"),
    "bomb-in-batch-sizes": ("defs:\n" + bomb() + BASE + "batch_sizes: *l8\n", "too large"),
    "bomb-in-environments": ("environments:\n" + bomb() + "workloads: [{model: rnn}]\n", "too large"),
    "recursive-alias": (BASE + "include: &r [*r]\n", "contains itself"),
    "repeats-1e9": (BASE + "repeats: 1000000000\n", "repeats: expected a number in [1, 1000]"),
    "too-many-cells": (BASE + "repeats: 1000\nbatch_sizes: [" + ", ".join(str(b) for b in range(1, 201)) + "]\n",
                       "200000 cells"),
    "huge-file": (BASE + "description: " + "x" * (2 << 20) + "\n", "larger than 1 MiB"),
    "huge-integer": (BASE + "seed: " + "9" * 5000 + "\n", "a value cannot be read"),
    "epochs": (BASE + "epochs: 1000000000\n", "epochs: expected a number in [1, 10000]"),
    "timeout-nan": (BASE + "timeouts: {wall: .nan}\n", "timeouts.wall: expected a finite number"),
    "timeout-negative": (BASE + "timeouts: {wall: -5}\n", "timeouts.wall: expected a number in (0.0"),
    "progress-zero": (BASE + "timeouts: {progress: 0}\n", "timeouts.progress: expected a number in (0.0"),
    "seed-2**70": (BASE + f"seed: {2**70}\n", "seed: expected a number in [0, 4294967295]"),
    "batch-10**12": (BASE + "batch_sizes: [1000000000000]\n", "batch_sizes[0]: expected a number"),
    "devices-10**6": (BASE + "parallelism: [{wrapper: none, devices: 1000000}]\n", "parallelism[0].devices"),
    "dropout-5": (BASE.replace("{model: rnn}", "{model: rnn, dropout: 5.0}"), "workloads[0].dropout"),
    "learning-rate-negative": (BASE.replace("{model: rnn}", "{model: rnn, learning_rate: -0.1}"),
                               "workloads[0].learning_rate"),
    "layer-arg-unknown": (BASE.replace("{model: rnn}", "{model: rnn, layer_args: {go_backwards: true}}"),
                          "workloads[0].layer_args.go_backwards"),
    "layer-arg-type": (BASE.replace("{model: rnn}", "{model: rnn, layer_args: {implementation: yes}}"),
                       "workloads[0].layer_args.implementation"),
    "layer-arg-newline": (BASE.replace("{model: rnn}", '{model: rnn, layer_args: {activation: "tanh\\nx"}}'),
                          "workloads[0].layer_args.activation"),
    "layer-args-on-cudnn": (BASE.replace("{model: rnn}", "{model: rnn, cell: cudnn_gru, layer_args: {use_bias: true}}"),
                            "workloads[0].layer_args"),
    "memory-1k": (BASE + "memory_limit: 1k\n", "memory_limit: at least 64m"),
    "memory-newline": (BASE + 'memory_limit: "4g\\n"\n', "memory_limit: expected a size"),
    "version-newline": (BASE.replace('"2.15.0"', '"2.15.0\\n"'), "environments[0].tensorflow"),
    "python-newline": (BASE.replace('"3.11"', '"3.11\\n"'), "environments[0].python"),
    "duplicate-key": (BASE + "epochs: 1\nepochs: 2\n", "the key 'epochs' is given twice"),
    "name-dotdot": (BASE + 'name: "../../x"\n', "name: '../../x' is not a valid name"),
    "name-absolute": (BASE + 'name: "/tmp/x"\n', "name: '/tmp/x' is not a valid name"),
    "name-root": (BASE + 'name: "/"\n', "name: '/' is not a valid name"),
    "name-markup": (BASE + 'name: "[/]"\n', "name: '[/]' is not a valid name"),
    "env-name-nul": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", name: "a\\0b"'),
                     "environments[0].name"),
    "workload-name-newline": (BASE.replace("{model: rnn}", '{model: rnn, name: "w\\ntouch PWNED\\n#"}'),
                              "workloads[0].name"),
    "package-newline": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", '
                                     'packages: ["six\\n--index-url=http://example.invalid"]'),
                        "environments[0].packages[0]"),
    "base-image-newline": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", '
                                        'base_image: "python:3.11-slim\\ntouch PWNED"'),
                           "environments[0].base_image"),
    "rule-of-mappings": (BASE + "include: [{environment: [{a: 1}]}]\n", "include[0].environment"),
    # numbers: every numeric setting, not only the cell's
    "slurm-margin-nan": (BASE + "slurm: {time_margin: .nan}\n", "slurm.time_margin: expected seconds >= 0, got nan"),
    "slurm-margin-inf": (BASE + "slurm: {time_margin: .inf}\n", "slurm.time_margin: expected seconds >= 0, got inf"),
    "slurm-margin-negative": (BASE + "slurm: {time_margin: -1}\n", "slurm.time_margin: expected seconds >= 0, got -1"),
    "slurm-throttle-10**9": (BASE + "slurm: {throttle: 1000000000}\n", "slurm.throttle: expected at most"),
    "slurm-cpus-10**9": (BASE + "slurm: {cpus_per_task: 1000000000}\n", "slurm.cpus_per_task"),
    "slurm-mem-10**15g": (BASE + "slurm: {mem: 999999999999999g}\n", "slurm.mem: at most 64t"),
    "memory-10**15g": (BASE + "memory_limit: 999999999999999g\n", "memory_limit: at most 64t"),
    # variables that change what code a process loads: refused by family, not by name
    **{f"env-{name}": (BASE.replace('tensorflow: "2.15.0"', f'tensorflow: "2.15.0", env: {{{name}: x}}'),
                       f"environments[0].env.{name}: {name} cannot be set here")
       for name in ("LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "PYTHONBREAKPOINT",
                    "PYTHONUSERBASE", "PYTHONINSPECT", "BASH_ENV", "BASH_FUNC_X")},
    # values that reach run.sh, `docker run -e` and terminals: one plain line
    "env-value-newline": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", env: {V: "a\\ntouch X"}'),
                          "environments[0].env.V: one line without control characters"),
    "env-value-escape": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", env: {V: "\\e[2J"}'),
                         "environments[0].env.V: one line without control characters"),
    "env-value-nul": (BASE.replace('tensorflow: "2.15.0"', 'tensorflow: "2.15.0", env: {V: "a\\0b"}'),
                      "environments[0].env.V: one line without control characters"),
}


def _write(tmp_path: Path, case: str) -> Path:
    doc, _ = HOSTILE[case]
    path = tmp_path / "m.yaml"
    path.write_bytes(doc if isinstance(doc, bytes) else doc.encode())
    return path


def _run_cli(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})
    return proc, time.monotonic() - started


def _one_clear_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_matrix_is_one_clear_error_within_seconds(tmp_path, case):
    path = _write(tmp_path, case)
    cache = tmp_path / "cache"
    proc, took = _run_cli("run", str(path), "--engine", "venv", "--results", str(tmp_path / "results"),
                          env={"HARNESS_CACHE": str(cache)})
    _one_clear_error(proc, str(path), HOSTILE[case][1])
    assert took < SECONDS + 2, f"{case} took {took:.1f} s"  # + the interpreter's start-up
    assert not (tmp_path / "results").exists() and not cache.exists(), "nothing may be written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


# The cases the YAML parser itself meets (nesting, aliases, keys, numbers, encoding): checked on PyYAML
# releases whose parsers differ (6.0.4 bundles libyaml 0.2.6, which limits nesting itself), not only on
# the one the lock installs.
YAML_CASES = ("non-utf8", "deep-flow", "deep-flow-40", "deep-block", "bomb-in-batch-sizes", "recursive-alias",
              "duplicate-key", "huge-integer")
PYYAML_RELEASES = ("6.0.3", "6.0.4")


@pytest.fixture(scope="session", params=PYYAML_RELEASES)
def pyyaml_release(request, tmp_path_factory) -> dict:
    """Variables that make `python -m harness` import this PyYAML release (checked, not assumed)."""
    target = tmp_path_factory.mktemp(f"pyyaml-{request.param}")
    subprocess.run([installer.uv(), "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", "--python",
                    sys.executable, "--target", str(target), f"pyyaml=={request.param}"], check=True, timeout=600,
                   env=installer.variables())
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}
    seen = subprocess.run([sys.executable, "-c", "import yaml; print(yaml.__version__)"], capture_output=True,
                          text=True, env={**os.environ, **env}, check=True).stdout.strip()
    assert seen == request.param, seen
    return env


@pytest.mark.parametrize("case", YAML_CASES)
def test_hostile_yaml_is_one_clear_error_on_each_pyyaml_release(tmp_path, case, pyyaml_release):
    path = _write(tmp_path, case)
    proc, took = _run_cli("list", str(path), env={**pyyaml_release, "HARNESS_CACHE": str(tmp_path / "cache")})
    _one_clear_error(proc, str(path), HOSTILE[case][1])
    assert took < SECONDS + 2, f"{case} took {took:.1f} s"


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_matrix_through_the_loader_is_a_matrix_error(tmp_path, case):
    path = _write(tmp_path, case)
    started = time.monotonic()
    with pytest.raises(MatrixError) as info:
        matrix.load(path)
    assert time.monotonic() - started < SECONDS, case
    assert len(str(info.value)) < 5000, "the message stays short whatever the document holds"
    assert all(line.startswith(str(path)) for line in str(info.value).splitlines())


def test_a_fifo_and_a_folder_as_the_matrix(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    proc, took = _run_cli("list", str(fifo))
    _one_clear_error(proc, str(fifo), "not a regular file")
    assert took < SECONDS + 2, "a FIFO must not be waited on"
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    proc, _ = _run_cli("list", str(folder))
    _one_clear_error(proc, str(folder), "is a folder")


def test_many_repeats_expand_in_linear_time(tmp_path):
    """20,000 cells (1,000 repeats x 20 batch sizes): the duplicate-id check was quadratic."""
    path = tmp_path / "many.yaml"
    path.write_text(BASE + "repeats: 1000\nbatch_sizes: [" + ", ".join(str(b) for b in range(1, 21)) + "]\n")
    started = time.monotonic()
    assert len(matrix.load(path).cells) == 20_000
    assert time.monotonic() - started < SECONDS


def test_rules_times_cells_stay_within_seconds(tmp_path):
    """Each rule was tried against each cell, pattern by pattern: a matrix well within the
    limits (100,000 cells, 600 rules) took more than a minute to list."""
    path = tmp_path / "rules.yaml"
    path.write_text(rules_matrix(per_rule=4))
    proc, took = _run_cli("list", str(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout.splitlines()) == 100_000
    assert took < SECONDS + 2, f"{took:.1f} s"
    m = matrix.load(path)
    assert [c.expect is not None for c in m.cells[:20_000:1000]] == [c.batch_size in range(10, 20)
                                                                     for c in m.cells[:20_000:1000]]


def test_rules_past_the_work_limit_are_one_clear_error(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(rules_matrix(per_rule=8))
    proc, took = _run_cli("list", str(path))
    _one_clear_error(proc, str(path), "pattern tests", f"more than {matrix.MAX_MATCH_WORK}")
    assert took < SECONDS + 2


def test_a_file_named_like_no_valid_run_needs_a_name(tmp_path):
    path = tmp_path / "my matrix.yaml"
    path.write_text(BASE)
    with pytest.raises(MatrixError, match="the file name 'my matrix' is not a valid name.*set 'name:'"):
        matrix.load(path)
    path.write_text(BASE + "name: my-matrix\n")
    assert matrix.load(path).name == "my-matrix"


@pytest.mark.parametrize("name, ok", [
    ("tf1.12-keras2.2.4", True), ("gru-2x32", True), ("fault-silent_exit", True), ("a+b", True), ("_x", True),
    ("..", False), ("a..b", False), (".hidden", False), ("-rf", False), ("a/b", False), ("/", False),
    ("a b", False), ("a\nb", False), ("a\0b", False), ("é", False), ("x" * 64, True), ("x" * 65, False), ("", False),
])
def test_the_name_rule(name, ok):
    assert names.is_valid(name) is ok


def _cell(env_name: str, workload_name: str) -> Cell:
    return Cell(environment=Environment(name=env_name, python="3.11"), parallelism=Parallelism(),
                workload=Workload(name=workload_name, model="fault", params={"fault": "exception"}),
                batch_size=1, epochs=1, repeat=0)


def test_a_name_that_slips_past_validation_still_cannot_leave_its_root(tmp_path):
    root = tmp_path / "results"
    with pytest.raises(UserError, match="outside"):
        ResultStore(root, "../../escaped")
    store = ResultStore(root, "run")
    with pytest.raises(UserError, match="outside"):
        store.final_dir(_cell("..", "..x"))
    venvs = VenvEngine(root=tmp_path / "venvs")
    with pytest.raises(UserError, match="outside"):
        venvs.location(Environment(name="x", python="3.11/../../../x"))
    # a venv's folder is named for what it holds: an environment's name never enters it
    assert venvs.location(Environment(name="../../x", python="3.11")).parent == tmp_path / "venvs"
    with pytest.raises(UserError, match="outside"):
        inside(tmp_path, Path("/etc"))
    assert inside(tmp_path, tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not any(tmp_path.iterdir()), "nothing is created on the way"


# -- the results folder -------------------------------------------------------------------
def _results_error(tmp_path: Path, results: str, *words: str) -> None:
    cache = tmp_path / "cache"
    proc, _ = _run_cli("run", "matrices/faults.yaml", "--engine", "venv", "--results", results,
                       env={"HARNESS_CACHE": str(cache)})
    _one_clear_error(proc, "--results", results, *words)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not cache.exists(), "nothing is built before the results folder is known to be usable"


def test_results_folder_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    _results_error(tmp_path, str(tmp_path / "file"), "is a file")
    _results_error(tmp_path, str(tmp_path / "file" / "below"), "cannot write there")


def test_results_folder_in_proc(tmp_path):
    _results_error(tmp_path, "/proc/harness-results", "cannot write there")


def _mount_tmpfs(where: Path, options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a filesystem needs root")
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


def test_results_folder_on_a_read_only_filesystem(tmp_path):
    ro = tmp_path / "ro"
    _mount_tmpfs(ro, "ro,size=1m")
    try:
        _results_error(tmp_path, str(ro / "results"), "Read-only file system")
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_results_folder_on_a_full_filesystem(tmp_path):
    full = tmp_path / "full"
    _mount_tmpfs(full, "size=1m")
    try:
        _results_error(tmp_path, str(full / "results"), "MiB")
    finally:
        subprocess.run(["umount", str(full)], check=True)


def test_bundle_folder_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    proc, _ = _run_cli("repro", "tf2.15/fault-segfault/*", "--matrix", "matrices/faults.yaml", "--engine", "venv",
                       "--out", str(tmp_path / "file"), env={"HARNESS_CACHE": str(tmp_path / "cache")})
    _one_clear_error(proc, "--out", "is a file")
    assert not (tmp_path / "cache").exists()
