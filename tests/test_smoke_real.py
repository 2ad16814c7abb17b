"""End to end, as a user runs it: the smoke matrix with real TensorFlow, in
virtualenvs and in containers; then the same command again, which must reuse
every environment and re-run nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.store import iter_results

from .conftest import ROOT, containers_under, harness

EXPECTED = {
    "tf1.12-keras2.2.4/gru-2x32/none-c1/b128/r0": ("3.6.", "1.12.0", "2.2.4"),
    "tf2.15/gru-2x32/none-c1/b128/r0": ("3.11.", "2.15.0", "2.15.0"),
    "tf2.21-keras3.15.1/gru-2x32/none-c1/b128/r0": ("3.11.", "2.21.0", "3.15.1"),
}
CHANCE = 0.25  # the smoke workload has 4 classes


def check_results(root: Path, engine: str, cells: list[str]) -> dict[str, dict]:
    results = {r["cell"]: r for _, r in iter_results(root)}
    assert sorted(results) == sorted(cells)
    for cell in cells:
        r = results[cell]
        python, tf, keras = EXPECTED[cell]
        assert r["status"] == "ok", (cell, r["error"], r["logs"]["stderr_tail"][-2000:])
        assert r["engine"] == engine
        assert r["seen"]["python"].startswith(python), r["seen"]
        assert (r["seen"]["tensorflow"], r["seen"]["keras"]) == (tf, keras), r["seen"]
        assert r["metrics"]["val_accuracy"] > CHANCE + 0.1, r["metrics"]
        assert len(r["epochs"]) == 3 and r["timing"]["steady_samples_per_sec"] > 0
        assert r["provenance"]["matrix_sha256"] and r["provenance"]["workloads_sha256"]
        folder = root / "smoke" / cell
        for name in ("spec.json", "events.jsonl", "result.json", "stdout.log", "stderr.log"):
            assert (folder / name).exists(), name
        events = [json.loads(line)["event"] for line in (folder / "events.jsonl").read_text().splitlines()]
        assert events[0] == "start" and events.count("epoch") == 3 and events[-1] == "end"
    return results


@pytest.mark.tf
def test_smoke_matrix_in_virtualenvs(tmp_path):
    # Run from another folder with a relative --results, as a user in their own project would.
    args = ["run", str(ROOT / "matrices" / "smoke.yaml"), "--engine", "venv", "--results", "results"]
    proc = harness(*args, cwd=tmp_path, check=True)
    check_results(tmp_path / "results", "venv", list(EXPECTED))
    assert "\nCompatibility: " in proc.stdout and "\nstack " in proc.stdout, "the run ends with its tables"
    assert "\\_" not in proc.stdout, "in plain text, not Markdown"
    again = harness(*args, "--quiet", cwd=tmp_path, check=True)   # as a driver running it per stack does
    assert "3 of 3 cells already have results" in again.stdout
    assert "Compatibility: " not in again.stdout and "results: " in again.stdout, "no table: the driver says it once"
    assert "built" not in again.stdout and "reused" not in again.stdout, "no environment is even prepared"


@pytest.mark.tf
def test_missing_interpreter_makes_cells_unavailable(tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text('environments: [{python: "3.99", tensorflow: "2.15.0"}]\nworkloads: [{model: rnn}]\n')
    proc = harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    [(_, r)] = list(iter_results(tmp_path / "r"))
    assert r["status"] == "unavailable" and "no Python 3.99 interpreter" in r["reason"]
    assert r["metrics"] == {} and r["timing"]["steady_samples_per_sec"] is None


@pytest.mark.tf
@pytest.mark.docker
def test_smoke_matrix_in_containers(tmp_path, docker_client):
    cells = [c for c in EXPECTED if not c.startswith("tf2.21")]
    args = ["run", "matrices/smoke.yaml", "--engine", "docker", "--results", str(tmp_path),
            "--only", "tf1.12*", "--only", "tf2.15*"]
    harness(*args, check=True)
    results = check_results(tmp_path, "docker", cells)
    for r in results.values():
        prov = r["provenance"]
        assert prov["image"].startswith("sha256:") and prov["base_route"] in ("local", "pulled", "offline")
        assert docker_client.images.get(prov["image_tag"]).id == prov["image"]
    assert not containers_under(docker_client, tmp_path)
    again = harness(*args, check=True)
    assert "2 of 2 cells already have results" in again.stdout and "built" not in again.stdout
