"""The comparisons `diverge` prints, on arrays and configurations as the cells write them (the
cells themselves run in tests/test_diverge.py): one spelling per meaning, the first layer above the
floor, a gradient scale told from a change of direction, and a floor that is measured."""

from __future__ import annotations

import numpy as np
import pytest

from harness.investigate import layerdiff
from harness.investigate.layerdiff import Side

pytestmark = pytest.mark.quick

KERAS2_GLOROT = {"class_name": "VarianceScaling",
                 "config": {"scale": 1.0, "mode": "fan_avg", "distribution": "uniform", "seed": None}}
KERAS3_GLOROT = {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": None},
                 "registered_name": None}


def side(cell: str, layers: list[dict], arrays: dict, curve=()) -> Side:
    return Side(cell, {"layers": layers, "curve": list(curve)}, arrays)


def layer(i: int, name: str, config: dict | None = None, mapped: str = "one to one") -> dict:
    return {"index": i, "name": name, "class": "Dense", "config": config or {}, "weights": [], "mapped": mapped}


def test_spellings_that_mean_the_same_are_one():
    a = {"name": "dense", "kernel_initializer": KERAS2_GLOROT, "dtype": "float32", "units": 16}
    b = {"name": "dense_7", "kernel_initializer": KERAS3_GLOROT, "units": 16.0,
         "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}}}
    found = layerdiff.configurations(side("a", [layer(0, "d", a)], {}), side("b", [layer(0, "d", b)], {}))
    assert found["verdict"] == "same", found["differences"]
    b["activation"], a["activation"] = "tanh", "relu"
    found = layerdiff.configurations(side("a", [layer(0, "d", a)], {}), side("b", [layer(0, "d", b)], {}))
    assert [(d["key"], d["reference"], d["other"]) for d in found["differences"]] == [("activation", "relu", "tanh")]


def test_an_axis_spelled_two_ways_is_one_axis_and_only_what_changes_behaviour_is_reported():
    """Issue 54: Conv1D + BatchNormalization + LSTM, Keras 2.2.4 against tf.keras 2.15, reported
    "norm.axis -1 -> [2]" -- one axis of a 3-D input -- and the LSTM's `implementation`, which
    chooses a kernel, not a function. As the two stacks write them (layerwise.py adds the rank)."""
    def layers(norm_axis, lstm: dict, rank=3):
        return [{"index": 0, "name": "norm", "class": "BatchNormalization", "input_rank": rank, "weights": [],
                 "config": {"name": "norm", "axis": norm_axis, "momentum": 0.99, "epsilon": 0.001}},
                {"index": 1, "name": "lstm", "class": "LSTM", "input_rank": rank, "weights": [],
                 "config": {"name": "lstm", "units": 8, "activation": "tanh", **lstm}}]
    keras224 = layers(-1, {"recurrent_activation": "sigmoid", "implementation": 1, "unroll": False})
    tf215 = layers([2], {"recurrent_activation": "sigmoid", "implementation": 2, "unroll": True})
    found = layerdiff.configurations(side("a", keras224, {}), side("b", tf215, {}))
    assert found["verdict"] == "same" and found["only_on_one_side"] == [], found
    tf215[1]["config"]["recurrent_activation"] = "hard_sigmoid"   # a difference that changes what it computes
    tf215[0]["config"]["axis"] = [1]                               # another axis
    found = layerdiff.configurations(side("a", keras224, {}), side("b", tf215, {}))
    differences = [(d["layer"], d["key"]) for d in found["differences"]]
    assert differences == [("norm", "axis"), ("lstm", "recurrent_activation")]


@pytest.mark.parametrize(("a", "b", "rank", "same"), [
    (-1, [2], 3, True), (-1, 2, 3, True), ([-1], [3], 4, True), ([1, -1], [3, 1], 4, True),
    ([1, 2], (2, 1), None, True),
    (2, [2], None, True),          # without a rank, an index and the list of it are still one
    (-1, [2], None, False),        # without a rank, -1 may be any axis: compared as written
    (-1, [1], 3, False), (None, -1, 3, False), (-1, 5, 3, False),
])
def test_axis_spellings_are_made_one_against_the_input_rank(a, b, rank, same):
    assert (layerdiff.one_axis(a, rank) == layerdiff.one_axis(b, rank)) is same


def _three(out_b: list[np.ndarray], grads_b: list[np.ndarray], floor_out=None):
    rng = np.random.RandomState(0)
    outs = [rng.normal(size=(8, 4)).astype("float32") for _ in range(3)]
    grads = [rng.normal(size=(4, 4)) for _ in range(3)]
    layers = [layer(i, f"l{i}") for i in range(3)]

    def arrays(o, g):
        return {**{f"out/{i}": v for i, v in enumerate(o)}, **{f"g0/{i}/0": v for i, v in enumerate(g)},
                **{f"g1/{i}/0": v for i, v in enumerate(g)}}
    return (side("ref", layers, arrays(outs, grads)), side("other", layers, arrays(out_b(outs), grads_b(grads))),
            side("floor", layers, arrays(floor_out(outs) if floor_out else outs, grads)))


def test_the_first_layer_above_the_floor_is_named_and_a_scale_is_told_from_a_turn():
    ref, other, floor = _three(lambda o: [o[0], o[1] * 1.5, o[2] * 1.5], lambda g: [2 * x for x in g])
    fw, bw = layerdiff.forward(ref, other, floor), layerdiff.backward(ref, other, floor)
    assert fw["first"]["layer"] == "l1" and not fw["layers"][0]["above"]
    assert bw["scale"] == pytest.approx(2.0) and bw["departed"] == [0, 1, 2]
    ref, other, floor = _three(lambda o: o, lambda g: [g[0], g[1].T, g[2]])   # a turn, not a scale
    bw = layerdiff.backward(ref, other, floor)
    assert bw["scale"] is None and bw["departed"] == [1] and bw["first"]["layer"] == "l1"


def test_a_difference_within_ten_times_the_measured_floor_is_not_claimed():
    noise = 1e-3   # the stack scatters this much itself (the floor): a 5e-3 difference is within 10x
    ref, other, floor = _three(lambda o: [v * (1 + 5 * noise) for v in o], lambda g: g,
                               floor_out=lambda o: [v * (1 + noise) for v in o])
    fw = layerdiff.forward(ref, other, floor)
    assert fw["verdict"] == "within the floor"
    assert all(r["threshold"] == pytest.approx(10 * r["floor"]) for r in fw["layers"])
    ref, other, floor = _three(lambda o: [v * (1 + 5 * noise) for v in o], lambda g: g)   # a floor of 0
    assert layerdiff.forward(ref, other, floor)["first"]["layer"] == "l0"


def test_training_parts_at_the_first_epoch_above_its_floor():
    curve = [{"epoch": e, "loss": 1.0 / e} for e in (1, 2, 3)]
    other = [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}, {"epoch": 3, "loss": 0.4}]
    found = layerdiff.training(side("a", [], {}, curve), side("b", [], {}, other), side("f", [], {}, curve))
    assert found["first"]["epoch"] == 3 and found["verdict"] == "diverges"
