"""Every workload under every wrapper that can run on a CPU, for real, on
virtual CPU devices: TF 1.12 + Keras 2.2.4, TF 2.15 tf.keras, Keras 3 on the
TensorFlow and JAX backends (matrices/wrappers-cpu.yaml). Where a wrapper
cannot run, the matrix says which `unsupported` answer to expect, and why."""

from __future__ import annotations

import pytest

from harness.matrix import load
from harness.results.store import iter_results
from harness.workloads.wrappers import ratio_sizes

from .conftest import ROOT, harness

TF1, TF2 = "tf1.12-keras2.2.4", "tf2.15"
WORKLOADS = ("gru-2x32", "lstm-2x32", "convnet", "maxing", "dense")
CHANCE = {"dense": 0.5}  # binary; the others have 4 classes


@pytest.mark.parametrize("batch, ratios, sizes", [
    (128, [1, 1], [64, 64]),
    (100, [768, 560], [57, 43]),   # seed 001: "58 of the 100 ... 42" by rounding; floor gives 57/43
    (128, [4, 3, 2], [56, 42, 30]),
    (128, [1, 1, 1], [42, 42, 44]),  # the last replica takes the remainder
    (1, [3, 2], [0, 1]),
])
def test_ratio_split_follows_seed_001(batch, ratios, sizes):
    assert ratio_sizes(batch, ratios) == sizes
    assert sum(sizes) == batch


@pytest.fixture(scope="module")
def wrapper_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    proc = harness("run", "matrices/wrappers-cpu.yaml", "--engine", "venv", "--results", str(out), timeout=3600)
    results = {r["cell"]: r for _, r in iter_results(out)}
    return proc, results


def test_every_cell_gives_the_answer_its_matrix_expects(wrapper_results):
    proc, results = wrapper_results
    expected = {c.id for c in load(ROOT / "matrices/wrappers-cpu.yaml").cells}
    assert set(results) == expected
    missed = {cell: (r["status"], (r.get("error") or {}).get("signature") or r.get("reason"))
              for cell, r in results.items() if not r["expectation"]["met"]}
    assert not missed, missed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


RUNNABLE = [(TF1, "ratio-c2-r3_2"), (TF1, "make_parallel-c2"),  # MirroredStrategy is TF 2 only
            (TF2, "ratio-c2-r3_2"), (TF2, "make_parallel-c2"), (TF2, "mirrored-c2")]


@pytest.mark.parametrize("env, wrapper", RUNNABLE)
def test_each_workload_trains_under_each_wrapper(wrapper_results, env, wrapper):
    _, results = wrapper_results
    for workload in WORKLOADS:
        r = results[f"{env}/{workload}/{wrapper}/b128/r0"]
        assert r["status"] == "ok", (r["cell"], r.get("error"))
        assert len(r["placement"]) == 2 and r["placement"][0] != r["placement"][1], r["placement"]
        assert len(r["epochs"]) == 3 and r["timing"]["steady_samples_per_sec"] > 0


@pytest.mark.parametrize("env", [TF1, TF2, "tf2.21-keras3.15.1", "keras3.15.1-jax"])
def test_one_device_baseline_learns_above_chance(wrapper_results, env):
    _, results = wrapper_results
    for cell, r in results.items():
        if cell.startswith(env + "/") and "/none-c1/" in cell:
            workload = cell.split("/")[1]
            assert r["metrics"]["val_accuracy"] > CHANCE.get(workload, 0.25) + 0.05, (cell, r["metrics"])


def test_data_parallel_runs_on_jax_host_devices(wrapper_results):
    _, results = wrapper_results
    for workload in WORKLOADS:
        r = results[f"keras3.15.1-jax/{workload}/data_parallel-c2/b128/r0"]
        assert r["status"] == "ok", (r["cell"], r.get("error"))
        assert r["seen"]["backend"] == "jax" and len(r["seen"]["devices"]) >= 2, r["seen"]


def test_every_engaged_wrapper_shows_two_devices_at_work(wrapper_results):
    """Proof of engagement: every cell that asked two devices and trained says which two did its
    work, and how that was seen -- on every wrapper and stack the matrix runs, read from its one
    run (the trap that trains on one device is tests/test_engagement.py's)."""
    _, results = wrapper_results
    engaged = {c: r for c, r in results.items() if r["parallelism"].get("devices") == 2 and r["status"] == "ok"}
    wrappers = {(r["environment"], r["parallelism"]["wrapper"]) for r in engaged.values()}
    assert {(TF1, "ratio"), (TF1, "make_parallel"), (TF2, "ratio"), (TF2, "mirrored"),
            ("keras3.15.1-jax", "data_parallel")} <= wrappers, wrappers
    for cell, r in engaged.items():
        evidence = r["engagement"]
        assert evidence["asked"] == 2 and evidence["ran_on"] == 2, (cell, evidence)
        assert len(set(evidence["devices"])) == 2, (cell, evidence)
        assert evidence["how"], (cell, evidence)
