"""Saying which Keras runs: keras_api, tensorflow_package and env: in the matrix, the variables
a cell process gets, the check that the running Keras is the one asked, and the bundle recipe
that replays forced pins. Table-driven and fast; the real environments are in
tests/test_held_out.py."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from harness import matrix, stacks
from harness.cells import Cell, Environment, Parallelism, Workload
from harness.environments import recipes
from harness.errors import MatrixError
from harness.workloads import compat

from .conftest import harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick


def env_of(text: str, tmp_path) -> Environment:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(f"""
        environments:
          - {text}
        workloads: [{{model: rnn, cell: gru, layers: 1, units: 8}}]
        """))
    return matrix.load(path).environments[0]


@pytest.mark.parametrize("entry, name, api, requirements", [
    ('{python: "3.6", tensorflow: "1.12.0", keras: "2.2.4"}', "tf1.12-keras2.2.4", "standalone",
     ["tensorflow==1.12.0", "keras==2.2.4"]),
    ('{python: "3.11", tensorflow: "2.15.1", keras_api: standalone, force: ["keras==2.2.4"]}',
     "tf2.15.1-standalone", "standalone", ["tensorflow-cpu==2.15.1"]),
    ('{python: "3.11", tensorflow: "2.21.0", keras_api: tf_keras}', "tf2.21-tf_keras", "tf_keras",
     ["tensorflow==2.21.0", "tf_keras~=2.21.0"]),
    ('{python: "3.11", tensorflow: "2.21.0", keras_api: tf_keras, keras: "2.20.1"}', "tf2.21-tf_keras2.20.1",
     "tf_keras", ["tensorflow==2.21.0", "tf_keras==2.20.1"]),
    ('{python: "3.11", tensorflow: "2.21.0", keras_api: tf_keras, force: ["tf_keras==2.15.1"]}',
     "tf2.21-tf_keras", "tf_keras", ["tensorflow==2.21.0"]),
    ('{python: "3.6", tensorflow: "1.12.0", tensorflow_package: tensorflow-gpu, keras: "2.2.4"}',
     "tf1.12-keras2.2.4-tensorflow-gpu", "standalone", ["tensorflow-gpu==1.12.0", "keras==2.2.4"]),
    ('{python: "3.11", tensorflow: "2.15.0", tensorflow_package: tensorflow-cpu}', "tf2.15", "tf.keras",
     ["tensorflow-cpu==2.15.0"]),
    ('{python: "3.11", tensorflow: "2.16.1", keras: "3.3.3", backend: jax}', "tf2.16.1-keras3.3.3-jax", "keras3",
     ["tensorflow-cpu==2.16.1", "keras==3.3.3", "jax"]),
    ('{python: "3.11", tensorflow: "2.15.0", keras_api: tf.keras, keras: "2.15.0"}',
     "tf2.15-keras2.15.0-tf.keras", "tf.keras", ["tensorflow-cpu==2.15.0"]),
])
def test_what_an_environment_installs_and_is_called(tmp_path, entry, name, api, requirements):
    env = env_of(entry, tmp_path)
    assert (env.name, env.api, env.requirements) == (name, api, requirements)


@pytest.mark.parametrize("entry, where, what", [
    ('{python: "3.11", tensorflow: "2.15.0", keras_api: tfkeras}', "keras_api", "did you mean 'tf_keras'"),
    ('{python: "3.11", tensorflow: "2.15.0", keras_api: tf_keras}', "keras_api", "TensorFlow >= 2.16"),
    ('{python: "3.11", tensorflow: "2.21.0", keras_api: standalone, keras: "3.3.3"}', "keras", "is Keras 3"),
    ('{python: "3.11", tensorflow: "2.21.0", keras_api: keras3, keras: "2.15.0"}', "keras", "Keras 3 pin"),
    ('{python: "3.11", tensorflow: "2.15.0", keras_api: standalone, backend: jax}', "backend", "only for Keras 3"),
    ('{python: "3.11", tensorflow: "2.15.0", tensorflow_package: tensorflow-rocm}', "tensorflow_package",
     "expected one of tensorflow, tensorflow-gpu"),
    ('{python: "3.11", tensorflow: "2.15.0", env: {lower: "1"}}', "env.lower", "upper case"),
    ('{python: "3.11", tensorflow: "2.15.0", env: {LD_PRELOAD: "/x.so"}}', "env.LD_PRELOAD", "cannot be set"),
    ('{python: "3.11", tensorflow: "2.15.0", env: {TF_USE_LEGACY_KERAS: "1"}}', "env.TF_USE_LEGACY_KERAS",
     "keras_api / backend set it"),
    ('{python: "3.11", tensorflow: "2.15.0", env: {TF_CPP_MIN_LOG_LEVEL: 2}}', "env.TF_CPP_MIN_LOG_LEVEL",
     'quote it: "2"'),
    ('{python: "3.11", tensorflow: "2.15.0", env: [A]}', "env", "expected a mapping"),
])
def test_bad_keras_choices_name_the_key(tmp_path, entry, where, what):
    with pytest.raises(MatrixError) as err:
        env_of(entry, tmp_path)
    text = str(err.value)
    assert f"environments[0].{where}" in text and what in text, text


def test_a_bad_choice_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "m.yaml").write_text('environments: [{python: "3.11", tensorflow: "2.15.0", env: {PATH: "/x"}}]\n'
                                     "workloads: [{model: dense}]\n")
    proc = harness("list", str(tmp_path / "m.yaml"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "environments[0].env.PATH" in proc.stderr


def test_variables_are_decided_in_one_place_and_never_inherited():
    inherited = {"PATH": "/bin", "TF_USE_LEGACY_KERAS": "1", "KERAS_BACKEND": "torch"}
    plain = Environment(name="a", python="3.11", tensorflow="2.15.0")
    assert plain.variables(inherit=inherited) == {"PATH": "/bin"}
    legacy = Environment(name="b", python="3.11", tensorflow="2.21.0", keras_api="tf_keras",
                         env=(("TF_CPP_MIN_LOG_LEVEL", "2"),))
    assert legacy.variables() == {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"}
    k3 = Environment(name="c", python="3.11", keras="3.3.3", backend="jax")
    assert k3.variables(inherit=inherited) == {"PATH": "/bin", "KERAS_BACKEND": "jax"}
    described = legacy.describe()
    assert described["env"] == {"TF_CPP_MIN_LOG_LEVEL": "2"}
    assert described["variables"]["TF_USE_LEGACY_KERAS"] == "1"


def test_env_changes_the_cell_but_not_what_is_installed(tmp_path):
    a = env_of('{python: "3.11", tensorflow: "2.15.0"}', tmp_path)
    b = env_of('{python: "3.11", tensorflow: "2.15.0", env: {TF_CPP_MIN_LOG_LEVEL: "2"}}', tmp_path)
    assert a.content_hash() == b.content_hash() and a.describe() != b.describe()


@pytest.mark.parametrize("asked, version, module, ran, mismatch", [
    ("standalone", "2.2.4", "keras", "2.2.4", None),
    ("standalone", None, "keras", "3.12.0", "asked standalone keras (any version), ran keras3 3.12.0 (module keras)"),
    ("standalone", "2.2.4", "keras.api._v2.keras", "2.15.0",
     "asked standalone keras 2.2.4, ran tf.keras 2.15.0 (module keras.api._v2.keras)"),
    ("standalone", "2.2.4", "keras", "2.2.5",
     "asked standalone keras 2.2.4, ran standalone keras 2.2.5 (module keras)"),
    ("tf.keras", None, "keras.api._v2.keras", "2.15.0", None),
    ("tf.keras", None, "tensorflow.python.keras.api._v1.keras", "2.1.6-tf", None),
    ("tf.keras", None, "keras._tf_keras.keras", "3.12.0", None),  # tf.keras *is* Keras 3 on TF >= 2.16
    ("tf.keras", None, "tf_keras.api._v2.keras", "2.21.0", "asked tf.keras (any version), ran tf_keras 2.21.0 "
                                                            "(module tf_keras.api._v2.keras)"),
    ("tf_keras", None, "tf_keras.api._v2.keras", "2.21.0", None),
    ("tf_keras", None, "keras._tf_keras.keras", "3.12.0",
     "asked tf_keras (any version), ran keras3 3.12.0 (module keras._tf_keras.keras)"),
    ("keras3", "3.3.3", "keras", "3.3.3", None),
    ("keras3", "3.3", "keras", "3.3.0", None),
])
def test_keras_mismatch(asked, version, module, ran, mismatch):
    assert compat.keras_mismatch(asked, version, module, ran) == mismatch


@pytest.mark.parametrize("api, keras, force, asked", [
    ("standalone", None, ("keras==2.2.4",), "2.2.4"),
    ("standalone", "2.2.4", (), "2.2.4"),
    ("tf_keras", None, ("tf-keras==2.15.1",), "2.15.1"),
    ("tf.keras", None, ("keras==2.2.4",), None),
    ("keras3", "3.3.3", ("numpy==2.1.3",), "3.3.3"),
])
def test_the_asked_keras_version(api, keras, force, asked):
    assert stacks.asked_keras_version(api, keras, force) == asked


FREEZE = "absl-py==2.1.0\nKeras==2.2.4\nnumpy==1.26.4\ntensorflow-cpu==2.15.1\ntf_keras @ file:///x.whl\n"


def test_the_bundle_lock_leaves_the_forced_pins_to_forced_txt():
    lock = recipes.lock_without_forced(FREEZE, ("keras==2.2.4", "tf-keras==2.15.1"))
    lines = lock.splitlines()
    assert lines[0].startswith("# pip freeze") and "forced.txt" in lines[0]
    assert lines[1:] == ["absl-py==2.1.0", "numpy==1.26.4", "tensorflow-cpu==2.15.1"]
    assert recipes.lock_without_forced(FREEZE, ()).splitlines()[1:] == FREEZE.splitlines()


def test_run_sh_replays_the_making_forced_pins_and_variables():
    env = Environment(name="tf2.15.1-standalone", python="3.11", tensorflow="2.15.1", keras_api="standalone",
                      force=("keras==2.2.4",), env=(("TF_CPP_MIN_LOG_LEVEL", "2"), ("WEIRD", "a b'c")))
    cell = Cell(environment=env, workload=Workload(name="w", model="dense"), parallelism=Parallelism(),
                batch_size=8, epochs=1, repeat=0)
    script = recipes.venv_script(cell, has_lock=True)
    lock_at = script.index("pip install -q --no-deps -r environment/requirements.lock")
    assert script.index("--no-deps -r environment/forced.txt") > lock_at
    assert "unset KERAS_BACKEND TF_USE_LEGACY_KERAS" in script
    exports = "\n".join(line for line in script.splitlines() if line.startswith("export "))
    shown = subprocess.run(["bash", "-c", exports + '\nprintf "%s|%s" "$TF_CPP_MIN_LOG_LEVEL" "$WEIRD"'],
                           capture_output=True, text=True, check=True).stdout
    assert shown == "2|a b'c"   # the values arrive exactly, whatever the quoting
