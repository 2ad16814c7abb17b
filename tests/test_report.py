"""The published report, from a real run: site, Markdown, CSV, JSON, plots,
and a real headless browser reading the site. A crash message full of markup,
pipes and newlines must come out as text everywhere."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import textwrap

import pytest

from harness.report.analysis import compare_runs, spread_of

from .conftest import harness

HOSTILE = "<script>document.title='pwned'</script> | pipe\nsecond line & <b>bold</b>"
MATRIX = textwrap.dedent("""
    name: report-check
    environments:
      - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
    workloads:
      - {model: rnn, cell: gru, layers: 1, units: 16, dense: 8, timesteps: 8, features: 4, classes: 4, samples: 1280}
      - {name: hostile, model: fault, fault: exception, message: %s}
      - {name: segv, model: fault, fault: segfault}
    parallelism:
      - {wrapper: none, devices: 1}
      - {wrapper: ratio, devices: 2}
      - {wrapper: make_parallel, devices: 3}
    batch_sizes: [64, 128]
    epochs: 4
    exclude:
      - {workload: [hostile, segv], wrapper: [ratio, make_parallel]}
      - {workload: [hostile, segv], batch_size: 64}
    """) % json.dumps(HOSTILE)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    (root / "m.yaml").write_text(MATRIX)
    harness("run", str(root / "m.yaml"), "--engine", "venv", "--results", str(root / "results"), timeout=1800)
    proc = harness("report", str(root / "results"), "--out", str(root / "site"), "--markdown",
                   str(root / "docs" / "compat.md"), check=True)
    return root, proc


def test_every_output_is_written(run):
    root, proc = run
    site = root / "site"
    for name in ("index.html", "report.md", "results.csv", "results.json"):
        assert (site / name).stat().st_size > 0, name
    rows = list(csv.DictReader(open(site / "results.csv")))
    data = json.loads((site / "results.json").read_text())
    assert len(rows) == len(data) == 8
    assert {r["status"] for r in rows} == {"ok", "error", "crash"}
    assert len(list((site / "cells").glob("*.html"))) == 8
    pngs = list((site / "plots").glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000 for p in pngs)
    assert (root / "docs" / "compat.md").exists() and list((root / "docs" / "compat-plots").glob("*.png"))


def test_tables_hold_what_the_run_found(run):
    root, _ = run
    md = (root / "site" / "report.md").read_text()
    for title in ("### Compatibility", "### 1 device against N (seed 000)", "### Scaling with the device count",
                  "### Failure families"):
        assert title in md
    assert "crash: signal: killed by SIGSEGV" in md  # the segfault, named
    assert "are incompatible" in md          # make_parallel on 3 devices with batch 64/128


def test_hostile_text_stays_text_in_markdown(run):
    root, _ = run
    md = (root / "site" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    for table in md.split("### ")[1:]:
        lines = [ln for ln in table.splitlines() if ln.startswith("|")]
        widths = {ln.replace("\\|", "").count("|") for ln in lines}
        assert len(widths) <= 1, table[:200]  # no row has more or fewer columns than its header


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
        pytest.fail("Chromium is required here (apt-get install chromium)")
    pytest.skip("no Chromium on this machine (CI installs Debian's chromium)")


def _browse(path):
    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def test_site_opens_in_a_real_browser_without_errors(run):
    root, _ = run
    dom, log = _browse(root / "site" / "index.html")
    assert dom.count("<table") >= 4
    assert "<img" in dom and "cells/" in dom
    assert "CONSOLE" not in log and "Uncaught" not in log, log[-2000:]


def test_browser_shows_the_hostile_message_as_text(run):
    root, _ = run
    page = next((root / "site" / "cells").glob("*hostile*.html"))
    dom, log = _browse(page)
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "<script>" not in dom and "&lt;script&gt;document.title" in dom
    assert "<b>bold</b>" not in dom
    assert "Uncaught" not in log


def test_compare_flags_a_regression_and_its_fix(run, tmp_path):
    root, _ = run
    a = root / "results"
    same = harness("report", "compare", str(a), str(a))
    assert same.returncode == 0 and "0 regressions" in same.stdout
    b = tmp_path / "b"
    shutil.copytree(a, b)
    ok_cell = next(p for p in b.rglob("result.json") if json.loads(p.read_text())["status"] == "ok")
    broken = json.loads(ok_cell.read_text())
    broken.update(status="crash", error={"kind": "signal", "signature": "signal: SIGSEGV", "signal": "SIGSEGV"})
    ok_cell.write_text(json.dumps(broken))
    worse = harness("report", "compare", str(a), str(b))
    assert worse.returncode == 1 and "1 regressions" in worse.stdout
    assert broken["cell"].rsplit("/", 1)[0] in worse.stdout
    better = harness("report", "compare", str(b), str(a))
    assert better.returncode == 0 and "1 fixes" in better.stdout


def test_time_changes_inside_the_noise_are_not_reported():
    def result(seconds):
        return {"cell": "e/w/none-c1/b1/r0", "status": "ok", "epochs": [{"seconds": 9.0}] +
                [{"seconds": s} for s in seconds]}
    steady = compare_runs([result([1.0, 1.2, 0.9])], [result([1.1, 1.15, 1.05])])
    assert not steady["slower"] and not steady["faster"]
    slow = compare_runs([result([1.0, 1.05, 0.95])], [result([1.5, 1.6, 1.55])])
    assert len(slow["slower"]) == 1
    assert spread_of([1, 2, 3]).fmt(1) == "2.0 [1.0-3.0] (noisy)"


def test_seed_comparison_flags_degraded_and_slower():
    from harness.report.analysis import seed_comparison

    def result(label, devices, seconds, val):
        return {"cell": f"e/w/{label}/b128/r0", "status": "ok", "batch_size": 128, "epochs_asked": 4,
                "parallelism": {"label": label, "devices": devices, "wrapper": label.split("-")[0]},
                "metrics": {"val_accuracy": val, "accuracy": val},
                "epochs": [{"seconds": 9.0}] + [{"seconds": s} for s in seconds]}
    rows = seed_comparison([result("none-g1", 1, [1.0, 1.1, 0.9], 0.80),
                            result("multi_gpu_model-g2", 2, [3.0, 3.1, 2.9], 0.40),   # seed 000's symptom
                            result("ratio-g2", 2, [1.05, 1.0, 1.1], 0.79)])           # within the noise
    by = {r["parallelism"]: r for r in rows}
    assert by["multi_gpu_model-g2"]["degraded"] and by["multi_gpu_model-g2"]["slower"]
    assert round(by["multi_gpu_model-g2"]["time_ratio"], 2) == 3.0
    assert not by["ratio-g2"]["degraded"] and not by["ratio-g2"]["slower"]
