"""`harness verdict` as a user's repository meets it: a real git repository made here, its bump
commits written as Dependabot writes them (branch `dependabot/pip/NAME-VERSION`, "Bump NAME from A
to B", the YAML trailer), and planted releases served by a real index on the loopback interface:
a major bump that breaks the script, a patch bump that is safe (with its spread), a minor bump that
lowers the accuracy, a bump that cannot install beside another pin (and the joint move that would),
a commit that moves no pin. Real virtualenvs, real pip, a second or so each (quick tier)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .conftest import harness
from .planted_index import PlantedIndex

QUICK = pytest.mark.quick

API = ("import warnings\n\n\ndef legacy_total(xs):\n"
       "    warnings.warn('legacy_total is deprecated and will be removed in 2.0; use total instead', "
       "DeprecationWarning, stacklevel=2)\n    return sum(xs)\n")
RELEASES = {
    "plantedmend": {"1.0": "2024-01-01T00:00:00Z", "2.0": "2024-03-01T00:00:00Z"},
    "plantedacc": {"1.0": "2024-01-05T00:00:00Z", "1.0.1": "2024-01-20T00:00:00Z", "1.1": "2024-02-05T00:00:00Z"},
    # plantednp 2.0 is refused by plantedtf 1.0 and 1.1 (Requires-Dist plantednp<2); plantedtf 1.2 allows it
    "plantednp": {"1.0": "2024-01-02T00:00:00Z", "2.0": "2024-04-01T00:00:00Z"},
    "plantedtf": {"1.0": "2024-01-03T00:00:00Z", "1.1": "2024-02-01T00:00:00Z", "1.2": "2024-09-01T00:00:00Z"},
}
BODIES = {("plantedmend", "1.0"): API,
          **{("plantedacc", v): "def score():\n    return 0.9\n" for v in ("1.0", "1.0.1")},
          ("plantedacc", "1.1"): "def score():\n    return 0.8\n"}
REQUIRES = {("plantedtf", "1.0"): ["plantednp<2"], ("plantedtf", "1.1"): ["plantednp<2"],
            ("plantedtf", "1.2"): ["plantednp>=1"]}
SCRIPT = """\
import plantedacc
import plantedmend
import plantedtf
from workloads.metrics import report

print(plantedmend.legacy_total([1, 2]))
report("val_accuracy", plantedacc.score())
"""
PINS = {"plantedmend": "1.0", "plantedacc": "1.0", "plantednp": "1.0", "plantedtf": "1.0"}


def git(repo, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dependabot[bot]", "GIT_AUTHOR_EMAIL": "support@github.com",
           "GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": "noreply@github.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def pins_text(pins: dict) -> str:
    return "# the project's pins\n" + "".join(f"{n}=={v}\n" for n, v in pins.items())


def bump(repo, name: str, old: str, new: str, kind: str, start: str = "main") -> str:
    """A branch from `start` with one commit as Dependabot writes it (its branch name, its message
    and YAML trailer); returns the branch, `start` checked out again."""
    branch = f"dependabot/pip/{name}-{new}"
    git(repo, "checkout", "-q", "-b", branch, start)
    req = repo / "requirements.txt"
    req.write_text(req.read_text().replace(f"{name}=={old}", f"{name}=={new}"))
    git(repo, "commit", "-q", "-am", f"Bump {name} from {old} to {new}\n\n"
        f"Bumps [{name}](https://pypi.org/project/{name}) from {old} to {new}.\n\n---\nupdated-dependencies:\n"
        f"- dependency-name: {name}\n  dependency-type: direct:production\n  update-type: version-update:{kind}\n"
        "...\n\nSigned-off-by: dependabot[bot] <support@github.com>")
    git(repo, "checkout", "-q", start)
    return branch


def planted_project(project) -> None:
    """The planted project as a git repository: its script and pins, committed on main."""
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    (project / "train.py").write_text(SCRIPT)
    (project / "requirements.txt").write_text(pins_text(PINS))
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "a project")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("verdict")
    project = root / "proj"
    planted_project(project)
    branches = {"major": bump(project, "plantedmend", "1.0", "2.0", "semver-major"),
                "patch": bump(project, "plantedacc", "1.0", "1.0.1", "semver-patch"),
                "minor": bump(project, "plantedacc", "1.0", "1.1", "semver-minor"),
                "numpy": bump(project, "plantednp", "1.0", "2.0", "semver-major")}
    with PlantedIndex(RELEASES, bodies=BODIES, requires=REQUIRES) as served:
        yield root, project, branches, {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(root / "cache")}


def verdict(repo, head: str, name: str, *extra: str, env: dict | None = None):
    root, project, branches, planted = repo
    out = root / f"v-{name}"
    proc = harness("verdict", str(project), "--base", "main", "--head", branches.get(head, head), "--script",
                   "train.py", "--engine", "venv", "--results", str(root / "r"), "--out", str(out), "--no-reduce",
                   *extra, env={**planted, **(env or {})}, timeout=1200)
    record = json.loads((out / "verdict.json").read_text()) if (out / "verdict.json").is_file() else None
    return proc, record, out


@QUICK
def test_a_major_bump_that_drops_an_api_breaks_with_its_first_bad_release_and_error(repo):
    proc, record, out = verdict(repo, "major", "major")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["schema"] == "harness-verdict/1" and record["verdict"] == "breaks", record
    [part] = record["parts"]
    assert (part["package"], part["from"], part["to"], part["first_bad"]) == ("plantedmend", "1.0", "2.0", "2.0")
    assert "AttributeError" in part["why"] and "legacy_total" in part["why"], part
    assert any("plantedmend<2.0" in a for a in part["advice"]), part["advice"]
    # announced by the run itself: 1.0 warned of the very name 2.0's error gives, and said what to use
    said = part["announced"]
    assert said["by"] == "the warning plantedmend 1.0 printed" and said["name"] == "legacy_total", said
    assert "use total instead" in said["change"] and said["source"].startswith("stderr of cell "), said
    assert not part["reduced"] or "script" not in part["reduced"], part["reduced"]   # no upstream draft
    comment = (out / "COMMENT.md").read_text().splitlines()
    assert comment[0].startswith("**Verdict: breaks") and "plantedmend 1.0 -> 2.0" in comment[0], comment[0]
    assert comment[-1] == "<!-- harness-verdict -->"   # the Action finds its own comment by it
    base, head = record["base"], record["head"]
    assert base["revision"] != head["revision"] and head["asked"].startswith("dependabot/"), (base, head)


@QUICK
def test_a_patch_bump_is_safe_with_the_base_spread_and_the_job_summary(repo, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps' summary\n")
    proc, record, out = verdict(repo, "patch", "patch", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["verdict"] == "safe", record
    acc = record["baseline"]["val_accuracy"]
    assert acc["n"] == 3 and acc["min"] == acc["max"] == 0.9, acc   # three runs of the base: its spread
    [part] = record["parts"]
    assert part["verdict"] == "safe" and len(part["cells"]) == 3, part
    text = summary.read_text()
    assert text.startswith("earlier steps' summary\n") and "**Verdict: safe" in text   # appended, never replaced


@QUICK
def test_a_minor_bump_that_lowers_the_accuracy_changes_values_by_how_much(repo):
    proc, record, _ = verdict(repo, "minor", "minor")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["verdict"] == "changes values", record
    [part] = record["parts"]
    assert part["first_bad"] == "1.1" and "val_accuracy" in part["why"] and "0.8" in part["why"], part


@QUICK
def test_a_bump_that_cannot_install_beside_a_pin_names_it_and_the_joint_move(repo):
    proc, record, out = verdict(repo, "numpy", "numpy")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["verdict"] == "cannot install", record
    [part] = record["parts"]
    [move] = part["joint"]
    assert (move["package"], move["pinned"], move["first"]) == ("plantedtf", "1.0", "1.2"), move
    assert move["tried"] == ["1.1", "1.2"], move     # 1.1 still requires plantednp<2
    assert "plantedtf==1.2" in (out / "COMMENT.md").read_text()
    # every line of the comment is its record's; one edited by hand is named with its line
    audited = harness("verdict", "--audit", "--out", str(out))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    comment = (out / "COMMENT.md").read_text()
    (out / "COMMENT.md").write_text(comment.replace("cannot install", "safe", 1))
    audited = harness("verdict", "--audit", "--out", str(out))
    assert audited.returncode == 1 and "COMMENT.md:1:" in audited.stdout, audited.stdout + audited.stderr
    audited = harness("audit", str(out))   # the one audit of every publication says the same
    assert audited.returncode == 1 and f"{out / 'COMMENT.md'}:1:" in audited.stdout, audited.stdout + audited.stderr
    (out / "verdict.json").write_text("{}")
    assert harness("verdict", "--audit", "--out", str(out)).returncode == 2
    audited = harness("audit", str(out))
    assert audited.returncode == 2 and str(out / "verdict.json") in audited.stderr, audited.stdout + audited.stderr


@QUICK
def test_a_commit_that_moves_no_pin_has_nothing_to_judge(repo):
    _, project, _, _ = repo
    git(project, "checkout", "-q", "-b", "docs-only", "main")
    (project / "NOTES.md").write_text("notes\n")
    git(project, "add", "NOTES.md")
    git(project, "commit", "-q", "-m", "notes")
    git(project, "checkout", "-q", "main")
    proc, record, _ = verdict(repo, "docs-only", "nothing")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["verdict"] == "nothing to judge" and record["parts"] == [], record


@QUICK
@pytest.mark.parametrize("extra, message", [
    (["--base", "no-such-branch"], "--base no-such-branch: not a revision"),
    (["--base-pins", "x.txt"], "not both"),
    (["--requirements", "missing.txt"], "--requirements missing.txt: no such file at main"),
])
def test_bad_input_is_one_line_and_exit_2(repo, extra, message):
    root, project, branches, planted = repo
    args = ["verdict", str(project), "--base", "main", "--head", branches["patch"], "--script", "train.py",
            "--engine", "venv", "--results", str(root / "r-bad"), "--out", str(root / "v-bad")]
    if extra[0] == "--base":
        args[args.index("--base") + 1] = extra[1]
    else:
        args += extra
    proc = harness(*args, env=planted)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@QUICK
def test_a_head_that_moves_a_pin_down_is_refused_in_one_line(repo):
    root, project, branches, planted = repo
    proc = harness("verdict", str(project), "--base", branches["patch"], "--head", "main", "--script", "train.py",
                   "--engine", "venv", "--results", str(root / "r-down"), "--out", str(root / "v-down"), env=planted)
    assert proc.returncode == 2 and "plantedacc down (1.0.1 -> 1.0)" in proc.stderr, proc.stderr


@QUICK
def test_two_pin_files_are_judged_as_two_revisions_are(repo, tmp_path):
    """`--base-pins` and `--head-pins`: the same bump given as two files gets the same verdict."""
    root, project, _, planted = repo
    old, new = tmp_path / "old" / "requirements.txt", tmp_path / "requirements.txt"
    old.parent.mkdir()
    old.write_text(pins_text(PINS))
    new.write_text(pins_text({**PINS, "plantedacc": "1.1"}))
    out = root / "v-files"
    proc = harness("verdict", str(project), "--base-pins", str(old), "--head-pins", str(new), "--script", "train.py",
                   "--engine", "venv", "--results", str(root / "r"), "--out", str(out), "--no-reduce", env=planted)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((out / "verdict.json").read_text())
    assert record["verdict"] == "changes values" and record["base"]["revision"] is None, record
    assert record["moves"]["up"] == {"plantedacc": ["1.0", "1.1"]}, record["moves"]
