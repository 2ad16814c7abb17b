"""A real bisect against the real index: Keras 3.0.5 on JAX 0.4.25 across NumPy releases
(examples/numpy2-copy), in real virtualenvs; then the report of what it ran, with the
support grid and the trend plots, opened in headless Chromium. And the other way round: the
Keras release, and the keras-nightly build, that mended what jax 0.6.1 broke
(examples/jax-spmd-mode/keras.yaml).

NumPy and JAX are small next to TensorFlow: each release's virtualenv is about 300 MB,
built in a minute or two the first time and reused after (the harness cache)."""

from __future__ import annotations

import json
import re

import pytest
from packaging.specifiers import SpecifierSet

from .conftest import ROOT, harness
from .test_report import _browse

MATRIX = str(ROOT / "examples" / "numpy2-copy" / "matrix.yaml")
KERAS_UNDER_JAX = str(ROOT / "examples" / "jax-spmd-mode" / "keras.yaml")
CELL = "keras3.0.5-jax-numpy{}/tiny-dense/none-c1/b128/r0"


@pytest.fixture(scope="module")
def bisected(tmp_path_factory):
    root = tmp_path_factory.mktemp("bisect")
    args = ["bisect", MATRIX, "--package", "numpy", "--good", "1.26.2", "--bad", "2.0.1", "--engine", "venv",
            "--results", str(root / "results"), "--out", str(root / "bundles")]
    first = harness(*args, "--jobs", "2", timeout=3000)
    again = harness(*args, timeout=1200)
    return root, first, again


def test_bisect_finds_numpy_2_0_0_in_fewer_runs_than_a_sweep(bisected):
    root, first, _ = bisected
    out = first.stdout
    assert first.returncode == 0, out[-3000:] + first.stderr[-3000:]
    assert "first bad: numpy 2.0.0   last good: numpy 1.26.4" in out
    assert "Unable to avoid copy while creating an array as requested" in out   # the evidence of the bad end
    assert re.search(r"last good 1\.26\.4: 1 ok; val_accuracy [0-9.]+; samples/s [0-9]+", out)
    # both ends first, then one round of two releases (--jobs 2): 4 of the 5 releases
    assert "step 0: last good 1.26.2, first bad 2.0.1, 3 untested release(s) between" in out
    assert "testing numpy 1.26.4, 2.0.0" in out
    assert "4 of 5 releases tested" in out and "a linear sweep tests all 5 releases" in out
    record = json.loads((root / "results" / "numpy2-copy" / ".bisect" / "numpy-1.26.2-2.0.1.json").read_text())
    assert record["first_bad"] == "2.0.0" and record["tested"]["2.0.0"]["verdict"] == "bad"
    assert "1.26.3" not in record["tested"]


def test_each_release_resolves_as_of_its_upload_and_says_so(bisected):
    root, _, _ = bisected
    result = json.loads((root / "results" / "numpy2-copy" / CELL.format("2.0.0") / "result.json").read_text())
    assert result["status"] == "error" and result["seen"]["numpy"] == "2.0.0"
    [(package, spec, version)] = result["releases"]      # the matrix's range: run shares the cell
    assert (package, version) == ("numpy", "2.0.0") and SpecifierSet(spec) == SpecifierSet(">=1.25,<2.1")
    cutoff = result["provenance"]["cutoff"]
    assert cutoff["uploaded_before"].startswith("2024-06-17")     # numpy 2.0.0's upload + one day
    assert "--exclude-newer" in cutoff["via"]


def test_the_first_bad_cell_is_left_as_a_bundle(bisected):
    root, first, _ = bisected
    bundle = next(p for p in (root / "bundles").iterdir() if p.is_dir())
    assert "numpy2.0.0" in bundle.name and f"bundle of the first bad cell: {bundle}" in first.stdout
    assert (bundle / "run.sh").exists() and (bundle / "environment" / "requirements.lock").exists()
    assert "numpy==2.0.0" in (bundle / "environment" / "requirements.lock").read_text()
    attempt = json.loads((bundle / "attempts" / "1" / "result.json").read_text())
    assert attempt["status"] == "error"


def test_a_rerun_reuses_every_finished_cell(bisected):
    _, _, again = bisected
    assert again.returncode == 0, again.stdout[-3000:]
    assert "first bad: numpy 2.0.0   last good: numpy 1.26.4" in again.stdout
    assert "(0 run now," in again.stdout          # plain bisection visits only releases already tested


def test_the_range_matrix_runs_and_shares_the_bisect_cells(bisected):
    root, _, _ = bisected
    proc = harness("run", MATRIX, "--engine", "venv", "--results", str(root / "results"),
                   "--only", "*numpy1.26.3*", "--only", "*numpy1.26.4*", "--only", "*numpy2.0.0*", timeout=1800)
    # the range as packaging prints it (its order is packaging's, not ours): compared as a range
    shown = re.search(r"numpy (\S+) for Python 3\.11: 11 release\(s\) 1\.25\.0 \.\.\. 2\.0\.2",
                      proc.stderr + proc.stdout)
    assert shown and SpecifierSet(shown.group(1)) == SpecifierSet(">=1.25,<2.1"), proc.stderr[-3000:]
    assert "2 of 3 cells already have results" in proc.stdout          # the bisect's 1.26.4 and 2.0.0
    assert re.search(r"ok keras3\.0\.5-jax-numpy1\.26\.3/tiny-dense", proc.stdout)
    assert json.loads((root / "results" / "numpy2-copy" / ".releases.json").read_text())["expansions"]


def test_bounds_that_do_not_bracket_a_change_exit_1_with_the_reason(bisected):
    root, _, _ = bisected
    proc = harness("bisect", MATRIX, "--package", "numpy", "--good", "2.0.0", "--bad", "2.0.1", "--engine", "venv",
                   "--results", str(root / "results"), "--out", str(root / "bundles"), timeout=600)
    assert proc.returncode == 1 and "2.0.0 and 2.0.1 are both bad" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("args, message", [
    (["--good", "1.26.2"], "give --good and --bad"),
    (["--old", "2.0.1", "--new", "1.26.2"], "must be older than"),
    (["--good", "1.26.2", "--bad", "9.9.9"], "numpy 9.9.9 is not a release"),
    (["--range", ">=1.26", "--good", "1.26.2"], "either --range or --good/--bad"),
    (["--range", ">=1.26,<2", "--speed-drop", "150"], "--speed-drop expects a number >= 0 and < 100"),
    (["--good", "one", "--bad", "2.0.1"], "--good 'one' is not a version"),
    (["--range", "1.26"], "is not a range"),
])
def test_bad_bisect_arguments_are_one_line_and_exit_2(args, message, tmp_path):
    proc = harness("bisect", MATRIX, "--package", "numpy", *args, "--results", str(tmp_path / "r"), timeout=300)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("package", ["../../etc", "numpy/../x", "a b", "_x"])
def test_a_package_name_never_leaves_the_cache(package, tmp_path):
    proc = harness("bisect", MATRIX, "--package", package, "--range", ">=1", "--results", str(tmp_path / "r"),
                   env={"HARNESS_CACHE": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == 2 and "is not a package name" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "etc").exists()


def test_the_report_shows_the_support_grid_and_trends_in_a_browser(bisected):
    root, _, _ = bisected
    site, md = root / "site", root / "docs" / "numpy.md"
    harness("report", str(root / "results"), "--out", str(site), "--markdown", str(md), check=True)
    text = (site / "report.md").read_text()
    grid = text.split("### Support: tiny-dense (matrix) across numpy releases", 1)[1].split("###", 1)[0]
    rows = [ln for ln in grid.splitlines() if ln.startswith("| ") and not ln.startswith("| numpy")]
    assert [r.split("|")[1].strip() for r in rows] == ["1.26.2", "1.26.3", "1.26.4", "2.0.0", "2.0.1"]
    assert "[ok](cells/" in rows[0] and "**error**" in rows[3] and "[F1](#f1)" in rows[3]
    plots = sorted(p.name for p in (site / "plots").glob("trend-*.png"))
    assert any(p.startswith("trend-val_accuracy-") for p in plots)
    assert any(p.startswith("trend-samples_per_sec-") for p in plots)
    assert all((md.parent / f"{md.stem}-plots" / p).exists() for p in plots)   # beside the Markdown too
    # the browser: the grid is a table, and every plot loads (an image of real width)
    page = site / "index.html"
    check = site / "check.html"
    check.write_text(page.read_text().replace(
        "</body>", "<script>window.onload=function(){document.body.setAttribute('data-widths',"
                   "Array.from(document.images).map(function(i){return i.naturalWidth}).join(','))}</script></body>"))
    dom, errors = _browse(check)
    assert "Support: tiny-dense (matrix) across numpy releases" in dom
    widths = re.search(r'data-widths="([0-9,]*)"', dom).group(1).split(",")
    assert len(widths) >= len(plots) and all(int(w) > 100 for w in widths)
    assert errors == [], errors


def test_a_users_script_bisected_over_a_small_package(tmp_path):
    """examples/packaging-legacy: the user's script imports packaging's LegacyVersion,
    which packaging 22.0 removed; the error is attributed to the script's own line."""
    proc = harness("bisect", str(ROOT / "examples" / "packaging-legacy" / "matrix.yaml"), "--package", "packaging",
                   "--good", "21.2", "--bad", "22.0", "--engine", "venv", "--results", str(tmp_path / "results"),
                   "--out", str(tmp_path / "bundles"), timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first bad: packaging 22.0   last good: packaging 21.3" in proc.stdout
    assert "cannot import name 'LegacyVersion' from 'packaging.version'" in proc.stdout
    assert "legacy_version.py:8" in proc.stdout
    bundle = next(p for p in (tmp_path / "bundles").iterdir() if p.is_dir())
    assert (bundle / "run.sh").exists() and "packaging22.0" in bundle.name
    assert list(bundle.glob("user/**/legacy_version.py"))          # the user's script travels with it


SILENT = '''\
import packaging
from workloads.metrics import report

report("major", int(packaging.__version__.split(".")[0]))
'''


def test_a_release_that_runs_but_gives_another_value_is_the_first_bad(tmp_path):
    """A silent change: every release runs `ok`, and from packaging 21.0 on the script reports
    another number than its matrix expects (three releases: both ends, then 21.0)."""
    (tmp_path / "version.py").write_text(SILENT)
    matrix = tmp_path / "silent.yaml"
    # examples/packaging-legacy's stack (its virtualenvs are shared with that example's bisect)
    matrix.write_text('name: silent\nenvironments:\n  - {python: "3.11", keras: "3.0.5", backend: jax, packages: '
                      '["jax==0.4.25", "jaxlib==0.4.25", "numpy==1.26.4", {packaging: ">=20.0,<23"}]}\n'
                      "workloads:\n  - {name: major, script: version.py}\n"
                      "expect:\n  - {workload: major, metric: major, equals: 20}\n")
    proc = harness("bisect", str(matrix), "--package", "packaging", "--good", "20.9", "--bad", "21.1",
                   "--engine", "venv", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "bundles"),
                   timeout=1800)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "first bad: packaging 21.0   last good: packaging 20.9" in out, out[-3000:]
    assert "1 ok; expectation not met: major 21" in out, out[-3000:]


@pytest.mark.slow
def test_keras_3_10_0_mends_what_jax_0_6_1_broke_and_so_does_its_first_good_night(tmp_path):
    """A public case from the other side: jax 0.6.1 removed `jax.spmd_mode`, which Keras up to
    3.9 calls in every fit(); a user stuck on jax 0.6.1 asks which Keras release runs again. The
    command as such a user first typed it (the older release called good): the ends show a
    mend, the search says so and finds Keras 3.10.0, then the first good keras-nightly build.
    keras-nightly has no build between 2025-03-20 and 2025-04-23, so that is the window."""
    proc = harness("bisect", KERAS_UNDER_JAX, "--package", "keras", "--good", "3.9.2", "--bad", "3.10.0",
                   "--nightly", "--engine", "venv", "--results", str(tmp_path / "results"),
                   "--out", str(tmp_path / "bundles"), timeout=2400)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "keras 3.9.2: bad" in out and "keras 3.10.0: good" in out       # each end by what it does
    assert "first good: keras 3.10.0   last bad: keras 3.9.2" in out, out[-3000:]
    assert "module 'jax' has no attribute 'spmd_mode'" in out
    assert "first good night: keras-nightly 3.9.0.dev2025042303" in out, out[-3000:]
    found = json.loads((tmp_path / "results" / "jax-spmd-mode-keras" / ".bisect" / "keras-3.9.2-3.10.0.json")
                       .read_text())
    assert (found["direction"], found["first_good"], found["last_bad"]) == ("mended", "3.10.0", "3.9.2")
    night = found["nightly"]
    assert (night["direction"], night["last_bad"], night["first_good"]) == ("mended", "3.9.0.dev2025032003",
                                                                            "3.9.0.dev2025042303")
    assert "since=2025-03-20&until=2025-04-23" in night["history"]
