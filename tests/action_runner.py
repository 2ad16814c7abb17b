"""A composite action's steps, run in order as a GitHub runner runs them, for the suite.

What a runner does for a composite action and this reproduces: the inputs with their defaults
(expressions included) evaluated against the `github` context -- the event's own payload read from
GITHUB_EVENT_PATH --, each step's `if:` and `${{ }}` expressions, its `env:`, `run:` in bash with the
runner's files (GITHUB_ENV, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ACTION_PATH, RUNNER_TEMP) read
back after it, the outputs of a step by its id. What it does not run, and says so in the log it
returns: a `uses:` step -- another action's code (actions/setup-python: the interpreter on PATH
stands in; actions/cache: nothing is restored, so the run is a cold one).

Expressions are read by a small evaluator: a dotted name in the contexts, a quoted string, `==`,
`!=`, `&&`, `||`. One it cannot read fails the run, so the action never grows an expression the
suite silently skips."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*")


class Unreadable(Exception):
    """An expression the evaluator does not read."""


@dataclass
class Run:
    steps: list[dict] = field(default_factory=list)     # per step: name, kind (run/uses/skipped), rc
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)   # what GITHUB_ENV added
    rc: int = 0                                         # the first failed step's status (0: none)
    log: str = ""


def _lookup(path: str, contexts: dict):
    node = contexts
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return ""
    return node


def value(expr: str, contexts: dict):
    """One expression's value (GitHub's rules for the forms read here)."""
    expr = expr.strip()
    for op in ("||", "&&"):
        if op in expr:
            parts = [value(p, contexts) for p in expr.split(op)]
            if op == "&&":
                return next((p for p in parts if not p), parts[-1])
            return next((p for p in parts if p), parts[-1])
    for op in ("==", "!="):
        if op in expr:
            a, b = (value(p, contexts) for p in expr.split(op, 1))
            same = str(a).lower() == str(b).lower()
            return same if op == "==" else not same
    if len(expr) >= 2 and expr[0] == expr[-1] == "'":
        return expr[1:-1].replace("''", "'")
    if NAME.fullmatch(expr):
        return _lookup(expr, contexts)
    raise Unreadable(expr)


def text(template: str, contexts: dict) -> str:
    """A string with every `${{ }}` replaced by its value."""
    def one(m):
        v = value(m.group(1), contexts)
        return "" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    return EXPR.sub(one, str(template))


def _read_pairs(path: Path) -> dict[str, str]:
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, val = line.partition("=")
            if sep:
                out[key] = val
    return out


def run(action_dir: Path, inputs: dict[str, str], event: dict, env: dict[str, str], temp: Path,
        workdir: Path, timeout: float = 3600) -> Run:
    """Run the composite action in `action_dir` for `event` (a pull_request payload)."""
    action = yaml.safe_load((action_dir / "action.yml").read_text())
    assert action["runs"]["using"] == "composite", action["runs"]
    temp.mkdir(parents=True, exist_ok=True)
    event_path = temp / "event.json"
    event_path.write_text(json.dumps(event))
    files = {name: temp / f"{name.lower()}.txt" for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    github = {"event": event, "event_name": "pull_request", "token": env.get("GITHUB_TOKEN", ""),
              "repository": event["repository"]["full_name"], "head_ref": event["pull_request"]["head"]["ref"],
              "base_ref": event["pull_request"]["base"]["ref"], "action_path": str(action_dir)}
    contexts: dict = {"github": github, "runner": {"temp": str(temp), "os": "Linux"}, "steps": {}, "env": {}}
    given = {}
    for name, spec in (action.get("inputs") or {}).items():
        given[name] = inputs[name] if name in inputs else text((spec or {}).get("default", ""), contexts)
    contexts["inputs"] = given
    done = Run()
    base_env = {**os.environ, **env, "GITHUB_ACTION_PATH": str(action_dir), "RUNNER_TEMP": str(temp),
                "GITHUB_EVENT_PATH": str(event_path), "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_REPOSITORY": github["repository"], "GITHUB_WORKSPACE": str(workdir),
                **{k: str(p) for k, p in files.items()}}
    for step in action["runs"]["steps"]:
        name = step.get("name") or step.get("uses") or step.get("id")
        if "if" in step and not value(str(step["if"]).removeprefix("${{").removesuffix("}}"), contexts):
            done.steps.append({"name": name, "kind": "skipped (its if: is false)"})
            continue
        if "uses" in step:
            done.steps.append({"name": name, "kind": f"not run: {step['uses']} is another action's code"})
            continue
        files["GITHUB_OUTPUT"].write_text("")
        step_env = {**base_env, **done.env, **{k: text(v, contexts) for k, v in (step.get("env") or {}).items()}}
        assert step.get("shell") == "bash", f"{name}: a composite run step names its shell"
        proc = subprocess.run(["bash", "-e", "-c", text(step["run"], contexts)], cwd=workdir, env=step_env,
                              capture_output=True, text=True, timeout=timeout)
        done.log += f"== {name} (exit {proc.returncode})\n{proc.stdout[-6000:]}{proc.stderr[-6000:]}\n"
        done.env.update(_read_pairs(files["GITHUB_ENV"]))
        if step.get("id"):
            done.outputs[step["id"]] = _read_pairs(files["GITHUB_OUTPUT"])
            contexts["steps"][step["id"]] = {"outputs": done.outputs[step["id"]]}
        done.steps.append({"name": name, "kind": "run", "rc": proc.returncode})
        if proc.returncode != 0:
            done.rc = proc.returncode
            break
    summary = files["GITHUB_STEP_SUMMARY"]
    done.log += f"== summary\n{summary.read_text() if summary.exists() else ''}"
    return done
