"""The published report, from a real run: site, Markdown, CSV, JSON, plots,
and a real headless browser reading the site. A crash message full of markup,
pipes and newlines must come out as text everywhere."""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import textwrap

import pytest

from harness.report import plots, tables
from harness.report.analysis import compare_runs, spread_of
from harness.report.markdown import md_escape
from harness.report.tables import MAX_COLUMNS
from harness.results.result import Result

from .conftest import harness

HOSTILE = "<script>document.title='pwned'</script> | pipe\nsecond line & <b>bold</b>"
MATRIX = textwrap.dedent("""
    name: report-check
    environments:
      - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
      - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"], device: gpu}   # unsupported without a GPU
    workloads:
      - {model: rnn, cell: gru, layers: 1, units: 16, dense: 8, timesteps: 8, features: 4, classes: 4, samples: 1280}
      - {name: hostile, model: fault, fault: exception, message: %s}
      - {name: segv, model: fault, fault: segfault}
    parallelism:
      - {wrapper: none, devices: 1}
      - {wrapper: ratio, devices: 2}
      - {wrapper: make_parallel, devices: 3}
      - {wrapper: multi_gpu_model, devices: 2}       # TF 2.15 has none: unsupported
    batch_sizes: [64, 128]
    epochs: 4
    exclude:
      - {workload: [hostile, segv], wrapper: [ratio, make_parallel, multi_gpu_model]}
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
    assert len(rows) == len(data) == 20  # 10 cells per environment
    assert {r["status"] for r in rows} >= {"ok", "error", "crash", "unsupported"}
    assert len(list((site / "cells").glob("*.html"))) == 20
    pngs = list((site / "plots").glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000 for p in pngs)
    assert (root / "docs" / "compat.md").exists() and list((root / "docs" / "compat-plots").glob("*.png"))


def test_tables_hold_what_the_run_found(run):
    root, _ = run
    md = (root / "site" / "report.md").read_text()
    for title in ("### Compatibility", "### 1 device against N (seed 000)", "### Scaling with the device count",
                  "### Failure families"):
        assert title in md
    families = _table(md, "Failure families")
    assert "signal: killed by SIGSEGV" in families  # the segfault, named once, in its family
    assert "are incompatible" in families           # make_parallel on 3 devices with batch 64/128
    segv = _table(md, "Compatibility: segv")
    key = re.search(r"\*\*crash\*\*(\]\([^)]*\))? \[(F\d+)\]\(#(f\d+)\)", segv)  # a status word, its footnote
    assert key and key.group(2).lower() == key.group(3), segv
    assert f'<a name="{key.group(3)}"></a>' in families
    # two batch sizes ran: each column says which one it is
    gru = _table(md, "Compatibility: gru-1x16")
    assert "make\\_parallel-c3 b64" in gru and "make\\_parallel-c3 b128" in gru, gru


def _table(md: str, title: str) -> str:
    """The Markdown of the first table whose heading starts with `title`."""
    return next(part for part in md.split("### ")[1:] if part.startswith(title))


def test_cells_not_run_are_one_line_per_reason(run):
    """Unsupported cells are counted under one line per reason, never repeated
    in entries: the GPU environment's row and multi_gpu_model's columns, where
    nothing ran, are left out of the compatibility tables."""
    root, _ = run
    md = (root / "site" / "report.md").read_text()
    data = json.loads((root / "site" / "results.json").read_text())
    skipped = [r for r in data if r["status"] in ("unsupported", "unavailable")]
    assert len(skipped) >= 4  # multi_gpu_model at b64 and b128, and the GPU environment's cells where no GPU is
    lines = [ln for ln in _table(md, "Not run on this host").splitlines() if ln.startswith("| <a name=")]
    assert sum(int(ln.split("|")[4]) for ln in lines) == len(skipped)
    reasons = {r["reason"] for r in skipped}
    assert len(lines) < len(skipped) and len(lines) <= len(reasons)
    for reason in reasons:
        words = md_escape(reason)[:50]
        assert md.count(words) == 1, words  # shown once, in its line, never in entries
    for table in md.split("### ")[1:]:
        if table.startswith("Compatibility:"):
            assert "unsupported" not in table.split("\n|---")[1], table  # no entry repeats it
            assert "multi\\_gpu\\_model" not in table.split("\n")[4]  # the header row: the column is left out
    if not any("GPU" in g for r in data for g in (r.get("seen") or {}).get("gpus") or []):
        assert "tf2.15-gpu" not in _table(md, "Compatibility: gru-1x16").split("\n|---")[1]  # not a row
        assert ("Left out, nothing ran there on this host: stack tf2.15-gpu (U1); "
                "column multi\\_gpu\\_model-c2 (U2)") in md


def test_a_report_of_an_unfinished_run_says_so(run, tmp_path):
    root, _ = run
    assert "none yet" not in (root / "site" / "report.md").read_text()  # every cell ran
    part = tmp_path / "results"
    shutil.copytree(root / "results", part)
    shutil.rmtree(next(part.rglob("result.json")).parent)
    harness("report", str(part), "--out", str(tmp_path / "site"), check=True)
    assert "19 of 20 cells have results; 1 has none yet" in (tmp_path / "site" / "report.md").read_text()


def test_no_table_is_wider_than_a_screen(run):
    root, _ = run
    for md in ((root / "site" / "report.md").read_text(), (root / "docs" / "compat.md").read_text()):
        for table in md.split("### ")[1:]:
            header = next((ln for ln in table.splitlines() if ln.startswith("|")), "|")
            assert header.replace("\\|", "").count("|") - 1 <= MAX_COLUMNS + 1, table[:200]


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


# Installed first in a copy of a page: every script error, resource that fails to load, rejected
# promise and console call is noted on <html>, and read back from the DOM the browser dumps. (Not
# from Chromium's own log lines: their format is Chromium's, and changes between its releases.)
# It removes its own <script> element once it has run, so the DOM is the page's.
_WATCH_ATTR = "data-page-errors"
_WATCH = ("<script>(function(){var d=document.documentElement,s=document.currentScript;"
          "function note(w){d.setAttribute('" + _WATCH_ATTR + "',(d.getAttribute('" + _WATCH_ATTR + "')||'')"
          "+String(w).replace(/\\n/g,' ')+'\\n')}"
          "window.addEventListener('error',function(e){var t=e.target;note(e.message?'script error: '+e.message:"
          "'failed to load: '+((t&&(t.src||t.href||t.tagName))||'?'))},true);"
          "window.addEventListener('unhandledrejection',function(e){note('unhandled rejection: '+e.reason)});"
          "['log','info','warn','error','debug'].forEach(function(k){var f=console[k];console[k]=function(){"
          "note('console.'+k+': '+Array.prototype.join.call(arguments,' '));return f.apply(console,arguments)}});"
          "s.parentNode.removeChild(s)})();</script>")


def _browse(path):
    """The DOM headless Chromium builds from the page at `path`, and the page's own errors (a list,
    empty when it has none), seen by a watcher in a copy of the page beside it (links resolve alike)."""
    text = path.read_text()
    for anchor in ('<meta charset="utf-8">', "<head>"):
        if anchor in text:
            at = text.index(anchor) + len(anchor)
            break
    else:
        at = 0
    watched = path.with_name(f"{path.stem}.watched{path.suffix}")
    watched.write_text(text[:at] + _WATCH + text[at:])
    try:
        proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                               "--v=0", "--dump-dom", watched.as_uri()], capture_output=True, text=True,
                              timeout=120)
    finally:
        watched.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<html" in dom, (dom[:500], proc.stderr[-2000:])
    found = re.search(f'{_WATCH_ATTR}="([^"]*)"', dom)
    errors = html.unescape(found.group(1)).splitlines() if found else []
    return re.sub(f' {_WATCH_ATTR}="[^"]*"', "", dom), errors


def test_the_browser_check_sees_script_errors_failed_loads_and_console_output(tmp_path):
    """The watcher is no formality: a page that throws, logs and links a missing image is caught."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>t</title></head><body>'
                    '<img src="plots/missing.png"><script>console.warn("warned");undefinedFunction()</script>'
                    "<p>text</p></body></html>\n")
    dom, errors = _browse(page)
    assert "<p>text</p>" in dom and "data-page-errors" not in dom and not list(tmp_path.glob("*.watched.*"))
    assert any(e.startswith("script error: ") and "undefinedFunction" in e for e in errors), errors
    assert any(e.startswith("failed to load: ") and "missing.png" in e for e in errors), errors
    assert "console.warn: warned" in errors, errors
    page.write_text('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>t</title></head>'
                    "<body><p>fine</p></body></html>\n")
    dom, errors = _browse(page)
    assert errors == [] and "<p>fine</p>" in dom and "<script" not in dom, (errors, dom)  # the watcher leaves no trace


def test_site_opens_in_a_real_browser_without_errors(run):
    root, _ = run
    dom, errors = _browse(root / "site" / "index.html")
    assert dom.count("<table") >= 4
    assert "<img" in dom and "cells/" in dom
    assert errors == [], errors


def test_browser_shows_the_hostile_message_as_text(run):
    root, _ = run
    page = next((root / "site" / "cells").glob("tf2.15__hostile*.html"))  # the CPU one: it ran
    dom, errors = _browse(page)
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "<script>" not in dom and "&lt;script&gt;document.title" in dom
    assert "<b>bold</b>" not in dom
    assert errors == [], errors


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
        return Result.from_dict({"cell": "e/w/none-c1/b1/r0", "status": "ok", "epochs": [{"seconds": 9.0}] +
                                 [{"seconds": s} for s in seconds]})
    steady = compare_runs([result([1.0, 1.2, 0.9])], [result([1.1, 1.15, 1.05])])
    assert not steady["slower"] and not steady["faster"]
    slow = compare_runs([result([1.0, 1.05, 0.95])], [result([1.5, 1.6, 1.55])])
    assert len(slow["slower"]) == 1
    assert spread_of([1, 2, 3]).fmt(1) == "2.0 [1.0-3.0] (noisy)"


def test_seed_comparison_flags_degraded_and_slower():
    from harness.report.analysis import seed_comparison

    def result(label, devices, seconds, val):
        return Result.from_dict({
            "cell": f"e/w/{label}/b128/r0", "status": "ok", "batch_size": 128, "epochs_asked": 4,
            "parallelism": {"label": label, "devices": devices, "wrapper": label.split("-")[0]},
            "metrics": {"val_accuracy": val, "accuracy": val},
            "epochs": [{"seconds": 9.0}] + [{"seconds": s} for s in seconds]})
    rows = seed_comparison([result("none-g1", 1, [1.0, 1.1, 0.9], 0.80),
                            result("multi_gpu_model-g2", 2, [3.0, 3.1, 2.9], 0.40),   # seed 000's symptom
                            result("ratio-g2", 2, [1.05, 1.0, 1.1], 0.79)])           # within the noise
    by = {r["parallelism"]: r for r in rows}
    assert by["multi_gpu_model-g2"]["degraded"] and by["multi_gpu_model-g2"]["slower"]
    assert round(by["multi_gpu_model-g2"]["time_ratio"], 2) == 3.0
    assert not by["ratio-g2"]["degraded"] and not by["ratio-g2"]["slower"]


# -- pure table functions, on constructed results ---------------------------------------
def _result(env, label="none-c1", status="ok", seen=None, batch=128, signature=None, reason=None, seconds=(1.0, 1.1),
            workload="w", run="m.yaml"):
    wrapper, rest = label.split("-")[0], label.split("-")[1]
    return Result.from_dict({
        "cell": f"{env}/{workload}/{label}/b{batch}/r0", "status": status, "environment": env,
        "workload": workload, "batch_size": batch, "repeat": 0, "seen": seen or {}, "reason": reason,
        "parallelism": {"label": label, "wrapper": wrapper, "devices": int(rest[1:])},
        "error": {"signature": signature} if signature else None, "provenance": {"matrix": run},
        "metrics": {"val_accuracy": 0.5} if status == "ok" else {},
        "epochs": [{"seconds": 9.0, "samples_per_sec": 100.0}]
        + [{"seconds": s, "samples_per_sec": 1000 / s} for s in seconds] if status == "ok" else []})


def _seen(tf, keras, python="3.6.15"):
    return {"tensorflow": tf, "keras": keras, "python": python, "api": "keras", "backend": "tensorflow"}


def test_rows_sort_by_version_and_say_what_ran():
    results = [_result("tf1.10-keras2.2.2", seen=_seen("1.10.0", "2.2.2")),
               _result("tf1.12-keras2.2.4", seen=_seen("1.12.0", "2.2.4")),
               _result("tf1.9-keras2.2.4", seen=_seen("1.9.0", "2.2.4")),
               _result("tf1.9-keras2.2.2", seen=_seen("1.9.0", "2.2.2")),
               _result("tf1.11-keras2.2.4", status="error", signature="import: ImportError: x")]  # nothing seen
    [table] = tables.compatibility(results)
    labels = [row[0].text for row in table.rows]
    assert labels == ["TF 1.9.0 · Keras 2.2.2 · Python 3.6.15", "TF 1.9.0 · Keras 2.2.4 · Python 3.6.15",
                      "TF 1.10.0 · Keras 2.2.2 · Python 3.6.15", labels[3], "TF 1.12.0 · Keras 2.2.4 · Python 3.6.15"]
    assert labels[3].startswith("tf1.11-keras2.2.4")  # placed by the versions in its name
    # the same versions seen by two environments: the names keep them apart
    twins = tables.context([_result("tf2.15", seen=_seen("2.15.0", "2.15.0")),
                            _result("tf2.15-gpu", seen=_seen("2.15.0", "2.15.0"))]).labels
    assert len(set(twins.values())) == 2 and twins["tf2.15-gpu"].endswith("[tf2.15-gpu]")


def test_unsupported_cells_collapse_to_one_line_per_reason():
    gpu = "a GPU environment, and this host has no NVIDIA GPU (nvidia-smi lists none)"
    mgm = ("Keras' multi_gpu_model accepts GPUs only: To call `multi_gpu_model` with `gpus=%d`, we expect "
           "the following devices: %s")
    results = [_result(f"tf1.{v}-gpu", label=label, status="unsupported", reason=gpu, batch=b)
               for v in (9, 10, 12) for label in ("none-g1", "make_parallel-g2") for b in (128, 1024)]
    results += [_result("tf1.12", label=f"multi_gpu_model-c{n}", status="unsupported",
                        reason=mgm % (n, [f"/gpu:{i}" for i in range(n)])) for n in (2, 3, 4)]
    results += [_result("tf1.12", seen=_seen("1.12.0", "2.2.4"))]
    ctx = tables.context(results)
    table = tables.not_run(results, ctx)
    assert [(row[1].text, row[3].text) for row in table.rows] == [("unsupported", "12"), ("unsupported", "3")]
    assert table.rows[0][2].text == gpu and table.rows[0][0].anchor == "U1"
    [compat] = tables.compatibility(results, ctx)
    assert compat.headers == ["stack", "none-c1"] and len(compat.rows) == 1  # nothing that did not run
    assert ("stacks tf1.9-gpu, tf1.10-gpu, tf1.12-gpu (U1); "
            "columns multi_gpu_model-c2, multi_gpu_model-c3, multi_gpu_model-c4 (U2)") in compat.note, compat.note


def test_wide_matrices_split_into_narrow_tables():
    labels = [f"{w}-c{n}" for w in ("none", "ratio", "make_parallel", "mirrored") for n in range(1, 9)]
    results = [_result("tf2.15", label=label, seen=_seen("2.15.0", "2.15.0"), batch=b)
               for label in labels for b in (128, 256)]
    parts = tables.compatibility(results, limit=12)
    assert len(parts) == 6 and all(len(t.headers) <= 13 for t in parts)
    headers = [h for t in parts for h in t.headers[1:]]
    assert len(headers) == len(set(headers)) == 64  # every column once, each with its batch size
    assert all(re.search(r" b(128|256)$", h) for h in headers)
    assert all(t.title.endswith(f"(part {n} of 6)") for n, t in enumerate(parts, 1))
    # one wrapper's 16 columns do not fit one table; smaller groups are never split across tables
    assert {h.split("-")[0] for h in parts[0].headers[1:]} == {"none"}


def test_one_family_per_signature_whatever_the_status_or_stack():
    sig = "exception: InvalidArgumentError: No OpKernel was registered to support Op 'CudnnRNN'"
    results = [_result("tf1.9", status="error", signature=sig), _result("tf1.12", status="error", signature=sig),
               _result("tf1.12", label="ratio-c2", status="crash", signature=sig),
               _result("tf1.12", label="make_parallel-c3", status="error", signature=sig + " with these attrs"),
               _result("tf1.10", label="ratio-c2", status="timeout")]
    table = tables.failure_families(results)
    assert [(row[0].text, row[2].text, row[3].text) for row in table.rows] == [
        ("F1", sig, "3"), ("F2", sig + " with these attrs", "1"), ("F3", "timeout", "1")]
    assert table.rows[0][1].text == "error, crash"
    [compat] = tables.compatibility(results)
    refs = {e.ref for row in compat.rows for e in row[1:] if e.text}
    assert refs == {"F1", "F2", "F3"}


def test_long_text_is_cut_at_a_word_boundary():
    text = "exception: AttributeError: module 'tensorflow._api.v2.config' has no attribute 'experimental_list_devices'"
    assert tables.cut(text, 1000) == text
    short = tables.cut(text, 80)
    assert short.endswith(" …") and text.startswith(short[:-2]) and text[len(short) - 2] == " "


def test_plots_need_two_points():
    lonely = [_result("tf2.15", label="make_parallel-c2", seen=_seen("2.15.0", "2.15.0"))]  # no 1-device base
    assert plots.scaling_series(lonely) == {} and plots.time_vs_batch_series(lonely) == {}
    pair = lonely + [_result("tf2.15", seen=_seen("2.15.0", "2.15.0"))]
    [lines] = plots.scaling_series(pair).values()
    assert [[x for x, _ in points] for points in lines.values()] == [[1, 2]]
    batches = pair + [_result("tf2.15", batch=256, seen=_seen("2.15.0", "2.15.0"))]
    [lines] = plots.time_vs_batch_series(batches).values()
    assert list(lines) == ["none-c1"]  # make_parallel-c2 ran at one batch size only: no line


def test_a_support_grid_holds_every_release_and_says_which_drifted():
    """TensorFlow's name token drops a trailing .0 (tf2.8 is 2.8.0): those releases were left out
    of the grid. A release that ran ok but missed a value its matrix expects reads 'drifted'."""
    def at(version, status="ok", met=None):
        from harness.stacks import short_version
        r = _result(f"tf{short_version(version)}", status=status, signature=None if status == "ok" else "x: y")
        r.extra["releases"] = [["tensorflow", "bisect", version]]
        r.expectation = None if met is None else {"met": met, "values": [{"metric": "lr", "met": met}]}
        return r
    results = [at("2.8.0", met=True), at("2.9.3", met=True), at("2.11.0", status="error", met=False),
               at("2.16.1", met=False)]
    [grid] = tables.support_grids(results)
    assert [(row[0].text, row[1].text) for row in grid.rows] == [
        ("2.8.0", "ok"), ("2.9.3", "ok"), ("2.11.0", "error"), ("2.16.1", "drifted")]
