"""Post the verdict's comment on the pull request, or update the one posted before.

The action's own step, not the harness's: the harness writes files and talks to no forge. The
comment is found by the marker line the harness ends it with (harness.verdict.writers.MARKER), so
every push updates one comment instead of adding another. GitHub's REST API, with the variables a
runner sets: GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_EVENT_PATH (the pull_request event's payload,
for its number) and the token in GITHUB_TOKEN.

    python comment.py COMMENT.md
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from harness.verdict.writers import MARKER

PER_PAGE = 100


def call(method: str, url: str, token: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28", **({"Content-Type": "application/json"} if data else {})})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


def ours(api: str, repo: str, number: int, token: str) -> int | None:
    """The id of the comment posted before (its body holds the marker), if there is one."""
    page = 1
    while True:
        got = call("GET", f"{api}/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}&page={page}", token)
        for comment in got:
            if MARKER in (comment.get("body") or ""):
                return comment["id"]
        if len(got) < PER_PAGE:
            return None
        page += 1


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: comment.py COMMENT.md", file=sys.stderr)
        return 2
    body = open(argv[0], encoding="utf-8").read()
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo, token = os.environ["GITHUB_REPOSITORY"], os.environ["GITHUB_TOKEN"]
    with open(os.environ["GITHUB_EVENT_PATH"], encoding="utf-8") as f:
        number = json.load(f)["pull_request"]["number"]
    found = ours(api, repo, number, token)
    if found is None:
        posted = call("POST", f"{api}/repos/{repo}/issues/{number}/comments", token, {"body": body})
        print(f"posted the verdict: {posted.get('html_url', posted.get('id'))}")
    else:
        call("PATCH", f"{api}/repos/{repo}/issues/comments/{found}", token, {"body": body})
        print(f"updated the verdict: comment {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
