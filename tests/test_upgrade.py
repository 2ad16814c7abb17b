"""`harness upgrade` on a planted index: a user's project pinning two planted packages, its
training script calling an API one of them drops (2.0) and brings back (2.2), and reporting an
accuracy the other lowers (1.2). One report holds the break, the release that mends it and the
accuracy shift, each line with the cells behind it; a second run costs no new cell. Real
virtualenvs, a second or so each (quick tier). Then bad input: one line, exit 2."""

from __future__ import annotations

import json
import shlex
import shutil

import pytest

from .conftest import ROOT, harness
from .planted_index import PlantedIndex

QUICK = pytest.mark.quick

API = "def legacy_total(xs):\n    return sum(xs)\n"
MEND = {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-03-01T00:00:00Z", "2.1": "2024-04-01T00:00:00Z",
        "2.2": "2024-06-01T00:00:00Z", "3.0": "2024-08-01T00:00:00Z"}
ACC = {"1.0": "2024-01-05T00:00:00Z", "1.1": "2024-02-05T00:00:00Z", "1.2": "2024-05-05T00:00:00Z"}
BODIES = {**{("plantedmend", v): API for v in ("1.0", "2.2", "3.0")},
          **{("plantedacc", v): "def score():\n    return 0.9\n" for v in ("1.0", "1.1")},
          ("plantedacc", "1.2"): "def score():\n    return 0.8\n"}
SCRIPT = """\
import plantedacc
import plantedmend
from workloads.metrics import report

print(plantedmend.legacy_total([1, 2]))
report("val_accuracy", plantedacc.score())
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("upgrade")
    (root / "proj").mkdir()
    (root / "proj" / "train.py").write_text(SCRIPT)
    (root / "proj" / "requirements.txt").write_text("# the project's pins\nplantedmend==1.0\nplantedacc==1.0\n")
    with PlantedIndex({"plantedmend": MEND, "plantedacc": ACC}, bodies=BODIES) as served:
        yield root, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def upgrade(root, env, *extra: str):
    return harness("upgrade", str(root / "proj"), "--script", "train.py", "--package", "plantedmend==2.1",
                   "--package", "plantedacc", "--engine", "venv", "--results", str(root / "r"),
                   "--out", str(root / "u"), "--budget", "30", *extra, env=env, timeout=1200)


@pytest.fixture(scope="module")
def first(planted):
    """The project form, run once: its printout and its report."""
    root, env = planted
    proc = upgrade(root, env)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    return proc, json.loads((root / "u" / "upgrade.json").read_text())


@QUICK
def test_one_report_holds_a_break_its_mend_and_an_accuracy_shift(planted, first):
    root, env = planted
    proc, report = first
    out = proc.stdout
    mend, acc = report["packages"]
    assert (mend["package"], mend["current"], mend["target"], mend["frontier"]) == ("plantedmend", "1.0", "2.1", "1.0")
    b = mend["blocker"]
    assert (b["kind"], b["first_bad"], b["last_good"]) == ("break", "2.0", "1.0")
    assert "legacy_total" in b["why"] and b["cells"] and all("plantedmend2.0" in c for c in b["cells"])
    assert (b["mend_release"]["found"], b["mend_release"]["first_good"]) == (True, "2.2")
    assert (acc["package"], acc["target"], acc["frontier"]) == ("plantedacc", "1.2", "1.1")
    assert (acc["blocker"]["kind"], acc["blocker"]["first_bad"]) == ("accuracy", "1.2")
    assert "val_accuracy 0.800" in acc["blocker"]["why"]
    combined = report["combined"]
    assert combined["moved"] == {"plantedacc": "1.1"} and combined["holds"] is True and combined["cells"]
    md = (root / "u" / "UPGRADE.md").read_text()
    assert "| plantedmend | 1.0 | 1.0 | 2.1 | break at 2.0 |" in md
    assert "| plantedacc | 1.0 | 1.1 | 1.2 | accuracy at 1.2 |" in md
    assert "move to `plantedmend==2.2`, the first release that mends it" in md
    # the report is its record's, line by line (`harness audit`); a line edited by hand is named
    audited = harness("audit", str(root / "u"))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    copy = root / "u-edited"
    shutil.copytree(root / "u", copy)
    (copy / "UPGRADE.md").write_text(md.replace("break at 2.0", "safe", 1))
    audited = harness("audit", str(copy), "--json")
    [found] = json.loads(audited.stdout)
    assert audited.returncode == 1 and found["check"] == "rendered", audited.stdout + audited.stderr
    assert found["where"].startswith(f"{copy / 'UPGRADE.md'}:") and "break at 2.0" in found["what"], found
    assert "pin `plantedacc<1.2`" in md and "python -m harness bisect" in md
    for line in md.splitlines():  # every claim names its cells
        if line.startswith(("- first bad", "- last good", "| planted")) or "mends it" in line:
            assert "`" in line or "(" in line, line
    assert "cell(s) in all" in out
    # the same command again: every answer from finished cells, none run now
    assert b["reduced"].get("script") or b["reduced"].get("problem"), b["reduced"]
    again = upgrade(root, env, "--no-reduce")
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    second = json.loads((root / "u" / "upgrade.json").read_text())
    assert [p["ran"] for p in second["packages"]] == [0, 0]
    assert second["packages"][0]["blocker"]["first_bad"] == "2.0"


@QUICK
def test_the_api_gives_the_same_answers_in_process(planted, first, monkeypatch):
    """`api.upgrade`, the function the verdict builds on: the command line's answers as a value, from
    the same finished cells (none run again), and bad input as the command line's one line."""
    from harness import api
    from harness.index import pipsettings

    root, env = planted
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(pipsettings, "_settings", None)   # read once per process: read again with this index
    got = api.upgrade(root / "proj", script="train.py", packages=["plantedmend==2.1", "plantedacc"],
                      engine="venv", results=root / "r", out=root / "u-api", reduce=False)
    assert got.exit_code == 1 and answers(got.report) == answers(first[1]), got.report
    assert [p["ran"] for p in got.report["packages"]] == [0, 0]
    assert got.packages["plantedmend"]["blocker"]["first_bad"] == "2.0" and got.markdown.is_file()
    with pytest.raises(api.UserError, match="does not pin nothere"):
        api.upgrade(root / "proj", script="train.py", packages=["nothere"], engine="venv", results=root / "r",
                    out=root / "u-api")


MATRIX = """\
name: planted-stack
environments:
  - name: pinned
    python: "3.11"
    packages: [plantedmend==1.0, plantedacc==1.0]
  - name: elsewhere
    python: "3.11"
    packages: [plantedmend==2.2, plantedacc==1.1]
workloads:
  - script: proj/train.py
"""


def answers(report: dict) -> list:
    """What an upgrade concluded, apart from where it ran: per package its ends, frontier and
    blocker (with its mend), and the combined stack."""
    out = []
    for p in report["packages"]:
        b = p.get("blocker") or {}
        out.append((p["package"], p["current"], p["target"], p["frontier"], p["holds"], b.get("kind"),
                    b.get("first_bad"), b.get("last_good"), (b.get("mend_release") or {}).get("first_good")))
    c = report["combined"]
    return out + [(c["moved"], c["holds"])]


@QUICK
def test_a_cell_of_a_matrix_gets_the_project_forms_answers(planted, first):
    """The same pins and script, given as a cell of a matrix (the environment's own name, a second
    environment beside it): the same answers; the report names the matrix and the cell, and the
    matrix it wrote holds the cell's environment as the matrix defines it, its commands' cells."""
    from harness.matrix import load

    root, env = planted
    (root / "stack.yaml").write_text(MATRIX)
    out = root / "um"
    proc = harness("upgrade", "--matrix", str(root / "stack.yaml"), "--cell", "pinned/*", "--package",
                   "plantedmend==2.1", "--package", "plantedacc", "--engine", "venv", "--results", str(root / "rm"),
                   "--out", str(out), "--no-reduce", env=env, timeout=1200)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    report = json.loads((out / "upgrade.json").read_text())
    assert answers(report) == answers(first[1])
    assert report["from"]["cell"] == "pinned/*" and report["from"]["environment"] == "pinned"
    assert report["from"]["cells"] == ["pinned/train/none-c1/b128/r0"] and report["project"] is None
    assert all(c.startswith("pinned-plantedmend") for c in report["packages"][0]["blocker"]["cells"])
    md = (out / "UPGRADE.md").read_text()
    assert "stack.yaml`, cell `pinned/*` (environment `pinned`" in md
    assert "| plantedmend | 1.0 | 1.0 | 2.1 | break at 2.0 |" in md
    written = load(out / "matrix.yaml")
    [base] = [e for e in written.environments if e.name == "pinned"]
    original = [c for c in load(root / "stack.yaml").cells if c.environment.name == "pinned"]
    assert base == original[0].environment and [c.id for c in written.cells if c.environment == base] == \
        [c.id for c in original]
    assert [c.workload.params["code"]["sha256"] for c in written.cells] == \
        [original[0].workload.params["code"]["sha256"]]  # the same code, from a matrix elsewhere
    for cmds in report["commands"].values():  # every reproduce command names the written matrix's cells
        assert f"bisect {out / 'matrix.yaml'}" in cmds["search"] and "--cell 'pinned/train/none-c1/b128/*'" in \
            cmds["search"], cmds
    # and they run: the search's command, from the cells the upgrade ran (none run now)
    search = harness(*shlex.split(report["commands"]["plantedmend"]["search"])[3:], cwd=root, env=env, timeout=600)
    assert search.returncode == 0, search.stdout[-3000:] + search.stderr[-3000:]
    assert "first bad: plantedmend 2.0" in search.stdout and "(0 run now" in search.stdout, search.stdout[-3000:]


@QUICK
@pytest.mark.parametrize("args, message", [
    (["--matrix", "M", "--cell", "pinned/*", "--script", "train.py"], "--matrix/--cell or a project (--script)"),
    (["--matrix", "M", "--cell", "pinned/*", "PROJ"], "--matrix/--cell or a project (PROJECT)"),
    (["--matrix", "M", "--cell", "pinned/*", "--python-version", "3.10"], "(--python-version), not both"),
    (["--matrix", "M"], "--matrix FILE and --cell GLOB go together"),
    (["--cell", "pinned/*", "PROJ", "--script", "train.py"], "--matrix FILE and --cell GLOB go together"),
    (["--matrix", "M", "--cell", "nosuch/*"], "--cell 'nosuch/*': no cell of"),
    (["--matrix", "M", "--cell", "*"], "--cell '*': cells of 2 environments (pinned, elsewhere)"),
    (["--matrix", "M", "--cell", "pinned/*", "--package", "numpy"], "does not pin numpy"),
])
def test_a_cell_mixed_with_a_project_or_matching_nothing_is_one_line(planted, tmp_path, args, message):
    root, env = planted
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(SCRIPT)
    (tmp_path / "proj" / "requirements.txt").write_text("plantedmend==1.0\n")
    (tmp_path / "m.yaml").write_text(MATRIX)
    given = [str(tmp_path / "m.yaml") if a == "M" else str(tmp_path / "proj") if a == "PROJ" else a for a in args]
    proc = harness("upgrade", *given, "--engine", "venv", "--results", str(tmp_path / "r"),
                   "--out", str(tmp_path / "u"), env=env, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:] + proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "u").exists()  # refused before anything was written


@QUICK
@pytest.mark.parametrize("files, args, message", [
    ({}, [], "no requirements.txt, pyproject.toml or lock"),
    ({"requirements.txt": "plantedmend>=1.0\n"}, [], "requirements.txt:1: 'plantedmend>=1.0' is not an exact pin"),
    ({"requirements.txt": "plantedmend==1.0\nthis is not it\n"}, [], "requirements.txt:2:"),
    ({"requirements.txt": "plantedmend==1.0\n"}, ["--package", "nosuchpackage"], "does not pin nosuchpackage"),
    ({"requirements.txt": "plantedmend==1.0\n"}, ["--package", "plantedmend==0.5"], "not newer than"),
    ({"requirements.txt": "plantedmend==1.0\n"}, ["--package", "plantedmend==9.9"], "not a release of plantedmend"),
    ({"requirements.txt": "plantedmend==1.0\n"}, [], "pins none of"),
    ({"pyproject.toml": "[project\n"}, [], "not TOML"),
    ({"requirements.txt": "plantedmend==1.0\n"}, ["--package", "plantedmend", "--python-version", "three"],
     "--python-version expects X.Y"),
])
def test_bad_input_is_one_line_and_exit_2(planted, tmp_path, files, args, message):
    root, env = planted
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(SCRIPT)
    proc = harness("upgrade", str(tmp_path), "--script", "train.py", *args, "--engine", "venv",
                   "--results", str(tmp_path / "r"), "--out", str(tmp_path / "u"), env=env, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:] + proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@QUICK
def test_no_workload_is_one_line(planted, tmp_path):
    root, env = planted
    (tmp_path / "requirements.txt").write_text("plantedmend==1.0\n")
    proc = harness("upgrade", str(tmp_path), "--package", "plantedmend", "--results", str(tmp_path / "r"),
                   "--out", str(tmp_path / "u"), env=env, timeout=120)
    assert proc.returncode == 2 and "name the workload: --script FILE" in proc.stderr, proc.stderr


@pytest.mark.tf
@pytest.mark.slow
def test_a_keras_2_script_pinned_to_tf_2_15_is_blocked_at_2_16_and_tf_keras_mends_it(tmp_path):
    """The real case (examples/upgrade-tf215): a Keras 2 script that sets Adam's `lr`, pinned to
    TensorFlow 2.15.1. TensorFlow 2.16 made tf.keras Keras 3, which refuses `lr`: the frontier is
    2.15.1, the blocker 2.16.1 -- a change TensorFlow's notes announce, so the advice is theirs and no
    report upstream is drafted -- and tf-keras behind tf.keras at that release mends the
    error. Whether it also keeps the script's accuracy is said from several runs of each side: the
    script's weights are unseeded, so one run of each could not tell a change from noise."""
    # the target is the first Keras 3 release: the bisect has nothing between, and the search for a release
    # that mends it still runs to the newest (2.21.0) -- the smallest stack set that shows every answer
    proc = harness("upgrade", str(ROOT / "examples" / "upgrade-tf215"), "--script", "train.py", "--package",
                   "tensorflow==2.16.1", "--engine", "venv", "--results", str(tmp_path / "r"),
                   "--out", str(tmp_path / "u"), timeout=1800)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]   # something blocks
    report = json.loads((tmp_path / "u" / "upgrade.json").read_text())
    [tf] = report["packages"]
    assert (tf["current"], tf["frontier"], tf["target"]) == ("2.15.1", "2.15.1", "2.16.1"), tf
    blocker = tf["blocker"]
    assert blocker["first_bad"] == "2.16.1" and "lr" in blocker["why"], blocker
    setting = blocker["mend_setting"]
    assert setting["mends"] and setting["cells"], setting
    values = setting["values"]
    assert len(values["cells"]) >= 3 and len(values["baseline_cells"]) >= 3, values
    assert "runs" in values["why"] or "[" in values["why"], values  # said with its spread
    said = blocker["announced"]
    assert said["by"] == "release notes" and "v2.16" in said["source"] and "TF_USE_LEGACY_KERAS" in said["change"]
    assert "script" not in blocker["reduced"], "an announced change gets the code change, not an upstream draft"
    md = (tmp_path / "u" / "UPGRADE.md").read_text()
    assert "2.16.1" in md and "change the code:" in md and "report it upstream" not in md
    assert "no release up to 2.21.0 mends it" in md


TF210_SCRIPT = '''\
"""A team's training script from late 2022: TensorFlow 2.10 and NumPy 1.23, nothing of the harness."""
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
x = rng.normal(size=(512, 8)).astype(np.float)
y = (x[:, 0] + x[:, 1] > 0).astype("int32")
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(8,)),
                             tf.keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=0.01, decay=1e-4),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=1, batch_size=64, verbose=2)
'''


@pytest.mark.tf
@pytest.mark.slow
def test_a_tf_2_10_project_gets_its_python_from_its_pins_and_the_announced_changes_advice(tmp_path):
    """A user's project as written -- TensorFlow 2.10.1 and NumPy 1.23.5 pinned, a script that knows
    nothing of the harness -- run without --python-version: the Python is the newest both pins have
    wheels for (3.10; TensorFlow 2.10 has none for 3.11), and each package's first bad release is
    found: TensorFlow 2.11.0 (the new optimizers refuse `decay`) and NumPy 1.24.0 (`np.float` gone).
    Both are removals their projects announced, so the advice is the code change their notes name,
    with its source, and no report upstream is drafted."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("tensorflow==2.10.1\nnumpy==1.23.5\n")
    (project / "train.py").write_text(TF210_SCRIPT)
    proc = harness("upgrade", str(project), "--script", "train.py", "--package", "tensorflow==2.11.0",
                   "--package", "numpy==1.24.0", "--engine", "venv", "--results", str(tmp_path / "r"),
                   "--out", str(tmp_path / "u"), timeout=2400)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "u" / "upgrade.json").read_text())
    assert report["python"] == "3.10" and "tensorflow==2.10.1" in report["python_why"], report["python_why"]
    tf, np_ = report["packages"]
    assert (tf["package"], tf["frontier"], tf["blocker"]["first_bad"]) == ("tensorflow", "2.10.1", "2.11.0"), tf
    assert (np_["package"], np_["frontier"], np_["blocker"]["first_bad"]) == ("numpy", "1.23.5", "1.24.0"), np_
    assert "decay" in tf["blocker"]["why"] and "float" in np_["blocker"]["why"]
    for p, source in ((tf, "v2.11.0"), (np_, "1.24.0-notes")):
        said = p["blocker"]["announced"]
        assert said["by"] == "release notes" and source in said["source"], said
        assert "script" not in p["blocker"]["reduced"], p["blocker"]["reduced"]
    md = (tmp_path / "u" / "UPGRADE.md").read_text()
    assert "tf.keras.optimizers.legacy.Adam" in md and "`float`" in md and "report it upstream" not in md


@QUICK
def test_a_newest_safe_release_that_installs_only_with_another_pin_moved_says_so_and_the_stack_moves_it(tmp_path):
    """plantedtop 2.0 needs plantedlow >= 2, the project pins plantedlow 1.0: 2.0 is tried with
    plantedlow moved and holds. The table says it installs only so, and the combined stack is
    tried with plantedlow moved too -- as pinned, it would not install at all."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text("import plantedtop\nfrom workloads.metrics import report\n"
                                                "report('val_accuracy', 0.9)\n")
    (tmp_path / "proj" / "requirements.txt").write_text("plantedtop==1.0\nplantedlow==1.0\n")
    days = {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-03-01T00:00:00Z"}
    with PlantedIndex({"plantedtop": days, "plantedlow": days},
                      requires={("plantedtop", "2.0"): ["plantedlow>=2.0"]}) as served:
        proc = harness("upgrade", str(tmp_path / "proj"), "--script", "train.py", "--package", "plantedtop",
                       "--engine", "venv", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "u"),
                       "--no-reduce", env={"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(tmp_path / "cache")},
                       timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "u" / "upgrade.json").read_text())
    [top] = report["packages"]
    assert (top["frontier"], top["frontier_moved_with"]["with"]) == ("2.0", ["plantedlow"]), top
    page = (tmp_path / "u" / "UPGRADE.md").read_text()
    assert "| plantedtop | 1.0 | 2.0 (installs only with plantedlow 2.0 moved) |" in page, page
    combined = report["combined"]
    assert combined["holds"] is True and combined["moved_with"] == ["plantedlow"], combined
