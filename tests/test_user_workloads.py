"""Bring your own workload (issue 22), for real: the user's own model factory and
script, written into a temporary folder as a user would, run in real environments
(TF 1.12 / Keras 2.2.4 on Python 3.6, TF 2.15, Keras 3 -- the smoke matrix's
stacks, so their virtualenvs and images are reused) with the venv engine and with
Docker; statuses, the user's own line in signatures, reported metrics in the report,
a repro bundle that replays with the user's code, chains between environments,
value expectations, and bad user code answered with the user's file and line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.names import file_name
from harness.results.store import iter_results

from .conftest import ROOT, harness

STACKS = """\
environments:
  - python: "3.6"
    tensorflow: "1.12.0"
    keras: "2.2.4"
    packages: ["numpy<1.17", "h5py<3"]
  - python: "3.11"
    tensorflow: "2.15.0"
    packages: ["numpy<2"]
  - python: "3.11"
    tensorflow: "2.21.0"
    keras: "3.15.1"
"""
TF1, TF2, K3 = "tf1.12-keras2.2.4", "tf2.15", "tf2.21-keras3.15.1"
# The stacks each engine runs the user's code on. Every stack on the venv engine (what differs between
# stacks is proven there); in containers one stack, the promise being the engine's -- mounts, the
# read-only code, the same statuses and lines -- not the stack's. The other stacks' images are built
# and run in containers by the smoke and chain tests.
STACKS_OF = {"venv": (TF1, TF2, K3), "docker": (TF2,)}

MODEL = '''\
import numpy as np


def build(keras, units=16):
    inputs = keras.layers.Input(shape=(12, 6))
    x = keras.layers.GRU(units)(inputs)
    return keras.models.Model(inputs, keras.layers.Dense(3, activation="softmax")(x))


def data(units=16):
    rng = np.random.RandomState(3)
    x = rng.normal(size=(768, 12, 6)).astype("float32")
    y = np.eye(3, dtype="float32")[x[:, :, :3].mean(axis=1).argmax(axis=1)]
    return x, y
'''

# The crash is on line 9 of the user's script, under a function of theirs.
SCRIPT = '''\
import sys
from workloads.metrics import report

report("answer", 42)
report("half", 0.5)


def explode():
    raise RuntimeError("the user's own failure")


if sys.argv[1:] == ["crash"]:
    explode()
'''


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _results(run_dir: Path) -> dict[str, dict]:
    return {data["cell"]: data for _, data in iter_results(run_dir)}


def _project(tmp: Path) -> Path:
    """A user's project: a model factory, a reproduction script, and a matrix naming both."""
    _write(tmp, {"mymodel/model.py": MODEL, "repro/bug.py": SCRIPT, "byo.yaml": STACKS + textwrap.dedent("""\
        workloads:
          - {name: mine, model: user, path: ./mymodel, build: "model:build", data: "model:data",
             params: {units: 16}, learning_rate: 0.01}
          - {name: fine, script: ./repro/bug.py}
          - {name: crashes, script: ./repro/bug.py, args: [crash]}
        parallelism:
          - {wrapper: none, devices: 1}
          - {wrapper: make_parallel, devices: 2}
        exclude:
          - {workload: [fine, crashes], wrapper: make_parallel}
        epochs: 2
        timeouts: {wall: 600, progress: 300}
        expect:
          - {workload: fine, metric: answer, equals: 42}
          - {workload: mine, metric: parameters, same_as: tf2.15,
             why: "Keras 2.2's GRU has reset_after=False: fewer biases"}
        """)})
    return tmp / "byo.yaml"


@pytest.fixture(scope="module", params=["venv", "docker"])
def ran(request, tmp_path_factory):
    engine = request.param
    if engine == "docker":
        request.getfixturevalue("docker_client")
    tmp = tmp_path_factory.mktemp(f"byo-{engine}")
    matrix = _project(tmp)
    only = [a for stack in STACKS_OF[engine] for a in ("--only", f"{stack}/*")]
    proc = harness("run", str(matrix), "--engine", engine, "--results", str(tmp / "results"), *only, timeout=3000)
    return engine, tmp, matrix, proc, _results(tmp / "results" / "byo")


def test_factory_and_script_run_in_every_stack(ran):
    engine, _, _, proc, results = ran
    assert {r["environment"] for r in results.values()} == set(STACKS_OF[engine])
    for env in STACKS_OF[engine]:
        for label in ("none-c1", "make_parallel-c2"):
            r = results[f"{env}/mine/{label}/b128/r0"]
            assert r["status"] == "ok", (r["cell"], r.get("error"), proc.stdout[-3000:])
            assert r["engine"] == engine
            assert len(r["epochs"]) == 2 and r["metrics"]["val_accuracy"] is not None
            assert r["code"]["kind"] == "factory" and len(r["code"]["sha256"]) == 64
            assert r["provenance"]["code_sha256"] == r["code"]["sha256"]
        par = results[f"{env}/mine/make_parallel-c2/b128/r0"]
        assert par["engagement"] and par["engagement"].get("ran_on") == 2  # proof the 2 devices worked
        fine = results[f"{env}/fine/none-c1/b128/r0"]
        assert fine["status"] == "ok" and fine["metrics"] == {"answer": 42, "half": 0.5}
        assert fine["expectation"]["met"] is True
        crash = results[f"{env}/crashes/none-c1/b128/r0"]
        assert crash["status"] == "error"
        assert crash["error"]["where"] == "bug.py:9 in explode", crash["error"]
        assert crash["error"]["signature"].startswith("exception: RuntimeError at bug.py:9 in explode")
        assert "the user's own failure" in crash["logs"]["stderr_tail"]
        assert crash["metrics"]["answer"] == 42  # what it reported before it failed is kept
    if engine != "venv":
        return  # what follows compares the stacks: the venv engine runs them all
    # the same model has a different parameter count on Keras 2.2 (GRU reset_after=False): a finding
    assert results[f"{TF1}/mine/none-c1/b128/r0"]["parameters"] < results[f"{TF2}/mine/none-c1/b128/r0"]["parameters"]
    assert results[f"{TF2}/mine/none-c1/b128/r0"]["parameters"] == results[f"{K3}/mine/none-c1/b128/r0"]["parameters"]


def test_a_value_that_differs_is_a_failed_expectation(ran):
    engine, tmp, _, proc, results = ran
    if engine != "venv":
        pytest.skip("a comparison of stacks: the venv engine runs them all")
    tf1 = results[f"{TF1}/mine/none-c1/b128/r0"]
    assert tf1["expectation"]["met"] is False
    value = tf1["expectation"]["values"][0]
    assert value["got"] == tf1["parameters"] and value["want"] == results[f"{TF2}/mine/none-c1/b128/r0"]["parameters"]
    assert results[f"{K3}/mine/none-c1/b128/r0"]["expectation"]["met"] is True
    assert proc.returncode == 1
    assert f"expectation not met: {TF1}/mine/none-c1/b128/r0: parameters {tf1['parameters']} !=" in proc.stdout
    out = tmp / "site"
    harness("report", str(tmp / "results"), "--out", str(out), check=True)
    md = (out / "report.md").read_text()
    assert "Control cells that drifted" in md and f"parameters = {tf1['parameters']}" in md


def test_the_report_shows_what_the_script_reported(ran):
    engine, tmp, _, _, _ = ran
    out = tmp / "site-metrics"
    harness("report", str(tmp / "results"), "--out", str(out), check=True)
    md = (out / "report.md").read_text()
    assert "### Reported by fine" in md and "| answer | half |" in md and "| 42 | 0.5 |" in md
    if len(STACKS_OF[engine]) > 1:
        assert list((out / "plots").glob("reported-*answer*.png"))  # several stacks reported it: one plot
    html = (out / "index.html").read_text()
    assert "Reported by crashes" in html


def test_changing_the_code_reruns_only_its_cells(ran):
    engine, tmp, matrix, _, before = ran
    if engine != "venv":
        pytest.skip("once is enough")
    shutil.copytree(tmp / "results" / "byo", tmp / "before" / "byo")
    script = tmp / "repro" / "bug.py"
    script.write_text(script.read_text().replace('report("half", 0.5)', 'report("half", 0.25)'))
    proc = harness("run", str(matrix), "--engine", engine, "--results", str(tmp / "results"), "--only", "tf2.15/*",
                   timeout=1800)
    assert "2 cell(s) changed since their stored result and run again" in proc.stdout, proc.stdout
    after = _results(tmp / "results" / "byo")
    assert after[f"{TF2}/fine/none-c1/b128/r0"]["metrics"]["half"] == 0.25
    assert after[f"{TF2}/mine/none-c1/b128/r0"]["finished"] == before[f"{TF2}/mine/none-c1/b128/r0"]["finished"]
    fine = f"{TF2}/fine/none-c1/b128/r0"
    assert after[fine]["code"]["sha256"] != before[fine]["code"]["sha256"]
    compare = harness("report", "compare", str(tmp / "before" / "byo"), str(tmp / "results" / "byo"), check=True)
    assert "Reported numbers that changed" in compare.stdout, compare.stdout
    assert f"| {TF2}/fine/none-c1/b128 | half | 0.5 | 0.25 |" in compare.stdout, compare.stdout


def test_repro_bundle_of_the_crash_replays_with_the_users_code(ran, tmp_path):
    engine, tmp, matrix, _, _ = ran
    if engine != "docker":
        pytest.skip("the Docker bundle replays without building (the image is there); the venv one reinstalls TF")
    from harness.engines.docker_build import find_cli
    out = tmp_path / "bundles"
    cell = f"{TF2}/crashes/none-c1/b128/r0"
    proc = harness("repro", cell, "--matrix", str(matrix), "--engine", engine, "--out", str(out), check=True)
    assert "1/1 attempts failed" in proc.stdout and "at bug.py:9 in explode" in proc.stdout
    bundle = out / file_name(cell)
    staged = list((bundle / "user").glob("*/bug.py"))
    assert len(staged) == 1 and "the user's own failure" in staged[0].read_text()
    clean = tmp_path / "elsewhere"
    shutil.copytree(bundle, clean, ignore=shutil.ignore_patterns("attempts"))
    shutil.rmtree(tmp / "repro")  # the user's own folder is gone: the bundle must not need it
    try:
        run = subprocess.run(["bash", "run.sh"], cwd=clean, capture_output=True, text=True, timeout=900,
                             env={**os.environ, "DOCKER": find_cli()})
    finally:
        _write(tmp, {"repro/bug.py": SCRIPT})
    assert run.returncode == 3, run.stdout + run.stderr[-2000:]
    assert "RuntimeError: the user's own failure" in run.stderr
    assert '"outcome": "error"' in run.stdout


# -- chains across environments ---------------------------------------------------------
CHAIN = '''\
import os
import sys

from workloads.metrics import report


def keras_module():
    if os.environ.get("KERAS_BACKEND"):
        import keras
        return keras
    import tensorflow as tf
    return tf.keras


if sys.argv[1] == "save":
    keras = keras_module()
    inputs = keras.layers.Input(shape=(5,))
    model = keras.models.Model(inputs, keras.layers.Dense(2)(inputs))
    model.save_weights(os.path.join(os.environ["HARNESS_OUTPUT"], "w.weights.h5"))
    with open(os.path.join(os.environ["HARNESS_OUTPUT"], "note.txt"), "w") as fh:
        fh.write("from the producer")
    report("parameters", model.count_params())
elif sys.argv[1] == "load":
    keras = keras_module()
    inputs = keras.layers.Input(shape=(5,))
    model = keras.models.Model(inputs, keras.layers.Dense(2)(inputs))
    model.load_weights(os.path.join(os.environ["HARNESS_INPUT"], "w.weights.h5"))
    with open(os.path.join(os.environ["HARNESS_INPUT_SAVE"], "note.txt")) as fh:
        assert fh.read() == "from the producer"
    try:
        open(os.path.join(os.environ["HARNESS_INPUT"], "note.txt"), "a").write("changed")
        report("could_write_input", 1)
    except (IOError, OSError):
        report("could_write_input", 0)
    report("parameters", model.count_params())
else:
    sys.exit(2)
'''


@pytest.mark.parametrize("engine", ["venv", "docker"])
def test_a_model_saved_by_tf2_is_loaded_by_keras3_through_a_chain(engine, tmp_path, request):
    if engine == "docker":
        request.getfixturevalue("docker_client")
    _write(tmp_path, {"code/chain.py": CHAIN, "chain.yaml": STACKS + textwrap.dedent("""\
        workloads:
          - {name: save, script: code/chain.py, args: [save]}
          - {name: load, script: code/chain.py, args: [load], needs: {workload: save, environment: tf2.15}}
          - {name: broken-save, script: code/chain.py, args: [nonsense]}
          - {name: later, script: code/chain.py, args: [save], after: {workload: save, environment: tf2.15}}
          - {name: orphan, script: code/chain.py, args: [load],
             needs: {workload: broken-save, environment: tf2.15, as: save}}
        include:
          - {environment: tf2.15, workload: [save, broken-save]}
          - {environment: tf2.21-keras3.15.1, workload: [load, orphan, later]}
        expect:
          - {workload: load, metric: parameters, equals: 12}
        """)})
    proc = harness("run", str(tmp_path / "chain.yaml"), "--engine", engine, "--results", str(tmp_path / "r"),
                   timeout=1800)
    results = _results(tmp_path / "r" / "chain")
    save, load = results[f"{TF2}/save/none-c1/b128/r0"], results[f"{K3}/load/none-c1/b128/r0"]
    assert save["status"] == "ok" and load["status"] == "ok", (load.get("error"), proc.stdout[-3000:])
    assert load["needs"][0]["cell"] == save["cell"] and load["needs"][0]["files"] == 2
    assert load["metrics"]["parameters"] == 12 and load["expectation"]["met"] is True
    if engine == "docker":  # mounted read-only: not even root writes it
        assert load["metrics"]["could_write_input"] == 0
    handed = tmp_path / "r" / "chain" / load["cell"] / "inputs" / "save" / "note.txt"
    assert handed.stat().st_mode & 0o222 == 0  # read-only files, whatever the engine
    later = results[f"{K3}/later/none-c1/b128/r0"]  # after: the order and the producer's success, no files
    assert later["status"] == "ok" and later["needs"][0]["files"] is None
    assert not (tmp_path / "r" / "chain" / later["cell"] / "inputs" / "save").exists()
    assert sorted(save["feeds"]) == sorted([load["cell"], later["cell"]])
    orphan = results[f"{K3}/orphan/none-c1/b128/r0"]
    assert orphan["status"] == "unavailable"
    assert orphan["reason"].startswith(f"needs {TF2}/broken-save/none-c1/b128/r0, which ended error")
    assert results[f"{TF2}/broken-save/none-c1/b128/r0"]["error"]["where"].startswith("chain.py:")


# -- bad user code: a clear answer, with the user's file and line ----------------------
def test_bad_user_code_is_refused_at_load_time_with_file_and_key(tmp_path):
    _write(tmp_path, {"m/model.py": "def build():\n    pass\n", "s/x.py": "print(1)\n"})
    cases = {
        "{name: a, model: user, path: ./nowhere, build: 'model:build', data: 'model:data'}":
            "workloads[0].path: ",
        "{name: a, model: user, path: ./m, build: 'nomodule:build', data: 'model:build'}":
            "workloads[0].build: no module 'nomodule'",
        "{name: a, model: user, path: ./m, build: 'model:build', data: 'model:load'}":
            "workloads[0].data: model.py defines no 'load' at its top level",
        "{name: a, model: user, path: ./m, build: 'model.build', data: 'model:build'}":
            "workloads[0].build: expected 'module:function'",
        "{name: a, model: user, path: ./m, data: 'model:build'}": "workloads[0].build: required key is missing",
        "{name: a, script: ./s/missing.py}": "workloads[0].script: ",
        "{name: a, script: ./s/x.py, path: ./m}": "lies outside its 'path:' folder",
        "{name: a, script: ./s/x.py, needs: nothing}": "no cell of workload 'nothing' in environment 'tf2.15'",
        "{name: a, script: ./s/x.py, needs: a}": "'needs' makes a cycle",
        "{name: a, script: ./s/x.py, args: [[1]]}": "workloads[0].args[0]: expected a string or a number",
        "{name: a, model: user, path: ./m, bulid: 'model:build', data: 'model:build'}": "did you mean 'build'",
    }
    head = 'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\nworkloads:\n  - '
    for workload, wanted in cases.items():
        (tmp_path / "bad.yaml").write_text(head + workload + "\n")
        proc = harness("list", str(tmp_path / "bad.yaml"), timeout=60)
        assert proc.returncode == 2, (workload, proc.stdout, proc.stderr)
        assert wanted in proc.stderr and "Traceback" not in proc.stderr, (workload, proc.stderr)
        assert str(tmp_path / "bad.yaml") in proc.stderr
    for rule, wanted in {"{metric: x, equals: 1, same_as: tf2.15}": "exactly one of",
                         "{metric: x, same_as: tf9}": "no environment named 'tf9'",
                         "{metric: x, equals: 1, within: -1}": "expected a tolerance >= 0"}.items():
        (tmp_path / "bad.yaml").write_text(head + "{name: a, script: ./s/x.py}\nexpect:\n  - " + rule + "\n")
        proc = harness("list", str(tmp_path / "bad.yaml"), timeout=60)
        assert proc.returncode == 2 and wanted in proc.stderr, (rule, proc.stderr)


def test_code_outside_the_matrix_folder_is_allowed_and_recorded(tmp_path):
    _write(tmp_path, {"elsewhere/x.py": "print(1)\n", "project/m.yaml": (
        'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
        "workloads: [{name: a, script: ../elsewhere/x.py}]\n")})
    from harness import matrix
    cell = matrix.load(tmp_path / "project" / "m.yaml").cells[0]
    assert cell.spec()["workload"]["code"]["outside_matrix_folder"] is True
    assert len(cell.spec()["workload"]["code"]["sha256"]) == 64


BAD_FACTORIES = {
    "nothing.py": "def build(keras):\n    x = 1\n    return None\n\n\ndef data():\n    return [], []\n",
    "shape.py": ("import numpy as np\n\n\ndef build(keras):\n    i = keras.layers.Input(shape=(4,))\n"
                 "    return keras.models.Model(i, keras.layers.Dense(2)(i))\n\n\n"
                 "def data():\n    return np.zeros((10, 5)), np.zeros((10, 2))\n"),
    "broken.py": "def build(keras):\n    return keras\n\ndef data(:\n    pass\n",
    "needs_pkg.py": "import not_installed_anywhere\n\n\ndef build(keras):\n    pass\n\n\ndef data():\n    pass\n",
}
SEGV = "import ctypes\n\n\ndef boom():\n    ctypes.string_at(0)\n\n\nboom()\n"


def test_bad_factories_are_errors_with_the_users_file_and_line(tmp_path):
    _write(tmp_path, {**{f"f/{name}": text for name, text in BAD_FACTORIES.items()}, "s/segv.py": SEGV})
    workloads = "".join(f"  - {{name: {n[:-3].replace('_', '-')}, model: user, path: ./f, build: '{n[:-3]}:build', "
                        f"data: '{n[:-3]}:data'}}\n" for n in BAD_FACTORIES)
    (tmp_path / "bad.yaml").write_text('environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
                                       "workloads:\n" + workloads + "  - {name: segv, script: ./s/segv.py}\n"
                                       "epochs: 1\n")
    proc = harness("run", str(tmp_path / "bad.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"),
                   timeout=1800)
    assert "Traceback" not in proc.stdout
    results = _results(tmp_path / "r" / "bad")
    want = {"nothing": ("nothing.py:1 in build", "nothing:build returned NoneType, not a Keras model"),
            "shape": ("shape.py:9 in data", "but the model built by shape:build takes (None, 4)"),
            "broken": ("broken.py:4", "SyntaxError"),
            "needs-pkg": ("needs_pkg.py:1 in <module>", "not_installed_anywhere")}
    for name, (where, text) in want.items():
        r = results[f"{TF2}/{name}/none-c1/b128/r0"]
        assert r["status"] == "error", r
        assert r["error"]["where"] == where, (name, r["error"])
        assert text in r["error"]["signature"] or text in r["error"]["message"], (name, r["error"])
        assert f"at {where}" in r["error"]["signature"]
    segv = results[f"{TF2}/segv/none-c1/b128/r0"]  # a crash: the line from faulthandler's stack
    assert segv["status"] == "crash" and segv["error"]["where"] == "segv.py:5 in boom", segv["error"]
    assert segv["error"]["signature"].startswith("signal at segv.py:5 in boom: killed by SIGSEGV")


def test_repro_command_passes_its_exit_status_on(tmp_path):
    _write(tmp_path, {"s/x.py": "print(1)\n", "m.yaml": (
        'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\n'
        "workloads: [{name: a, script: ./s/x.py}]\n")})
    common = ["repro", f"{TF2}/a/*", "--matrix", str(tmp_path / "m.yaml"), "--engine", "venv", "--out",
              str(tmp_path / "b")]
    proc = harness(*common, "--command", "python user/*/x.py && exit 7", timeout=600)
    assert proc.returncode == 7 and "1\n" in proc.stdout, proc.stdout + proc.stderr
    piped = subprocess.run([sys.executable, "-m", "harness", *common, "--shell"],
                           input="python -c 'import sys; sys.exit(5)'\n", capture_output=True, text=True,
                           timeout=600, cwd=ROOT)
    assert piped.returncode == 5, piped.stdout + piped.stderr
    pytest.importorskip("nox")  # the same through nox, which would turn any failure into 1
    through_nox = subprocess.run([sys.executable, "-m", "nox", "-s", "repro", "--", *common[1:], "--shell"],
                                 input="python -c 'import sys; sys.exit(6)'\n", capture_output=True, text=True,
                                 timeout=900, cwd=ROOT)
    assert through_nox.returncode == 6, through_nox.stdout + through_nox.stderr[-2000:]


def test_the_code_hash_ignores_results_caches_and_hidden_folders(tmp_path):
    """A code folder that also holds the results (path: . in a project) must keep its hash
    while runs write there, or every run would re-run every cell."""
    from harness import usercode
    _write(tmp_path, {"model.py": "x = 1\n"})
    before = usercode.load(tmp_path, tmp_path).sha256
    _write(tmp_path, {"out/run/.locks/a.lock": "", "out/run/cell/result.json": "{}", ".git/HEAD": "x",
                      "__pycache__/model.cpython-311.pyc": "x", ".venv/bin/python": "x"})
    assert usercode.load(tmp_path, tmp_path).sha256 == before
    _write(tmp_path, {"helper.py": "y = 2\n"})
    assert usercode.load(tmp_path, tmp_path).sha256 != before


def test_a_scripts_status_comes_from_how_it_ended(tmp_path):
    """exit 0 / sys.exit(n) / a hang / running out of memory: ok, error, timeout, oom."""
    _write(tmp_path, {"s/ends.py": textwrap.dedent('''\
        import sys
        import time

        how = sys.argv[1]
        if how == "exit":
            sys.exit(4)
        if how == "hang":
            time.sleep(600)
        if how == "memory":
            hog = bytearray(2 << 30)
        print("done")
        '''), "m.yaml": textwrap.dedent("""\
        environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]
        workloads:
          - {name: fine, script: s/ends.py, args: [fine]}
          - {name: exits, script: s/ends.py, args: [exit]}
          - {name: hangs, script: s/ends.py, args: [hang]}
          - {name: hogs, script: s/ends.py, args: [memory]}
        timeouts: {wall: 60, progress: 6}
        memory_limit: 512m
        """)})
    harness("run", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"), timeout=900)
    results = _results(tmp_path / "r" / "m")
    got = {cid.split("/")[1]: r for cid, r in results.items()}
    assert got["fine"]["status"] == "ok" and "done" in got["fine"]["logs"]["stdout_tail"]
    assert got["exits"]["status"] == "error"
    assert got["exits"]["error"]["where"] == "ends.py:6 in <module>", got["exits"]["error"]
    assert "exited with status 4" in got["exits"]["error"]["message"]
    assert got["hangs"]["status"] == "timeout", got["hangs"]
    assert got["hogs"]["status"] == "oom", got["hogs"]["error"]
    assert got["hogs"]["error"]["where"] == "ends.py:10 in <module>"


def test_the_local_engine_runs_the_users_code_too(tmp_path):
    """`--engine local`: an interpreter that already holds the stack (here the TF 2.15 virtualenv
    the venv engine made) runs the factory and the scripts as the other engines do."""
    from harness.cells import Environment
    from harness.engines.venv import VenvEngine

    matrix = _project(tmp_path)
    with VenvEngine() as engine:
        prepared = engine.prepare(Environment(name=TF2, python="3.11", tensorflow="2.15.0", packages=("numpy<2",)),
                                  tmp_path / "build.log")
        python = engine.interpreter(prepared)
    if "stack_imported" in prepared.provenance:  # built by this release: its stack imported once, at build
        assert prepared.provenance["stack_imported"] == ["numpy", "tensorflow", "tensorflow.keras"]
        assert list(Path(prepared.handle).glob("lib/python3.11/site-packages/tensorflow/__pycache__/*.pyc"))
    proc = harness("run", str(matrix), "--engine", "local", "--python", f"3.11={python}", "--only", f"{TF2}/*",
                   "--results", str(tmp_path / "results"), timeout=1800)
    results = _results(tmp_path / "results" / "byo")
    assert len(results) == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {r["engine"] for r in results.values()} == {"local"}
    for label in ("none-c1", "make_parallel-c2"):
        r = results[f"{TF2}/mine/{label}/b128/r0"]
        assert r["status"] == "ok" and r["code"]["kind"] == "factory", r.get("error")
    assert results[f"{TF2}/fine/none-c1/b128/r0"]["metrics"] == {"answer": 42, "half": 0.5}
    crash = results[f"{TF2}/crashes/none-c1/b128/r0"]
    assert crash["status"] == "error" and crash["error"]["where"] == "bug.py:9 in explode", crash["error"]


def test_a_model_factory_forks_warm_and_gives_what_it_gives_fresh(ran, tmp_path):
    """A factory's module is imported in the cell, after the fork: its cells launch warm like the
    harness's own models, with the same answer as a fresh run. A script always starts fresh. The
    fresh side is the module run's: a cell alone in its launcher group there starts fresh."""
    engine, _, _, _, module = ran
    if engine != "venv":
        pytest.skip("the fresh side is the venv engine's module run")
    fresh = module[f"{TF2}/mine/none-c1/b128/r0"]
    assert fresh["status"] == "ok" and fresh["warmth"]["launch"] == "fresh", fresh["warmth"]
    _write(tmp_path, {"mymodel/model.py": MODEL, "warm.yaml": textwrap.dedent("""\
        name: byo
        environments:
          - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
        workloads:
          - {name: mine, model: user, path: ./mymodel, build: "model:build", data: "model:data",
             params: {units: 16}, learning_rate: 0.01}
        epochs: 2
        repeats: 2
        """)})
    proc = harness("run", str(tmp_path / "warm.yaml"), "--engine", "venv", "--results", str(tmp_path / "warm"),
                   timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warm = _results(tmp_path / "warm" / "byo")
    assert "warm" in {r["warmth"]["launch"] for r in warm.values()}, [r["warmth"] for r in warm.values()]
    mine = warm[f"{TF2}/mine/none-c1/b128/r0"]  # TF 2.15 on one core is deterministic: the same bits, forked or not
    assert mine["status"] == "ok" and mine["metrics"] == fresh["metrics"], (mine["metrics"], fresh["metrics"])
    for cell in (f"{TF2}/fine/none-c1/b128/r0", f"{TF2}/crashes/none-c1/b128/r0"):
        w = module[cell]["warmth"]
        assert w["launch"] == "fresh" and "own interpreter" in " ".join(w["notes"]), w


# -- the user's own batched data ---------------------------------------------------------

FEEDS = '''\
import numpy as np


def build(keras):
    inputs = keras.layers.Input(shape=(12, 6))
    x = keras.layers.GRU(8)(inputs)
    return keras.models.Model(inputs, keras.layers.Dense(3, activation="softmax")(x))


def _arrays(rows, seed):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(rows, 12, 6)).astype("float32")
    return x, np.eye(3, dtype="float32")[x[:, :, :3].mean(axis=1).argmax(axis=1)]


def dataset(batch_size):
    import tensorflow as tf
    (x, y), (xv, yv) = _arrays(600, 3), _arrays(150, 4)
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(600, seed=0).batch(batch_size),
            tf.data.Dataset.from_tensor_slices((xv, yv)).batch(batch_size))


def sequence(keras, batch_size):
    base = getattr(keras.utils, "PyDataset", None) or keras.utils.Sequence

    class Rows(base):
        def __init__(self, x, y):
            base.__init__(self)
            self.x, self.y = x, y

        def __len__(self):
            return (len(self.x) + batch_size - 1) // batch_size

        def __getitem__(self, i):
            return self.x[i * batch_size:(i + 1) * batch_size], self.y[i * batch_size:(i + 1) * batch_size]

    return Rows(*_arrays(600, 3)), Rows(*_arrays(150, 4))


def generator(batch_size):
    x, y = _arrays(600, 3)

    def batches():
        while True:
            for i in range(0, len(x), batch_size):
                yield x[i:i + batch_size], y[i:i + batch_size]
    return batches(), _arrays(150, 4)
'''


def test_a_factory_may_feed_its_own_batches(tmp_path):
    """A data function may return a tf.data.Dataset or a Sequence / PyDataset (batched with the
    cell's batch size, which it asks for): fit gets it as it is, the rows of a pass are counted,
    and what cannot be a feed is an error at the user's line."""
    workloads = "".join(f"  - {{name: {n}, model: user, path: ./f, build: 'feeds:build', data: 'feeds:{n}'}}\n"
                        for n in ("dataset", "sequence", "generator"))
    _write(tmp_path, {"f/feeds.py": FEEDS,
                      "feeds.yaml": STACKS + "workloads:\n" + workloads + "batch_sizes: [64]\nepochs: 2\n"})
    proc = harness("run", str(tmp_path / "feeds.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"),
                   timeout=1800)
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
    results = _results(tmp_path / "r" / "feeds")
    for stack in (TF2, K3):
        for feed in ("dataset", "sequence"):
            r = results[f"{stack}/{feed}/none-c1/b64/r0"]
            assert r["status"] == "ok", (stack, feed, r["error"])
            assert r["samples"] == {"train": 600, "validation": 150}, r["samples"]
            assert len(r["epochs"]) == 2 and all(e["samples_per_sec"] > 0 for e in r["epochs"]), r["epochs"]
            assert 0 <= r["metrics"]["val_accuracy"] <= 1
    for stack in (TF1, TF2, K3):
        r = results[f"{stack}/generator/none-c1/b64/r0"]
        assert r["status"] == "error" and r["error"]["where"] == "feeds.py:40 in generator", r["error"]
        assert "generator, which has no length" in r["error"]["message"]
    r = results[f"{TF1}/dataset/none-c1/b64/r0"]
    assert r["status"] == "error" and "TF 1.x" in r["error"]["message"], r["error"]
    assert r["error"]["where"] == "feeds.py:16 in dataset", r["error"]
    # standalone Keras 2.2's fit takes arrays only (fit_generator takes a Sequence): its own error
    r = results[f"{TF1}/sequence/none-c1/b64/r0"]
    assert r["status"] == "error" and "keras/engine/training" in r["error"]["traceback"], r["error"]


def test_a_script_cell_labels_its_stack_as_a_built_in_cell_does(tmp_path):
    """A `script:` cell names its environment's stack as a cell of a built-in model there
    does -- TensorFlow, the Keras of the environment's API, Python -- in its result, the
    report and the terminal's tables, whether the script imported nothing (the versions
    are read, not imported) or TensorFlow alone (which loads Keras 2.15 under TF 2.15 but
    not the standalone Keras of TF 1.12's environment)."""
    from harness.report import analysis
    from harness.results.store import read_all

    two_stacks = STACKS.rsplit("  - python", 1)[0]  # TF 1.12 / Keras 2.2.4 and TF 2.15 / tf.keras
    _write(tmp_path, {"s/plain.py": "print('no framework imported')\n",
                      "s/tf.py": "import tensorflow as tf\nprint(tf.__version__)\n", "m.yaml": two_stacks
                      + textwrap.dedent("""\
        workloads:
          - {name: gru, model: rnn, cell: gru, layers: 1, units: 8, dense: 8, timesteps: 8, features: 4,
             classes: 2, samples: 256}
          - {name: plain, script: s/plain.py}
          - {name: tf, script: s/tf.py}
        parallelism: [{wrapper: none, devices: 1}]
        batch_sizes: [128]
        epochs: 1
        timeouts: {wall: 600, progress: 300}
        """)})
    labels, printed, stacks = {}, {}, {}
    for kind, only in (("built-in", "*/gru/*"), ("script", "*/plain/*"), ("tf-script", "*/tf/*")):  # one per run
        run_dir = tmp_path / kind
        proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(run_dir),
                       "--only", only, timeout=1800)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        printed[kind] = proc.stdout
        results = [result for _, result in read_all([run_dir])]
        assert len(results) == 2 and all(r.status == "ok" for r in results)
        stacks[kind] = analysis.stacks(results)
        labels[kind] = {env: st.label for env, st in stacks[kind].items()}
    assert labels["script"] == labels["tf-script"] == labels["built-in"]
    # every field the report groups an environment's cells by, not only the label's: one stack, counted once
    assert {env: st.seen for env, st in stacks["script"].items()} == \
        {env: st.seen for env, st in stacks["built-in"].items()}
    assert labels["script"][TF1].startswith("TF 1.12.0 · Keras 2.2.4 · Python 3.6.")
    assert labels["script"][TF2].startswith("TF 2.15.0 · tf.keras 2.15.0 · Python 3.11.")
    for kind in printed:  # the terminal's table names each stack so
        assert all(label in printed[kind] for label in labels["built-in"].values()), printed[kind]
    site = tmp_path / "site"  # and so does the report of the three runs together
    harness("report", *(str(tmp_path / kind) for kind in labels), "--out", str(site), check=True)
    md = (site / "report.md").read_text()
    assert all(label in md for label in labels["built-in"].values())
    assert "versions not seen" not in md
