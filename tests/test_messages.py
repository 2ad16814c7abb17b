"""Messages as a person reads them (issue 31, item 4), from one real run (venv engine): the
terminal's tables in plain text, a metric expectation over a cell that cannot run here is "not
judged here" (not exit 1), class-id labels get the sparse loss on every Keras, and a data()
that refuses a param is named with the rule that params go to both functions."""

from __future__ import annotations

import json

import pytest

from .conftest import harness
from .test_user_workloads import K3, STACKS, TF1, TF2, _results, _write

IDS = '''\
import numpy as np


def build(keras, units=8, **params):
    inputs = keras.layers.Input(shape=(6,))
    x = keras.layers.Dense(units, activation="relu")(inputs)
    return keras.models.Model(inputs, keras.layers.Dense(3, activation="softmax")(x))


def data(units=8, column=False):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(256, 6)).astype("float32")
    y = x[:, :3].argmax(axis=1)
    return x, (y.reshape(-1, 1) if column else y)
'''

REFUSES = '''\
import numpy as np


def build(keras, units=8):
    inputs = keras.layers.Input(shape=(6,))
    return keras.models.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs))


def data():
    return np.zeros((64, 6), "float32"), np.eye(3, dtype="float32")[np.zeros(64, int)]
'''

CRASH = "from workloads.metrics import report\n\nreport('answer', 42)\nraise RuntimeError('lr_kwarg <bad>')\n"
ANSWER = "from workloads.metrics import report\n\nreport('answer', 42)\n"


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("messages")
    _write(tmp, {"f/ids.py": IDS, "f/refuses.py": REFUSES, "s/lr_kwarg.py": CRASH, "s/answer.py": ANSWER,
                 "m.yaml": STACKS + '''\
workloads:
  - {name: ids, model: user, path: ./f, build: "ids:build", data: "ids:data", params: {units: 8}}
  - {name: column, model: user, path: ./f, build: "ids:build", data: "ids:data", params: {column: true}}
  - {name: refuses, model: user, path: ./f, build: "refuses:build", data: "refuses:data", params: {units: 8}}
  - {name: crash, script: ./s/lr_kwarg.py}
  - {name: answer, script: ./s/answer.py}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: mirrored, devices: 2, device_kind: gpu}
exclude:
  - {workload: [column, refuses, crash, answer], environment: [''' + TF1 + ", " + K3 + ''']}
  - {workload: [ids, column, refuses, crash], wrapper: mirrored}
epochs: 1
timeouts: {wall: 600, progress: 300}
expect:
  - {workload: answer, metric: answer, equals: 42}
'''})
    proc = harness("run", str(tmp / "m.yaml"), "--engine", "venv", "--results", str(tmp / "r"), timeout=3000)
    return proc, _results(tmp / "r" / "m")


def test_class_ids_get_the_sparse_loss_on_every_keras(ran):
    proc, results = ran
    for env in (TF1, TF2, K3):
        r = results[f"{env}/ids/none-c1/b128/r0"]
        assert r["status"] == "ok", (env, r.get("error"), proc.stdout[-3000:])
    assert results[f"{TF2}/column/none-c1/b128/r0"]["status"] == "ok"


def test_a_refused_param_names_the_function_the_param_and_the_rule(ran):
    _, results = ran
    r = results[f"{TF2}/refuses/none-c1/b128/r0"]
    assert r["status"] == "error"
    text = json.dumps(r["error"])
    assert "refuses:data" in text and "'units'" in text and "both build() and data()" in text, r["error"]
    assert "**params" in text and r["error"]["where"].startswith("refuses.py:"), r["error"]


def test_the_terminal_tables_are_plain_text(ran):
    proc, results = ran
    assert results[f"{TF2}/crash/none-c1/b128/r0"]["status"] == "error"
    assert "lr_kwarg.py:4 in <module>" in proc.stdout, proc.stdout[-3000:]
    for escape in ("&lt;", "&gt;", "\\_", "\\<", "**error**"):
        assert escape not in proc.stdout, escape


def test_a_metric_over_a_cell_that_cannot_run_here_is_not_judged_here(ran):
    proc, results = ran
    gpu = results[f"{TF2}/answer/mirrored-g2/b128/r0"]
    assert gpu["status"] in ("unsupported", "unavailable")
    assert gpu["expectation"]["judged"] is False and gpu["expectation"]["met"] is None
    assert results[f"{TF2}/answer/none-c1/b128/r0"]["expectation"]["met"] is True
    assert "not judged here" in proc.stdout and "expectation not met" not in proc.stdout, proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
