"""Proof of engagement, observed for real on virtual CPU devices: the real Keras 3 trap
(clear_session() after DataParallel is set) trains on one of the two devices asked, and is caught
as an error. That every multi-device wrapper shows the devices that did its work is read from the
wrappers matrix's own cells (tests/test_wrappers.py), which record the same evidence."""

from __future__ import annotations

import pytest

from harness.results.store import iter_results

from .conftest import harness

pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    proc = harness("run", "matrices/engagement-cpu.yaml", "--engine", "venv", "--results", str(out), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return {r["cell"]: r for _, r in iter_results(out)}


def test_a_wrapper_that_trains_on_one_device_is_an_error(results):
    (trapped,) = [r for c, r in results.items() if "trapped" in c]
    assert trapped["status"] == "error"
    assert trapped["error"]["signature"].endswith("parallelism not engaged: asked 2, ran on 1")
    assert trapped["engagement"]["ran_on"] == 1
    assert trapped["epochs"], "it did train -- on one device"
    assert trapped["expectation"]["met"]
