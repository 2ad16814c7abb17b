"""Chains: a cell that consumes what another cell produced.

Many real regressions are "saved with version A, loaded with version B". A
workload says ``needs: save-model`` (the same environment's cell) or
``needs: {workload: save-model, environment: tf2.15}`` (another stack's);
the consumer cell then

- runs only after its producer finished (the local runner runs cells in
  waves; a producer re-run re-runs its consumers, through the consumer's
  spec, which holds the producer's spec hash);
- gets the producer's files -- what it wrote under ``$HARNESS_OUTPUT`` -- as
  read-only files in its own folder (``inputs/<name>/``; the path is in
  ``$HARNESS_INPUT``, and ``$HARNESS_INPUT_<NAME>`` per producer), so every
  engine (a container mounts only the cell's folder) and a repro bundle see
  the same thing;
- is ``unavailable``, with the reason, when its producer did not end ``ok``
  (it is tried again on the next run, like any unavailable cell) -- unless the
  need says ``optional: true``: then the consumer runs with what the other
  producers left, and its ``needs`` record says which producer handed nothing
  and why (a grid whose every reader reads every writer loses one writer's
  column for a writer that fails, not every reader).

The link is recorded in both results (``needs`` in the consumer's, ``feeds``
in the producer's). ``after:`` (same forms) is the link without the files:
the order and the producer's success only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from harness import names, status
from harness.files.ownfiles import link_or_copy
from harness.results.result import Result, load_folder
from harness.results.store import read_json, write_json
from harness.workloads.protocol import INPUTS_DIR, OUTPUT_DIR

NEEDS_FILE = "needs.json"   # what a consumer was handed, written into its folder before it runs


class Broken(Exception):
    """A producer has no usable result: the consumer cannot run."""


def parse_needs(check, where: str, raw, files: bool = True) -> list[dict]:
    """`needs:` (or `after:`, files=False) as written (a name, a mapping, or a list of those)
    -> [{workload, environment, as, files}]."""
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(raw, list) else where
        if isinstance(item, str):
            item = {"workload": item}
        if not isinstance(item, dict):
            check.problem(at, f"expected a workload name or {{workload: NAME, environment: NAME}}, got {item!r:.60}")
            continue
        check.keys(at, item, {"workload": str, "environment": str, "as": str, "optional": bool},
                   required=("workload",))
        for key in ("workload", "environment", "as"):
            if isinstance(item.get(key), str):
                check.name(f"{at}.{key}", item[key])
        out.append({"workload": item.get("workload"), "environment": item.get("environment"),
                    "as": item.get("as") or item.get("workload"), "files": files,
                    **({"optional": True} if item.get("optional") is True else {})})
    return out


def carries_files(need: dict) -> bool:
    """Whether a need hands the producer's files over (`needs:`), or only orders the consumer
    after the producer's success (`after:`, files false)."""
    return need.get("files", True) is not False


def spec_sha256(cell) -> str:
    return spec_sha256_of(cell.spec())


def spec_sha256_of(spec: dict) -> str:
    """A producer's spec as its consumers hold it (a spec.json read back gives the same): what it
    asks, not what it expects."""
    spec = {k: v for k, v in spec.items() if k != "expect"}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def _producer(cell, candidates):
    """The producer cell for `cell`: the one with the same parallelism, batch and repeat, else the
    same repeat, else the first."""
    for same in (lambda c: (c.parallelism.label, c.batch_size, c.repeat) ==
                 (cell.parallelism.label, cell.batch_size, cell.repeat),
                 lambda c: c.repeat == cell.repeat, lambda c: True):
        found = [c for c in candidates if same(c)]
        if found:
            return found[0]
    return None


def link(check, cells: list) -> list:
    """Resolve every `needs:` to producer cells, in order (producers first, so a consumer's spec
    holds its producer's final spec hash); problems (no such workload or environment, a cycle)
    go to the checker."""
    by_key = defaultdict(list)
    for cell in cells:
        by_key[(cell.environment.name, cell.workload.name)].append(cell)
    edges: dict[str, list] = {}
    for cell in cells:
        wanted = []
        for need in (cell.workload.params.get("needs") or []) + (cell.workload.params.get("after") or []):
            env = need["environment"] or cell.environment.name
            producer = _producer(cell, by_key.get((env, need["workload"]), []))
            if producer is None:
                check.problem(f"workloads.{cell.workload.name}.needs",
                              f"no cell of workload '{need['workload']}' in environment '{env}' "
                              "(check the names, include and exclude)")
                continue
            wanted.append((producer.id, need["as"], need.get("files", True), need.get("optional", False)))
        if wanted:
            edges[cell.id] = wanted
    if check.problems:
        return cells
    order = _topological(check, [c.id for c in cells], {k: [(p, a) for p, a, _, _ in v] for k, v in edges.items()})
    if order is None:
        return cells
    final = {c.id: c for c in cells}
    feeds = defaultdict(list)
    for cid in order:
        if cid not in edges:
            continue
        needs = tuple({"cell": pid, "as": as_, "spec_sha256": spec_sha256(final[pid]),
                       **({} if files else {"files": False}), **({"optional": True} if optional else {})}
                      for pid, as_, files, optional in edges[cid])
        final[cid] = replace(final[cid], needs=needs)
        for pid, _, _, _ in edges[cid]:
            feeds[pid].append(cid)
    for pid, consumers in feeds.items():
        final[pid] = replace(final[pid], feeds=tuple(consumers))
    return [final[c.id] for c in cells]


def _topological(check, ids: list[str], edges: dict[str, list]) -> list[str] | None:
    state: dict[str, int] = {}
    order: list[str] = []
    for start in ids:
        if start in state:
            continue
        stack = [(start, iter(p for p, _ in edges.get(start, [])))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                order.append(node)
                stack.pop()
            elif state.get(nxt) == 1:
                check.problem("workloads", f"'needs' makes a cycle through cell {nxt}")
                return None
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(p for p, _ in edges.get(nxt, []))))
    return order


def waves(cells: list) -> list[list]:
    """The cells in waves: each wave's producers are in an earlier one (or not being run)."""
    ids = {c.id for c in cells}
    depth: dict[str, int] = {}
    by_id = {c.id: c for c in cells}

    def level(cell) -> int:
        if cell.id not in depth:
            depth[cell.id] = 0
            depth[cell.id] = max([level(by_id[n["cell"]]) + 1 for n in cell.needs if n["cell"] in ids] + [0])
        return depth[cell.id]

    out: dict[int, list] = defaultdict(list)
    for cell in cells:
        out[level(cell)].append(cell)
    return [out[k] for k in sorted(out)]


def with_consumers(todo: list, cells: list) -> list:
    """`todo` plus every cell of `cells` that consumes (directly or not) a cell of `todo`:
    a producer that runs again makes new files, so what consumed the old ones runs again."""
    chosen = {c.id for c in todo}
    grew = True
    while grew:
        grew = False
        for cell in cells:
            if cell.id not in chosen and any(n["cell"] in chosen for n in cell.needs):
                chosen.add(cell.id)
                grew = True
    return [c for c in cells if c.id in chosen]


def producers_of(cell, cells: list) -> list:
    """The cells `cell` needs, directly or not, producers first (for repro)."""
    by_id = {c.id: c for c in cells}
    out: list = []

    def visit(c) -> None:
        for need in c.needs:
            producer = by_id.get(need["cell"])
            if producer is not None and producer not in out:
                visit(producer)
                out.append(producer)
    visit(cell)
    return out


def _variable(name: str) -> str:
    return "HARNESS_INPUT_" + "".join(ch if ch.isalnum() else "_" for ch in name.upper())


def hand_over(cell, run_dir: Path, work: Path) -> None:
    """Put each producer's files into the consumer's folder, read-only, before it runs; a Broken
    when a producer has no `ok` result. Files are hard links where the filesystem allows (no
    copy of a big model), else copies; either way their mode is read-only."""
    if not cell.needs:
        return
    handed = []
    for need in cell.needs:
        producer_dir = run_dir / need["cell"]
        result = load_folder(producer_dir)  # through the result model: a wrong-shaped file is no result
        why = _unusable(need, result)
        if why and need.get("optional"):  # the consumer runs with the others; its record says what is missing
            handed.append({"cell": need["cell"], "as": need["as"], "status": getattr(result, "status", None),
                           "files": None, "missing": why})
            continue
        if why:
            raise Broken(why)
        if names.problem(need["as"]):
            raise Broken(f"needs {need['cell']} as {need['as']!r}, not a valid name")
        source = producer_dir / OUTPUT_DIR
        dest = work / INPUTS_DIR / need["as"]
        count = 0
        if not carries_files(need):  # `after:`: the order and the producer's success only
            handed.append({"cell": need["cell"], "as": need["as"], "status": result.status, "files": None})
            continue
        if source.is_dir():
            for path in sorted(source.rglob("*")):
                target = dest / path.relative_to(source)
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                link_or_copy(path, target)
                os.chmod(target, 0o444)
                count += 1
        dest.mkdir(parents=True, exist_ok=True)
        handed.append({"cell": need["cell"], "as": need["as"], "variable": _variable(need["as"]),
                       "status": result.status, "files": count,
                       "code_sha256": ((result.get("code") or {}).get("sha256")),
                       "finished": result.finished})
    write_json(work / NEEDS_FILE, handed)


def _unusable(need: dict, result) -> str:
    """Why a producer's result cannot feed its consumer ('' when it can)."""
    if not isinstance(result, Result):
        return f"needs {need['cell']}, which has no result (run it too)"
    if result.status != status.OK:
        failure = result.failure_text
        return f"needs {need['cell']}, which ended {result.status}" + (f": {failure}" if failure else "")
    return ""


def result_fields(cell, work: Path) -> dict:
    """The link, for the cell's result: what it consumed, and which cells consume it."""
    out = {}
    if cell.needs:
        out["needs"] = read_json(work / NEEDS_FILE) or [{"cell": n["cell"], "as": n["as"]} for n in cell.needs]
    if cell.feeds:
        out["feeds"] = list(cell.feeds)
    return out
