"""Matrix validation and expansion, through the CLI a user types."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from harness import matrix
from harness.errors import MatrixError

from .conftest import ROOT, harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

GOOD = """
environments:
  - {python: "3.6", tensorflow: "1.12.0", keras: "2.2.4", packages: ["numpy<1.17"]}
  - {python: "3.11", tensorflow: "2.15.0"}
workloads:
  - {model: rnn, cell: gru, layers: 2, units: 32}
  - {model: convnet}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: make_parallel, devices: 3, device_kind: cpu}
batch_sizes: [128, 256]
repeats: 2
"""


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_expansion_ids_are_readable_stable_and_complete(tmp_path):
    m = matrix.load(write(tmp_path, GOOD))
    ids = [c.id for c in m.cells]
    assert len(ids) == 2 * 2 * 2 * 2 * 2
    assert "tf1.12-keras2.2.4/gru-2x32/none-c1/b128/r0" in ids
    assert "tf2.15/convnet/make_parallel-c3/b256/r1" in ids
    assert ids == [c.id for c in matrix.load(write(tmp_path, GOOD, "again.yaml")).cells]


def test_reseed_gives_each_repeat_its_own_training_seed_on_the_same_data(tmp_path):
    """`reseed: true`: repeat r trains from seed + r (its weights and batch order), the data still drawn
    with the seed, so the repeats measure the accuracy's spread; without it every repeat is the seed's."""
    plain = matrix.load(write(tmp_path, GOOD + "seed: 7\n"))
    reseeded = matrix.load(write(tmp_path, GOOD + "seed: 7\nreseed: true\n", "reseeded.yaml"))
    assert {c.spec()["training_seed"] for c in plain.cells} == {7}
    by_repeat = {c.repeat: c.spec() for c in reseeded.cells if c.id.startswith("tf2.15/convnet/none-c1/b128/")}
    assert {r: s["training_seed"] for r, s in by_repeat.items()} == {0: 7, 1: 8}
    assert {s["seed"] for s in by_repeat.values()} == {7}
    assert [c.id for c in plain.cells] == [c.id for c in reseeded.cells]  # the ids do not move


def test_include_and_exclude_rules(tmp_path):
    text = GOOD + """
include:
  - {environment: "tf1.*"}
exclude:
  - {wrapper: make_parallel, batch_size: 256}
"""
    ids = [c.id for c in matrix.load(write(tmp_path, text)).cells]
    assert all(i.startswith("tf1.12") for i in ids)
    assert not any("make_parallel" in i and "/b256/" in i for i in ids)
    assert any("make_parallel" in i and "/b128/" in i for i in ids)


def test_requirements_follow_the_stack(tmp_path):
    envs = matrix.load(write(tmp_path, GOOD)).environments
    assert envs[0].requirements == ["tensorflow==1.12.0", "keras==2.2.4", "numpy<1.17"]
    assert envs[0].api == "standalone"
    assert envs[1].requirements == ["tensorflow-cpu==2.15.0"]
    assert envs[1].api == "tf.keras"


@pytest.mark.parametrize("text, where, what", [
    (GOOD.replace("tensorflow: \"2.15.0\"", "tensorflw: \"2.15.0\""), "environments[1].tensorflw",
     "did you mean 'tensorflow'"),
    (GOOD.replace("repeats: 2", "repeats: two"), "repeats", "expected an integer"),
    (GOOD.replace("\"1.12.0\"", "\"1.12.banana\""), "environments[0].tensorflow", "not a valid version"),
    (GOOD.replace("layers: 2", "layers: [2]"), "workloads[0].layers", "expected an integer"),
    (GOOD.replace("wrapper: none", "wrapper: multi_gpu"), "parallelism[0].wrapper",
     "did you mean 'multi_gpu_model'"),
    (GOOD.replace("python: \"3.11\"", "python: 3.10"), "environments[1].python", "write the version as a string"),
])
def test_malformed_matrix_names_file_key_and_expectation(tmp_path, text, where, what):
    path = write(tmp_path, text)
    with pytest.raises(MatrixError) as info:
        matrix.load(path)
    message = str(info.value)
    assert str(path) in message and where in message and what in message, message


def test_cli_reports_yaml_syntax_error_without_traceback(tmp_path):
    path = write(tmp_path, "environments:\n  - {python: \"3.6\"\n workloads: [\n")
    proc = harness("list", str(path))
    assert proc.returncode == 2
    # the harness's words and the place (the line and column PyYAML marks; its own sentence is not ours)
    place = re.search(r"line (\d+), column \d+: YAML syntax error: \S", proc.stderr)
    assert str(path) in proc.stderr and place, proc.stderr
    assert 1 <= int(place.group(1)) <= 4, proc.stderr   # a line of the 3-line document (or its end)
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cli_unknown_key_exits_2_naming_key(tmp_path):
    path = write(tmp_path, GOOD.replace("batch_sizes:", "batch_size:"))
    proc = harness("run", str(path), "--engine", "venv", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert "batch_size: unknown key; did you mean 'batch_sizes'?" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists(), "nothing may run before the matrix validates"


def test_list_prints_one_cell_id_per_line():
    proc = harness("list", "matrices/smoke.yaml", check=True)
    lines = proc.stdout.splitlines()
    assert lines and all(line.count("/") == 4 for line in lines)
    assert "tf1.12-keras2.2.4/gru-2x32/none-c1/b128/r0" in lines


def test_every_shipped_matrix_validates():
    """The project's matrices and the examples' (those with version ranges ask the package index)."""
    for path in sorted((ROOT / "matrices").glob("*.yaml")) + sorted((ROOT / "examples").glob("*/*.yaml")):
        assert matrix.load(path).cells, path
