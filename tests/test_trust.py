"""Trust, round 2: every field safe wherever it lands, every message exact.

Each test drives a real process (the harness's command line, a real cell
process, a real shell running a generated script) against real files, and
fails on the behaviour this round fixed: names that shared a file, output
folders that swallowed results, owner files taken on their word, control
characters reaching the terminal, numbers that passed validation and broke
later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import names

from .conftest import ROOT, harness

CLASH = """name: clash
environments:
  - {name: "e+1", python: "3.11", tensorflow: "2.15.0"}
  - {name: "e_1", python: "3.11", tensorflow: "2.15.0"}
  - {name: "E_1", python: "3.11", tensorflow: "2.15.0"}
workloads: [{model: fault, fault: exception}]
batch_sizes: [1]
"""


def _clash_results(tmp_path: Path) -> Path:
    """Real results of three cells whose ids differ only where the old file-name rule
    folded them together ('+' and '_' both became '_'; capitals meet on macOS).
    The local engine finds no TensorFlow in this interpreter, so each cell is a
    quick, real `unavailable` result."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    results = tmp_path / "results"
    harness("run", str(matrix), "--engine", "local", "--results", str(results), timeout=300)
    assert len(list(results.rglob("result.json"))) == 3
    return results


# -- 6. names map one-to-one ------------------------------------------------------------------
def test_report_pages_of_cells_whose_ids_differ_only_in_punctuation_are_distinct(tmp_path):
    results = _clash_results(tmp_path)
    harness("report", str(results), "--out", str(tmp_path / "site"), check=True)
    pages = sorted((tmp_path / "site" / "cells").iterdir())
    assert len(pages) == 3, pages
    assert len({p.name.lower() for p in pages}) == 3, "distinct on a case-insensitive file system too"
    titles = {p.read_text().split("<title>")[1].split("</title>")[0] for p in pages}
    assert titles == {"e+1/fault-exception/none-c1/b1/r0", "e_1/fault-exception/none-c1/b1/r0",
                      "E_1/fault-exception/none-c1/b1/r0"}


def test_bundles_of_cells_whose_ids_differ_only_in_punctuation_are_distinct(tmp_path):
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    out = tmp_path / "bundles"
    proc = harness("repro", "*/fault-exception/*", "--matrix", str(matrix), "--engine", "local",
                   "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    bundles = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(bundles) == 3, bundles
    cells = {json.loads((b / "spec.json").read_text())["environment"]["name"] for b in bundles}
    assert cells == {"e+1", "e_1", "E_1"}


def test_one_cell_id_from_two_runs_keeps_both_results_on_its_page(tmp_path):
    first = _clash_results(tmp_path / "a")
    second = _clash_results(tmp_path / "b")
    harness("report", str(first), str(second), "--out", str(tmp_path / "site"), check=True)
    page = next((tmp_path / "site" / "cells").glob("e_-1*")).read_text()
    assert str(first) in page and str(second) in page


@given(st.lists(st.text(min_size=0, max_size=90), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_file_names_decode_back_to_their_parts(parts):
    name = names.file_name(*parts)
    assert len(name) <= names.MAX_FILE_NAME
    assert "/" not in name and "\0" not in name and not name.startswith((".", "-"))
    assert name == name.lower(), "one file per name on case-insensitive file systems too"
    if len("_s".join(names._encode(p) for p in parts)) <= names.MAX_FILE_NAME:  # not cut
        assert names.decode_file_name(name) == parts


@given(st.lists(st.text(max_size=300), min_size=2, max_size=2, unique=True))
@settings(max_examples=300, deadline=None)
def test_two_different_ids_never_share_a_file_name(ids):
    assert names.file_name(ids[0]) != names.file_name(ids[1])


# -- 8. terminal output is safe ----------------------------------------------------------------
# The planted-faults environment (tests/test_repro.py and matrices/faults.yaml use the same one):
# the fault fires before TensorFlow is imported, so the cell takes a second once the venv exists.
ESCAPES = r"boom \e]0;retitled\a \e[2J\rok \x9b31m \u202eevil"
ESCAPE_MATRIX = f"""name: esc
environments:
  - {{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}}
workloads:
  - {{model: fault, fault: exception, message: "{ESCAPES}"}}
batch_sizes: [1]
"""
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def _no_raw_control(text: str) -> None:
    for ch in RAW:
        assert ch not in text, (ch, text[-1500:])


def test_control_characters_from_a_crashing_cell_are_shown_not_obeyed(tmp_path):
    matrix = tmp_path / "esc.yaml"
    matrix.write_text(ESCAPE_MATRIX)
    results = tmp_path / "results"
    run = harness("run", str(matrix), "--engine", "venv", "--results", str(results), timeout=1800)
    assert run.returncode == 0, run.stderr[-2000:]
    _no_raw_control(run.stdout + run.stderr)
    assert "\\x1b]" in run.stdout
    compare = harness("report", "compare", str(results), str(results))
    _no_raw_control(compare.stdout + compare.stderr)
    repro = harness("repro", "*", "--matrix", str(matrix), "--engine", "venv", "--out", str(tmp_path / "b"),
                    timeout=1800)
    assert repro.returncode == 0, repro.stderr[-2000:]
    _no_raw_control(repro.stdout + repro.stderr)
    assert "RuntimeError: boom \\x1b]0;retitled\\x07" in repro.stdout, "the live traceback, written out"


def test_a_control_character_in_an_error_message_is_written_out(tmp_path):
    bad = tmp_path / "m\x1b[2J.yaml"
    bad.write_text("environments: [\n")
    proc = harness("list", str(bad))
    assert proc.returncode == 2
    _no_raw_control(proc.stdout + proc.stderr)
    assert "m\\x1b[2J.yaml" in proc.stderr


# -- 7. numbers and devices validated where they enter -------------------------------------------
@pytest.mark.parametrize("argv, flag", [
    (["run", "--jobs", "1000000000"], "--jobs"), (["run", "--jobs", "nan"], "--jobs"),
    (["run", "--cpus-per-cell", "-3"], "--cpus-per-cell"), (["run", "--cpus-per-cell", "1e9"], "--cpus-per-cell"),
    (["run", "--throttle", "0"], "--throttle"), (["run", "--throttle", "-5"], "--throttle"),
    (["run", "--gpus", "0,0"], "--gpus"), (["run", "--gpus", "0.5"], "--gpus"), (["run", "--gpus", "all"], "--gpus"),
    (["run", "--gpus", "0,1-3"], "--gpus"), (["run", "--gpus", "GPU-1,GPU-1"], "--gpus"),
    (["status", "--wait", "nan"], "--wait"), (["status", "--wait", "inf"], "--wait"),
    (["status", "--wait", "-1"], "--wait"), (["repro", "x", "--repeat", "100000"], "--repeat"),
    (["repro", "x", "--repeat", "0"], "--repeat"),
])
def test_a_bad_number_or_device_on_the_command_line_is_exit_2_naming_the_flag(tmp_path, argv, flag):
    proc = harness(*argv, "--results" if argv[0] != "repro" else "--out", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert flag in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists(), "refused before anything is written"


def test_a_bad_gpu_list_in_the_environment_is_exit_2_naming_it(tmp_path):
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    proc = harness("run", str(matrix), "--engine", "local", "--results", str(tmp_path / "r"),
                   env={"HARNESS_GPUS": "1,1"}, timeout=60)
    assert proc.returncode == 2 and "HARNESS_GPUS: GPU 1 given twice" in proc.stderr, proc.stderr[-1000:]


def test_gpu_uuids_stay_allowed():
    from harness.host.resources import parse_gpu_list
    assert parse_gpu_list("0, GPU-5d3c1a2b-aaaa-bbbb, MIG-4f1e-01") == ["0", "GPU-5d3c1a2b-aaaa-bbbb", "MIG-4f1e-01"]
    assert parse_gpu_list("") == []


# -- 5. never delete what you did not create ---------------------------------------------------
def _runs_named_cells_and_plots(tmp_path: Path) -> Path:
    """A results folder whose two runs are named like the report's own folders."""
    results = tmp_path / "results"
    for name in ("cells", "plots"):
        matrix = tmp_path / f"{name}.yaml"
        matrix.write_text(CLASH.replace("name: clash", f"name: {name}"))
        harness("run", str(matrix), "--engine", "local", "--results", str(results), timeout=300)
    assert len(list(results.rglob("result.json"))) == 6
    return results


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["results", "results/cells", "results/elsewhere", "."])
def test_report_refuses_an_output_folder_that_is_in_or_holds_a_results_folder(tmp_path, where):
    results = _runs_named_cells_and_plots(tmp_path)
    before = _files(results)
    proc = harness("report", str(results), "--out", str(tmp_path / where))
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert "results folder" in proc.stderr and "Traceback" not in proc.stderr
    assert _files(results) == before, "no result deleted or added"


def test_report_refuses_markdown_plots_inside_a_results_folder(tmp_path):
    results = _runs_named_cells_and_plots(tmp_path)
    before = _files(results)
    proc = harness("report", str(results), "--out", str(tmp_path / "site"),
                   "--markdown", str(results / "report.md"))
    assert proc.returncode == 2 and "--markdown" in proc.stderr, proc.stderr[-1000:]
    assert _files(results) == before


def test_report_removes_only_the_files_it_wrote(tmp_path):
    results = _runs_named_cells_and_plots(tmp_path)
    site = tmp_path / "site"
    (site / "cells").mkdir(parents=True)
    (site / "plots").mkdir()
    mine = [site / "cells" / "notes.txt", site / "plots" / "mine.png", site / "keep.html"]
    for path in mine:
        path.write_text("the user's")
    harness("report", str(results), "--out", str(site), check=True)
    pages = set((site / "cells").glob("*.html"))
    assert len(pages) == 3  # one per cell id; the two runs share the ids
    harness("report", str(results / "cells"), "--out", str(site), check=True)  # a report of one run
    assert set((site / "cells").glob("*.html")) == pages, "this run's pages rewritten"
    assert all(p.read_text() == "the user's" for p in mine), "files the harness did not write stay"


@pytest.mark.parametrize("manifest", [
    '["../results/cells"]', '"index.html"', '{"files": "index.html"}', '{"files": [1, 2]}', "not json",
    '{"files": ["../results/cells/e_1/fault-exception/none-c1/b1/r0/result.json"]}',
    '{"files": ["/etc/hostname", "cells/../../results/plots"]}',
])
def test_a_forged_or_broken_manifest_removes_nothing_outside(tmp_path, manifest):
    results = _runs_named_cells_and_plots(tmp_path)
    before = _files(results)
    site = tmp_path / "site"
    site.mkdir()
    (site / ".harness-written.json").write_text(manifest)
    proc = harness("report", str(results), "--out", str(site))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert _files(results) == before


def test_repro_refuses_a_bundle_folder_inside_a_results_folder(tmp_path):
    results = _runs_named_cells_and_plots(tmp_path)
    before = _files(results)
    proc = harness("repro", "e_1/*", "--matrix", str(tmp_path / "cells.yaml"), "--engine", "local",
                   "--out", str(results / "cells"), timeout=300)
    assert proc.returncode == 2 and "results folder" in proc.stderr, proc.stderr[-1000:]
    assert _files(results) == before
    again = harness("repro", "e_1/*", "--matrix", str(tmp_path / "cells.yaml"), "--engine", "local",
                    "--out", str(tmp_path / "bundles"), timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    again = harness("repro", "e_1/*", "--matrix", str(tmp_path / "cells.yaml"), "--engine", "local",
                    "--out", str(tmp_path / "bundles"), timeout=300)
    assert again.returncode == 0, "a bundles folder (its attempts are results) is written again"


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30),
                 st.lists(st.text(max_size=40), max_size=5),
                 st.dictionaries(st.sampled_from(["files", "x"]),
                                 st.one_of(st.text(max_size=40), st.lists(
                                     st.one_of(st.text(max_size=40), st.sampled_from(
                                         ["../outside.txt", "/tmp", "..", ".", "a/../../outside.txt",
                                          "link/outside.txt"]), st.integers()), max_size=6)), max_size=2)))
@settings(max_examples=200, deadline=None)
def test_fuzzed_manifests_never_remove_a_file_outside_the_folder(tmp_path_factory, data):
    from harness.files.outputs import MANIFEST, Manifest
    root = tmp_path_factory.mktemp("m")
    folder = root / "out"
    folder.mkdir()
    outside = root / "outside.txt"
    outside.write_text("keep")
    (folder / "link").symlink_to(root)
    (folder / MANIFEST).write_text(json.dumps(data))
    Manifest(folder).clear_earlier()
    assert outside.read_text() == "keep"


# -- 2. only kill what is provably yours -------------------------------------------------------
HANG_MATRIX = """name: live
environments:
  - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
workloads: [{model: fault, fault: hang}, {model: fault, fault: exception}]
batch_sizes: [1]
timeouts: {wall: 1200, progress: 1100}  # outlives the test on a loaded machine; ended by the test
"""
HANG = "tf2.15/fault-hang/none-c1/b1/r0"
OTHER = "tf2.15/fault-exception/none-c1/b1/r0"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _live_run(tmp_path: Path):
    """A real harness run whose cell (a planted hang) is running; returns the run, its
    owner file and the cell's process group."""
    matrix = tmp_path / "live.yaml"
    matrix.write_text(HANG_MATRIX)
    results = tmp_path / "results"
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "venv",
                            "--results", str(results), "--only", HANG, "--jobs", "1"], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        owners = list((results / "live").glob("tf2.15/fault-hang/none-c1/b1/r0.partial-*/owner.json"))
        if owners:
            owner = json.loads(owners[0].read_text())
            if owner.get("cell_pgid"):
                return run, matrix, results, owners[0], owner
        assert run.poll() is None, "the live run ended early"
        time.sleep(0.2)
    raise AssertionError("the hang cell did not start")


def _stop(run: subprocess.Popen) -> None:
    run.terminate()
    run.wait(timeout=60)


FORGED = {
    "copied from a live run": lambda owner: owner,
    "a list": lambda owner: [owner["cell_pgid"]],
    "a string": lambda owner: str(owner["cell_pgid"]),
    "pgid as text": lambda owner: {**owner, "cell_pgid": str(owner["cell_pgid"])},
    "pgid as bool": lambda owner: {**owner, "cell_pgid": True},
    "no start time": lambda owner: {k: v for k, v in owner.items() if k != "cell_start"},
    "other start time": lambda owner: {**owner, "cell_start": owner["cell_start"] + 1},
    "other boot": lambda owner: {**owner, "boot_id": "00000000-0000-0000-0000-000000000000"},
    "other run id": lambda owner: {**owner, "run_id": "f" * 32},
}


def test_a_forged_owner_file_never_kills_another_live_runs_cell(tmp_path):
    """A second run on the same results folder meets, in another cell's leftover folder,
    owner files forged from the live run's own (and broken ones): the live cell survives
    every one, and the second run prints one note per file, never a traceback."""
    run, matrix, results, owner_path, owner = _live_run(tmp_path)
    pgid = owner["cell_pgid"]
    try:
        for i, (case, forge) in enumerate(FORGED.items()):
            leftover = results / "live" / f"{OTHER}.partial-{owner['host']}-{900000 + i}"
            leftover.mkdir(parents=True)
            (leftover / "owner.json").write_text(json.dumps(forge(owner)))
            second = harness("run", str(matrix), "--engine", "venv", "--results", str(results), "--only", OTHER,
                             "--rerun", "all", timeout=600)
            assert second.returncode == 0, (case, second.stderr[-2000:])
            assert "Traceback" not in second.stdout + second.stderr, case
            assert _alive(pgid), f"{case}: the live run's cell was killed"
            assert not leftover.exists(), f"{case}: the leftover folder itself is cleaned"
            if case in ("a list", "a string", "pgid as text", "pgid as bool", "no start time"):
                notes = [line for line in second.stdout.splitlines() if "owner.json: ignored" in line]
                assert len(notes) == 1, (case, second.stdout[-1500:])
        assert owner_path.exists(), "the live run's own folder is untouched"
    finally:
        _stop(run)


@pytest.mark.parametrize("launch", ["fresh", "forked"])
def test_a_genuine_leftover_is_still_ended(tmp_path, launch):
    """The other side: a cell process a killed harness left behind, with every recorded
    fact true, is ended by the next run (a real process group, a real owner file)."""
    from harness.results.store import OWNER_VARIABLE, ResultStore
    store = ResultStore(tmp_path / "results", "run")
    folder = store.run_dir / "env/w/none-c1/b1/r0.partial-x-1"
    folder.mkdir(parents=True)
    spec = folder.resolve() / "spec.json"
    spec.write_text("{}")
    # fresh: the spec on the command line; forked (a warm launcher's child): only the folder as its cwd
    argv = ["bash", "-c", 'sleep 300; : "$1"', "cell", str(spec) if launch == "fresh" else "x"]
    cell = subprocess.Popen(argv, start_new_session=True, cwd=folder if launch == "forked" else None,
                            env={**os.environ, OWNER_VARIABLE: "genuine-run"})
    deadline = time.monotonic() + 10   # the child is bash only once it has exec'd: until then it is this python
    while time.monotonic() < deadline and not Path(f"/proc/{cell.pid}/cmdline").read_bytes().startswith(b"bash"):
        time.sleep(0.01)
    try:
        import socket

        from harness.host.processes import boot_id, process_start
        (folder / "owner.json").write_text(json.dumps({
            "host": socket.gethostname(), "pid": 1, "run_id": "genuine-run", "boot_id": boot_id(),
            "cell_pgid": cell.pid, "cell_start": process_start(cell.pid)}))
        alive_before = cell.poll() is None
        again = ResultStore(tmp_path / "results", "run")
        assert again.clean_partials() == (1, 1), (f"cell alive before: {alive_before}, exit {cell.poll()}; "
                                                   f"notes {again.notes}")
        assert cell.wait(timeout=10) == -9
    finally:
        if cell.poll() is None:
            cell.kill()


@pytest.fixture(scope="module")
def bystander():
    """A live process group that belongs to no cell folder: nothing may ever kill it."""
    proc = subprocess.Popen(["bash", "-c", "sleep 600; : workloads spec.json"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2, 2**40), st.floats(), st.text(max_size=20)),
                     lambda inner: st.one_of(st.lists(inner, max_size=4),
                                             st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_fuzzed_owner_files_never_signal_and_never_raise(tmp_path_factory, bystander, data):
    import socket

    from harness.host.processes import boot_id, process_start
    from harness.results.store import ResultStore
    true_facts = {"host": socket.gethostname(), "boot_id": boot_id(), "cell_pgid": bystander.pid,
                  "cell_start": process_start(bystander.pid), "run_id": "x", "pid": 1}
    # a mix: facts of the live bystander (all true, some, or replaced by fuzz), or any JSON at all
    owner = data.draw(st.one_of(
        _JSON, st.fixed_dictionaries({}, optional={k: st.one_of(st.just(v), _JSON) for k, v in true_facts.items()})))
    store = ResultStore(tmp_path_factory.mktemp("r"), "run")
    folder = store.run_dir / "env/w/none-c1/b1/r0.partial-x-1"
    folder.mkdir(parents=True)
    (folder / "owner.json").write_text(json.dumps(owner))
    removed, ended = store.clean_partials()
    assert (removed, ended) == (1, 0)
    assert bystander.poll() is None, f"killed by {owner!r}"
    assert all("\n" not in note for note in store.notes)


# -- 9. exact messages -----------------------------------------------------------------------
def test_an_unavailable_cell_says_unavailable_once_with_the_real_reason(tmp_path):
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    run = harness("run", str(matrix), "--engine", "local", "--results", str(tmp_path / "r"), timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.lstrip().startswith("unavailable") and "/fault" in line]
    assert len(lines) == 3, run.stdout[-2000:]
    for line in lines:
        assert "unavailable: unavailable" not in line
        assert f"unavailable: {sys.executable}" in line or "does not hold the pinned stack" in line, line
        assert "<path>" not in line, "the live line keeps the path that explains it"
    repro = harness("repro", "e_1/*", "--matrix", str(matrix), "--engine", "local", "--out", str(tmp_path / "b"),
                    timeout=300)
    assert "unavailable: unavailable" not in repro.stdout and "1/1 attempts failed -- unavailable: " in repro.stdout


@pytest.mark.parametrize("host, errno_name", [
    ("unix:///nonexistent/docker.sock", "ENOENT"),
    ("tcp://127.0.0.1:1", "ECONNREFUSED"),
])
def test_a_missing_docker_engine_is_one_line_in_words(tmp_path, host, errno_name):
    import errno
    # the operating system's own reason, in its own words (whatever this C library calls it)
    words = os.strerror(getattr(errno, errno_name))
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    proc = harness("run", str(matrix), "--engine", "docker", "--results", str(tmp_path / "r"),
                   env={"DOCKER_HOST": host}, timeout=120)
    assert proc.returncode == 2, proc.stderr[-1000:]
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and f"no Docker engine answers at {host}: {words};" in line, line
    assert "Error(" not in line and "(2, " not in line and "'Connection aborted.'" not in line, line


def test_an_installed_harness_is_named_by_version_and_file_hash(tmp_path):
    """Run from a copy of the package outside any git checkout (as when installed): the
    results and the report name the harness by version and a hash of its files, not '?'."""
    import shutil
    copy = tmp_path / "installed"
    shutil.copytree(ROOT / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    matrix = tmp_path / "clash.yaml"
    matrix.write_text(CLASH)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    subprocess.run([sys.executable, "-m", "harness", "run", str(matrix), "--engine", "local", "--results",
                    str(tmp_path / "r")], cwd=tmp_path, env=env, capture_output=True, timeout=300, check=False)
    prov = json.loads(next((tmp_path / "r").rglob("result.json")).read_text())["provenance"]
    assert prov.get("harness_commit") is None and len(prov["harness_files_sha256"]) == 64
    subprocess.run([sys.executable, "-m", "harness", "report", str(tmp_path / "r"), "--out", str(tmp_path / "site")],
                   cwd=tmp_path, env=env, capture_output=True, timeout=300, check=True)
    md = (tmp_path / "site" / "report.md").read_text()
    assert f"harness: {prov['harness_version']} (installed; files {prov['harness_files_sha256'][:12]})" in md
    assert "commits: ?" not in md


@pytest.mark.parametrize("cuda, cudnn, shown", [
    (13000, 91900, "CUDA 13.0, cuDNN 9.19.0"), ("12080", "90100", "CUDA 12.8, cuDNN 9.1.0"),
    ("12.3", "8", "CUDA 12.3, cuDNN 8"), (11020, 8902, "CUDA 11.2, cuDNN 8.9.2"),
])
def test_cuda_and_cudnn_versions_read_as_versions(tmp_path, cuda, cudnn, shown):
    """The report of a GPU result whose framework gave CUDA / cuDNN as integers (JAX's
    plugin does; results written before this fix hold them) says 13.0 and 9.19.0."""
    results = _clash_results(tmp_path)
    path = next(results.rglob("result.json"))
    r = json.loads(path.read_text())
    r["seen"] = {"python": "3.12.3", "keras": "3.15.1", "api": "keras3", "backend": "jax", "jax": "0.8.0",
                 "gpus": ["cuda:0"], "cuda": cuda, "cudnn": cudnn}
    path.write_text(json.dumps(r))
    harness("report", str(results), "--out", str(tmp_path / "site"), check=True)
    assert f"JAX 0.8.0: {shown}" in (tmp_path / "site" / "report.md").read_text()


INDIVISIBLE = """name: indivisible
environments:
  # JAX pinned: the harness knows this failure by JAX's exception class (workloads/run.py, indivisible)
  - {python: "3.11", keras: "3.15.1", backend: jax, device: cpu, packages: ["jax==0.10.2", "jaxlib==0.10.2"]}
workloads:
  - {model: convnet, samples: 161, height: 8, width: 8}
  - {model: rnn, cell: gru, samples: 161, layers: 1, units: 8, timesteps: 4}
parallelism:
  - {wrapper: data_parallel, devices: 2}
batch_sizes: [64]
epochs: 1
timeouts: {wall: 600, progress: 300}
"""


def test_an_odd_last_batch_on_data_parallel_is_one_family_that_says_why(tmp_path):
    """Keras 3 on JAX, 2 virtual CPU devices, 129 training rows in batches of 64: the last
    batch has 1 row. JAX's IndivisibleError named each input's rank, so the 4-D convnet
    and the 3-D GRU made two families, and neither said why."""
    matrix = tmp_path / "indivisible.yaml"
    matrix.write_text(INDIVISIBLE)
    harness("run", str(matrix), "--engine", "venv", "--results", str(tmp_path / "r"), timeout=1800)
    errors = [json.loads(p.read_text())["error"] for p in (tmp_path / "r").rglob("result.json")]
    assert len(errors) == 2 and all(errors), errors
    assert errors[0]["signature"] == errors[1]["signature"], [e["signature"] for e in errors]
    for err in errors:
        assert err["message"] == ("the last training batch of 1 rows is not divisible over 2 devices "
                                  "(129 training rows, batch 64)"), err["message"]
        # the framework's own error stays in the chain, under the harness's explanation (its class name and
        # words are JAX's: not asserted)
        outer, root = err["chain"][0], err["chain"][-1]
        assert outer["type"].endswith(".BatchNotDivisible") and outer["message"] == err["message"], err["chain"]
        assert not root["type"].startswith("workloads.") and root["message"].strip(), err["chain"]
        assert root["message"] != err["message"], "the framework's own words kept"


def test_keras3_on_torch_installs_torch_on_gpus_as_on_cpus(tmp_path):
    """The environment's recipe, as a bundle writes it: the GPU one had no torch at all."""
    from harness import matrix as matrix_mod
    from harness.engines.venv import VenvEngine
    from harness.investigate.repro import write_bundle
    path = tmp_path / "torch.yaml"
    path.write_text('environments:\n  - {python: "3.12", keras: "3.15.1", backend: torch, device: cpu}\n'
                    '  - {python: "3.12", keras: "3.15.1", backend: torch, device: gpu}\n'
                    '  - {name: pinned, python: "3.12", keras: "3.15.1", backend: torch, device: gpu,'
                    ' packages: ["torch==2.5.1"]}\nworkloads: [{model: rnn}]\n')
    wanted = {}
    for cell in matrix_mod.load(path).cells:
        write_bundle(tmp_path / cell.environment.name, cell, VenvEngine(), None, [])
        wanted[cell.environment.name] = (tmp_path / cell.environment.name / "environment" /
                                         "requirements.txt").read_text().split()
    assert [r for r in wanted["keras3.15.1-torch"] if r.startswith("torch")] == ["torch"]
    assert [r for r in wanted["keras3.15.1-torch-gpu"] if r.startswith("torch")] == ["torch"]
    assert [r for r in wanted["pinned"] if r.startswith("torch")] == ["torch==2.5.1"], "a pin is not doubled"


def test_keras3_on_tensorflow_names_its_backend(tmp_path):
    matrix = tmp_path / "k3tf.yaml"
    matrix.write_text('name: k3tf\nenvironments:\n  - {python: "3.11", tensorflow: "2.21.0", keras: "3.15.1"}\n'
                      'workloads: [{model: rnn, layers: 1, units: 8, timesteps: 4, features: 4, samples: 256}]\n'
                      'batch_sizes: [64]\nepochs: 1\n')
    results = tmp_path / "r"
    run = harness("run", str(matrix), "--engine", "venv", "--results", str(results), timeout=1800)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    seen = json.loads(next(results.rglob("result.json")).read_text())["seen"]
    assert seen["backend"] == "tensorflow"
    assert "Keras 3.15.1 on tensorflow" in run.stdout and "on ?" not in run.stdout


_PARTS = st.lists(st.sampled_from(["a", "b", "cells", "plots", "site"]), min_size=1, max_size=3)


@given(st.lists(st.tuples(_PARTS, st.sampled_from(["result", "run", "file", "folder"])), max_size=6), _PARTS)
@settings(max_examples=200, deadline=None)
def test_fuzzed_folder_trees_never_give_an_output_folder_near_results(tmp_path_factory, tree, out_parts):
    """Any layout of results, runs and plain files: an output folder the check accepts
    holds no result, and lies in no run or results folder."""
    from harness.errors import UserError
    from harness.files.outputs import check_output_folder
    root = tmp_path_factory.mktemp("t")
    for parts, kind in tree:
        folder = root.joinpath(*parts)
        if any(p.is_file() for p in [folder, *folder.parents] if root in p.parents or p == root):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        if kind == "result":
            (folder / "result.json").write_text("{}")
        elif kind == "run":
            (folder / ".locks").mkdir(exist_ok=True)
        elif kind == "file":
            (folder / "x.txt").write_text("x")
    out = root.joinpath(*out_parts)
    try:
        check_output_folder(out, "--out")
    except UserError:
        return
    cells = {p.parent for p in root.rglob("result.json")}
    runs = {p.parent for p in root.rglob(".locks")}
    results_roots = {p.parent for p in runs}  # a folder of runs
    below = [p for p in cells | runs if out == p or out in p.parents]
    assert not below, f"accepted {out}, which holds {below}"
    around = [p for p in cells | runs | results_roots if p in out.parents or p == out]
    assert not around, f"accepted {out}, inside {around}"


def _empty_image(client) -> str:
    """An image of no files, made here (no registry to pull from, and no other test's image to wait
    for): enough to create containers that are never started."""
    import io
    import tarfile
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    client.api.import_image_from_data(empty.getvalue(), repository="tfkeras-harness-tests/empty", tag="latest")
    return "tfkeras-harness-tests/empty:latest"


def test_docker_leftovers_are_removed_only_when_their_harness_is_provably_dead(docker_client):
    """Real containers with the harness's labels: only those whose starting process is
    provably gone are removed. Another host's container, a live owner, a reused pid's
    live process and labels that do not parse are left alone (they used to be removed,
    or to raise)."""
    import socket

    from rich.console import Console

    from harness.engines.docker import LABEL, DockerEngine
    from harness.host.processes import boot_id, process_start
    image = _empty_image(docker_client)  # containers are created, never started: no files needed
    dead = subprocess.Popen(["true"])
    dead.wait()
    me, host, boot = os.getpid(), socket.gethostname(), boot_id()
    assert host == os.uname().nodename
    live = {f"{LABEL}.host": host, f"{LABEL}.boot": boot, f"{LABEL}.pid": str(me),
            f"{LABEL}.pid-start": str(process_start(me))}
    cases = {  # name: (labels, removed?)
        "live owner": (live, False),
        "another host": ({**live, f"{LABEL}.host": "elsewhere", f"{LABEL}.pid": str(dead.pid)}, False),
        "garbage pid": ({**live, f"{LABEL}.pid": "abc"}, False),
        "pid -1": ({**live, f"{LABEL}.pid": "-1"}, False),
        "dead owner": ({**live, f"{LABEL}.pid": str(dead.pid)}, True),
        "reused pid": ({**live, f"{LABEL}.pid-start": "1"}, True),
        "before a reboot": ({**live, f"{LABEL}.boot": "00000000-0000-0000-0000-000000000000"}, True),
    }
    made = {name: docker_client.containers.create(image, "true", labels={LABEL: "1", f"{LABEL}.test": name, **lab})
            for name, (lab, _) in cases.items()}
    try:
        DockerEngine(docker_client, console=Console(quiet=True))
        left = {c.labels.get(f"{LABEL}.test") for c in docker_client.containers.list(
            all=True, filters={"label": f"{LABEL}.test"})}
        for name, (_, removed) in cases.items():
            assert (name not in left) is removed, name
    finally:
        for container in made.values():
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by the engine
                pass


def test_a_report_folder_from_before_manifests_loses_its_old_pages_only(tmp_path):
    results = _clash_results(tmp_path)
    site = tmp_path / "site"
    (site / "cells").mkdir(parents=True)
    (site / "plots").mkdir()
    for name in ("index.html", "report.md", "results.csv", "results.json", "cells/gone__cell.html",
                 "plots/scaling-gone.png", "cells/notes.txt"):
        (site / name).write_text("old")
    harness("report", str(results), "--out", str(site), check=True)
    assert not (site / "cells" / "gone__cell.html").exists() and not (site / "plots" / "scaling-gone.png").exists()
    assert (site / "cells" / "notes.txt").read_text() == "old"


def test_build_export_refuses_a_results_folder(tmp_path):
    results = _runs_named_cells_and_plots(tmp_path)
    before = _files(results)
    proc = harness("build", str(tmp_path / "cells.yaml"), "--engine", "local", "--results", str(results),
                   "--export", str(results / "cells"), timeout=120)
    assert proc.returncode == 2 and "--export" in proc.stderr and "results folder" in proc.stderr, proc.stderr
    assert _files(results) == before
