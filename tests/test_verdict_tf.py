"""`harness verdict` on a real project: examples/bump-tf215 (TensorFlow 2.15.1, NumPy 1.26.4, a
committed model.h5, a script that fine-tunes it with the legacy optimizers Keras 3 dropped) put in
a git repository made here, each bump a commit as Dependabot writes it, judged with real
TensorFlow in real virtualenvs from PyPI:

- tensorflow 2.15.1 -> 2.16.1 breaks, with the Keras 3 cause, the tf-keras road and model.h5's own
  verdict on the base, the head and the head with tf-keras;
- numpy 1.26.3 -> 1.26.4 (a patch) is safe, with the base's spread;
- numpy 1.26.4 -> 2.0.2 cannot install beside tensorflow 2.15.1, and the joint move is the first
  TensorFlow whose requirements allow it (2.18.0), asked of the installer."""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import ROOT, harness
from .test_verdict import bump, git

pytestmark = [pytest.mark.tf, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "bump-tf215"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("bump-tf")
    proj = root / "proj"
    shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("__pycache__"))
    git(proj, "init", "-q", "-b", "main")
    git(proj, "add", ".")
    git(proj, "commit", "-q", "-m", "the project")
    # the patch bump starts from the release before the pinned NumPy, on a branch of its own
    git(proj, "checkout", "-q", "-b", "numpy-1.26.3", "main")
    req = proj / "requirements.txt"
    req.write_text(req.read_text().replace("numpy==1.26.4", "numpy==1.26.3"))
    git(proj, "commit", "-q", "-am", "the project as it pinned NumPy before")
    git(proj, "checkout", "-q", "main")
    return root, proj


def judged(project, base: str, head: str, name: str, repeats: int):
    """The verdict of one bump. `repeats` is the least its promise needs: a break or an install is
    said from the status, one run a release; a safe verdict from the base's spread, three."""
    root, proj = project
    out = root / f"v-{name}"
    proc = harness("verdict", str(proj), "--base", base, "--head", head, "--script", "train.py", "--engine", "venv",
                   "--repeats", str(repeats), "--results", str(root / "r"), "--out", str(out), timeout=2400)
    record = json.loads((out / "verdict.json").read_text())
    audited = harness("verdict", "--audit", "--out", str(out))   # every line of the comment is its record's
    assert audited.returncode == 0, audited.stdout + audited.stderr
    return proc, record, (out / "COMMENT.md").read_text()


def test_a_bump_to_tf_2_16_breaks_with_the_keras_3_cause_the_tf_keras_road_and_the_model_file(project):
    _, proj = project
    head = bump(proj, "tensorflow", "2.15.1", "2.16.1", "semver-minor")
    proc, record, comment = judged(project, "main", head, "tf", repeats=1)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert record["verdict"] == "breaks", record
    [tf] = [p for p in record["parts"] if p["package"] == "tensorflow"]
    assert tf["first_bad"] == "2.16.1", tf
    error = tf["error"]    # its family and its own words, unmasked: the Keras 3 cause
    assert error["family"].startswith("ImportError at train.py") and "Keras 3" in error["message"], error
    assert tf["announced"]["by"] == "release notes" and "TF_USE_LEGACY_KERAS" in tf["announced"]["change"], tf
    road = tf["road"]
    assert road["mends"] and road["cells"], road     # tf-keras behind tf.keras runs the Keras 2 script
    # what the atlas already knows of TensorFlow 2.16 (its newest patch), each row with its link
    assert tf["atlas"] and all(r["release"].startswith("2.16.") and r["link"].endswith(".md") for r in tf["atlas"])
    [model] = record["models"]
    assert model["file"] == "model.h5" and model["reference"] == "base", model
    readers = model["readers"]
    assert readers["base"]["verdict"] == "same", readers       # the base reads its own file
    assert {"head", "head-tf_keras"} <= set(readers), readers  # and both roads say what they do with it
    assert all(readers[r]["verdict"] in ("same", "differs", "refuses") for r in ("head", "head-tf_keras")), readers
    assert comment.startswith("**Verdict: breaks -- tensorflow 2.15.1 -> 2.16.1")
    assert "model.h5" in comment and "TF_USE_LEGACY_KERAS" in comment


def test_a_patch_bump_of_numpy_is_safe_with_the_base_spread(project):
    _, proj = project
    head = bump(proj, "numpy", "1.26.3", "1.26.4", "semver-patch", start="numpy-1.26.3")
    proc, record, comment = judged(project, "numpy-1.26.3", head, "patch", repeats=3)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert record["verdict"] == "safe", record
    acc = record["baseline"]["val_accuracy"]
    assert acc["n"] == 3 and acc["min"] <= acc["median"] <= acc["max"], acc
    [model] = record["models"]
    assert model["verdict"] == "safe", model
    assert comment.startswith("**Verdict: safe -- numpy 1.26.3 -> 1.26.4") and "over 3 run(s)" in comment


def test_numpy_2_beside_tf_2_15_cannot_install_and_names_the_joint_move(project):
    _, proj = project
    head = bump(proj, "numpy", "1.26.4", "2.0.2", "semver-major")
    proc, record, comment = judged(project, "main", head, "numpy2", repeats=1)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert record["verdict"] == "cannot install", record
    [part] = record["parts"]
    [move] = part["joint"]
    assert (move["package"], move["pinned"], move["first"]) == ("tensorflow", "2.15.1", "2.18.0"), move
    assert "tensorflow==2.18.0" in comment.splitlines()[0]
