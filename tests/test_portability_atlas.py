"""The published portability grid over the atlas's stacks says what its how-to says.

docs/how-to/model-portability.md states where Keras 2's files stop loading on Keras 3 and the ways
across; each statement is checked here against the committed data (docs/portability/atlas), so a
republished grid that no longer bears one out turns this red instead of leaving the page wrong.
Quick: it reads one file."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from harness.portability import judge, publish
from harness.portability.table import line

from .conftest import ROOT

pytestmark = pytest.mark.quick

DATA = ROOT / "docs" / "portability" / "atlas" / "portability.json"
MODELS = ("gru", "lstm", "convnet", "custom")


@pytest.fixture(scope="module")
def grid():
    data = json.loads(DATA.read_text())
    stacks = data["stacks"]
    by = {(r["writer"], r["reader"], r["model"], r["format"]): r for r in publish.expanded(data)}
    lines = {n: line(s) for n, s in stacks.items()}
    keras2 = [n for n, li in lines.items() if li in ("standalone", "tf.keras")]
    keras3 = [n for n, li in lines.items() if li.startswith("keras3-")]   # on TensorFlow, JAX and PyTorch alike
    tf_keras = [n for n, li in lines.items() if li == "tf_keras"]
    assert keras2 and tf_keras and {lines[n] for n in keras3} == {"keras3-tensorflow", "keras3-jax", "keras3-torch"}
    return by, stacks, keras2, keras3, tf_keras


def _tf(stacks: dict, name: str) -> tuple[int, int]:
    return tuple(int(x) for x in (stacks[name].get("tensorflow") or "0.0").split(".")[:2])


def _verdicts(by: dict, writers: list[str], readers: list[str], models, fmt: str, key=None) -> Counter:
    return Counter((key(w, r) if key else r["verdict"]) for w in writers for rd in readers for m in models
                   if (r := by.get((w, rd, m, fmt))) is not None)


def test_keras2_hdf5_recurrent_models_are_refused_by_every_keras3_and_convnets_load_from_tf_2_3(grid):
    by, stacks, keras2, keras3, _ = grid
    assert _verdicts(by, keras2, keras3, ("gru", "lstm"), "h5") == Counter(
        {judge.REFUSES: len(keras2) * len(keras3) * 2})
    convnets = _verdicts(by, keras2, keras3, ("convnet",), "h5", lambda w, r: (_tf(stacks, w) >= (2, 3), r["verdict"]))
    assert set(convnets) == {(True, judge.SAME), (False, judge.REFUSES)}, convnets


def test_tf_keras_loads_every_keras2_hdf5_model_and_savedmodel_the_same(grid):
    by, _, keras2, _, tf_keras = grid
    assert set(_verdicts(by, keras2, tf_keras, MODELS, "h5")) == {judge.SAME}
    assert set(_verdicts(by, keras2, tf_keras, MODELS, "savedmodel")) == {judge.SAME}


def test_keras3_on_tf_reads_savedmodels_of_tf_2_11_on_with_tf_saved_model_load_and_refuses_earlier_ones(grid):
    by, stacks, keras2, keras3, _ = grid
    on_tf = [n for n in keras3 if stacks[n].get("tensorflow")]
    found = _verdicts(by, keras2, on_tf, MODELS, "savedmodel",
                      lambda w, r: (_tf(stacks, w) >= (2, 11), r["verdict"], r.get("way")))
    assert set(found) == {(True, judge.SAME, "tf.saved_model.load"), (False, judge.REFUSES, None)}, found


def test_weights_of_tf2_load_the_same_into_keras3_and_tf1s_gru_refuses_and_lstm_differs(grid):
    by, stacks, keras2, keras3, _ = grid
    found = _verdicts(by, keras2, keras3, MODELS, "weights-h5",
                      lambda w, r: (_tf(stacks, w) >= (2, 0), r["model"], r["verdict"]))
    assert {(tf2, m) for tf2, m, v in found if v != judge.SAME} == {(False, "gru"), (False, "lstm")}, found
    assert {v for tf2, m, v in found if not tf2 and m in ("gru", "lstm")} == {judge.REFUSES, judge.DIFFERS}


def test_every_file_that_predicts_differently_is_lstm_weights_with_tf1_on_one_side(grid):
    by, stacks, *_ = grid
    differs = [r for r in by.values() if r["verdict"] == judge.DIFFERS]
    assert differs
    assert {(r["model"], r["format"]) for r in differs} == {("lstm", "weights-h5")}
    assert all([_tf(stacks, r["writer"])[0] == 1, _tf(stacks, r["reader"])[0] == 1].count(True) == 1
               for r in differs), [r for r in differs if _tf(stacks, r["writer"])[0] != 1]


def test_tf1_lstm_weights_on_every_keras3_are_mended_by_keras2s_hard_sigmoid_and_not_by_its_name():
    groups = sorted((DATA.parent / "evidence").glob("lstm-weights-h5-load-weights-*-to-keras3-*.json"))
    assert {p.stem.rsplit("-", 1)[1] for p in groups} == {"tensorflow", "jax", "torch"}, groups
    for path in groups:
        ev = json.loads(path.read_text())
        # x/6 + 1/2 against 0.2x + 1/2: 1/12 apart at x = 2.5, where Keras 2's reaches 1
        apart = ev["activations_otherwise"]
        assert abs(apart["hard_sigmoid"] - 1 / 12) < 1e-4, (path.name, apart)
        tried = {bool(t["settings"][0].get("definition")): t["mends"] for t in ev["settings_back"]
                 if [s["key"] for s in t["settings"]] == ["recurrent_activation"]}
        assert tried == {False: False, True: True}, (path.name, ev["settings_back"])


EVIDENCE = DATA.parent / "evidence" / "changes"
NARROWED = {   # the how-to's "changes narrowed to their release": change id -> (package, first release)
    "reader:keras3.12.4-jax->keras3.13.2-jax:refuses->same": ("keras", "3.13.0"),
    "reader:keras3.12.4-torch->keras3.13.2-torch:refuses->same": ("keras", "3.13.0"),
    "reader:keras3.14.1-jax->keras3.15.1-jax:refuses->same": ("keras", "3.15.0"),
    "reader:keras3.14.1-torch->keras3.15.1-torch:refuses->same": ("keras", "3.15.0"),
    "reader:keras3.2.1-jax->keras3.3.3-jax:refuses->same": ("keras", "3.3.0"),
    "reader:keras3.2.1-torch->keras3.3.3-torch:refuses->same": ("keras", "3.3.0"),
    "reader:keras3.3.3-jax->keras3.4.1-jax:refuses->same": ("keras", "3.4.0"),
    "reader:keras3.3.3-torch->keras3.4.1-torch:refuses->same": ("keras", "3.4.0"),
    "reader:tf1.10-keras2.2.2->tf1.10.1-keras2.2.4:refuses->same": ("keras", "2.2.3"),
    "reader:tf1.14->tf1.15.5:refuses->same": ("tensorflow", "1.15.0"),
    "reader:tf1.15.5->tf2.0.4-tensorflow:differs->same": ("tensorflow", "2.0.0"),
    "reader:tf1.15.5->tf2.0.4-tensorflow:refuses->same": ("tensorflow", "2.0.0"),
    "reader:tf1.15.5->tf2.0.4-tensorflow:same->differs": ("tensorflow", "2.0.0"),
    "reader:tf1.15.5->tf2.0.4-tensorflow:same->refuses": ("tensorflow", "2.0.0"),
    "reader:tf2.0.4-tensorflow->tf2.1.4-tensorflow:same->refuses": ("tensorflow", "2.1.0"),
    "reader:tf2.10.1->tf2.11.1:same->refuses": ("tensorflow", "2.11.0"),
    "reader:tf2.13.1->tf2.14.1:same->refuses": ("tensorflow", "2.14.0"),
    "reader:tf2.14.1->tf2.15.1:refuses->same": ("tensorflow", "2.15.0"),
    "reader:tf2.14.1->tf2.15.1:same->refuses": ("tensorflow", "2.15.0"),
    "reader:tf2.2.3->tf2.3.4:refuses->same": ("tensorflow", "2.3.0"),
    "reader:tf2.20-keras3->tf2.21-keras3:refuses->same": ("keras", "3.13.0"),
    "reader:tf2.9.3->tf2.10.1:refuses->same": ("tensorflow", "2.10.0"),
    "writer:keras3.12.4-jax->keras3.13.2-jax:same->refuses": ("keras", "3.13.0"),
    "writer:keras3.12.4-torch->keras3.13.2-torch:same->refuses": ("keras", "3.13.0"),
    "writer:keras3.14.1-jax->keras3.15.1-jax:same->refuses": ("keras", "3.15.0"),
    "writer:keras3.14.1-torch->keras3.15.1-torch:same->refuses": ("keras", "3.15.0"),
    "writer:keras3.6.0-jax->keras3.7.0-jax:same->refuses": ("keras", "3.7.0"),
    "writer:keras3.6.0-torch->keras3.7.0-torch:same->refuses": ("keras", "3.7.0"),
    "writer:tf1.10-keras2.2.2->tf1.10.1-keras2.2.4:refuses->same": ("keras", "2.2.3"),
    "writer:tf1.10-keras2.2.2->tf1.10.1-keras2.2.4:same->refuses": ("keras", "2.2.3"),
    "writer:tf1.15.5->tf2.0.4-tensorflow:differs->same": ("tensorflow", "2.0.0"),
    "writer:tf1.15.5->tf2.0.4-tensorflow:refuses->same": ("tensorflow", "2.0.0"),
    "writer:tf1.15.5->tf2.0.4-tensorflow:same->differs": ("tensorflow", "2.0.0"),
    "writer:tf1.15.5->tf2.0.4-tensorflow:same->refuses": ("tensorflow", "2.0.0"),
    "writer:tf2.10.1->tf2.11.1:refuses->same": ("tensorflow", "2.11.0"),
    "writer:tf2.11.1->tf2.12.1:same->refuses": ("tensorflow", "2.12.0"),
    "writer:tf2.12.1->tf2.13.1:refuses->same": ("tensorflow", "2.13.0"),
    "writer:tf2.12.1->tf2.13.1:same->refuses": ("tensorflow", "2.13.0"),
    "writer:tf2.13.1->tf2.14.1:same->refuses": ("tensorflow", "2.14.0"),
    "writer:tf2.14.1->tf2.15.1:refuses->same": ("tensorflow", "2.15.0"),
    "writer:tf2.14.1->tf2.15.1:same->refuses": ("tensorflow", "2.15.0"),
    "writer:tf2.17.1-keras3->tf2.18.1-keras3:same->refuses": ("keras", "3.7.0"),
    "writer:tf2.2.3->tf2.3.4:refuses->same": ("tensorflow", "2.3.0"),
    "writer:tf2.2.3->tf2.3.4:same->refuses": ("tensorflow", "2.3.0"),
    "writer:tf2.20-keras3->tf2.21-keras3:same->refuses": ("keras", "3.13.0"),
}


def test_each_narrowed_change_the_how_to_names_has_its_evidence_and_the_data_still_has_the_change():
    found = {}
    for path in EVIDENCE.glob("*.json"):
        ev = json.loads(path.read_text())
        found[ev["change"]["id"]] = (ev["package"], ev.get("first_bad") or ev.get("first_good"))
    assert {c: found.get(c) for c in NARROWED} == NARROWED
    changes = {c["id"] for c in json.loads((DATA.parent / "changes.json").read_text())["records"]}
    assert set(NARROWED) <= changes, set(NARROWED) - changes


def test_tf_2_21s_keras3_change_is_narrowed_with_tensorflow_held_at_the_older_stacks_release():
    """TF 2.21 requires Keras 3.12 or later, so the grid's older Keras (3.11) cannot be tried beside
    it: the evidence is the search of Keras with TensorFlow 2.20.0 held, and says so."""
    for side, verdicts in (("reader", "refuses->same"), ("writer", "same->refuses")):
        name = f"{side}-tf2.20-keras3-tf2.21-keras3-{verdicts.replace('->', '-')}.json"
        ev = json.loads((EVIDENCE / name).read_text())
        assert ev["pinned"] == {"tensorflow": "2.20.0"} and ev["versions"][0] == "3.11.2", ev
        assert "tensorflow 2.20.0 held" in ev["sentence"], ev["sentence"]


def test_keras3_on_jax_and_on_pytorch_cannot_know_a_savedmodel(grid):
    by, stacks, keras2, keras3, _ = grid
    for backend in ("jax", "torch"):
        on = [n for n in keras3 if stacks[n].get("backend") == backend]
        assert len(on) == 16 and set(_verdicts(by, keras2, on, MODELS, "savedmodel")) == {judge.UNKNOWN}, backend


def test_a_keras_archive_written_on_jax_loads_on_pytorch_by_load_model_only_where_torch_compile_runs(grid):
    """JAX keeps `jit_compile=True` in the archive, and Keras 3 over PyTorch compiles what it loads:
    Keras 3.0-3.4 and 3.7-3.8 (a torch whose compile refuses the stack's Python) read every such
    archive only with `compile=False`, 3.5-3.6 the GRU and LSTM ones, 3.9 on all by `load_model`."""
    by, stacks, _, keras3, _ = grid
    jax = [n for n in keras3 if stacks[n].get("backend") == "jax"]
    torch = [n for n in keras3 if stacks[n].get("backend") == "torch"]
    found = {(int(stacks[rd]["keras"].split(".")[1]), m, r["way"]) for w in jax for rd in torch for m in MODELS
             if (r := by.get((w, rd, m, "keras"))) is not None and r["verdict"] == judge.SAME}
    expected = {(minor, m, "load_model" if minor >= 9 or (minor in (5, 6) and m in ("convnet", "custom"))
                 else "load_model compile=False") for minor in range(16) for m in MODELS}
    assert found == expected, found ^ expected
