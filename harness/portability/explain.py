"""`portability explain`: where a file that loads but predicts differently parts from its writer,
layer by layer -- the grid's worst case, named with its layer and what in that layer differs.

The grid says *that* a reader's predictions differ (the largest difference); this says *where*.
The differing pairs come in groups that share a cause -- the same model, format and way of
loading, between the same two lines of releases (`table.line`) -- so one pair of each group is
probed: the writer's stack loads its own file by the way that loaded it the same there, the
reader's stack loads it by the way it loaded there, and each follows every layer's output on the
writer's inputs (``probe/layers.py``, which loads as the grid's reader does). The first layer
whose outputs differ past the pair's floor is named, with the largest difference there and the
keys of its configuration that differ between the two stacks: a default that moved between
releases shows as such (a TF 1 LSTM's ``recurrent_activation``, say), which is also the way
across -- pin the old value when building the model.

Each group's evidence is ``OUT/evidence/<group>.json``, with the command that made it, and
`publish` links it from the page. The probes are cells of their own matrix, resumable as any."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import yaml

from harness.errors import UserError
from harness.portability import judge
from harness.portability.evidence import EVIDENCE, Group, groups, path_for
from harness.portability.publish import Judged, judged
from harness.workloads.protocol import OUTPUT_DIR

PROBE = Path(__file__).resolve().parent / "probe" / "layers.py"
NAME = "portability-explain"


def own_way(g: Judged, record: dict) -> str | None:
    """The way the writer's own stack loaded the file the same (the reference side), if any."""
    for r in g.records:
        if (r["writer"], r["reader"], r["model"], r["format"]) == (record["writer"],) * 2 + (record["model"],
                                                                                             record["format"]):
            return r.get("way") if r["verdict"] == judge.SAME else None
    return None


def _digest(path: Path) -> str:
    """What a written file holds: a file, a folder (a SavedModel), or a TF checkpoint's prefix (its
    files beside it start with the prefix's name)."""
    found = ([path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir()
             else sorted(path.parent.glob(path.name + "*")))
    h = hashlib.sha256()
    for p in found:
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


def _workload(side: str, digest: str, way: str) -> str:
    """A probe's workload name: one per side, file content and way, the same on every run (it
    resumes). The writer's side is "own-", a reader's "read-" (handed the writer's probe)."""
    return ("own-" if side == "writer" else "read-") + hashlib.sha256(f"{digest} {way}".encode()).hexdigest()[:12]


def probes(g: Judged, folders: dict[str, Path], only: list[str] | None = None) -> list[dict]:
    """A plan per group: its representative pair, and the two probes (stack, way) that compare it.
    `folders`: writer stack -> its save cell's output folder (its files and written.json)."""
    plans = []
    for group, members in groups(g.records, g.stacks, g.names).items():
        if only and group.id not in only:
            continue
        r = members[0]
        reference = own_way(g, r)
        out = folders.get(r["writer"])
        if reference is None or out is None:
            continue   # no reference to compare with: the writer's stack does not load its own file the same
        manifest = json.loads((out / "written.json").read_text())["models"][r["model"]]
        path, inputs, predictions = ((out / where).resolve() for where in (
            manifest["files"][r["format"]], manifest["inputs"], manifest["predictions"]))
        digest = _digest(path)
        args = [str(path), r["format"], r["model"], "WAY", str(inputs), str(predictions), digest]
        sides = {"writer": (r["writer"], reference), "reader": (r["reader"], r["way"])}
        plans.append({"group": group, "record": r, "members": members,
                      "sides": {side: {"stack": stack, "way": way, "workload": _workload(side, digest, way),
                                       "args": [way if a == "WAY" else a for a in args]}
                                for side, (stack, way) in sides.items()}})
    return plans


def matrix_doc(stacks: dict, plans: list[dict]) -> dict:
    """The probes' matrix: the grid's stacks, a workload per (file, way), each run on its stack only."""
    workloads, include = {}, []
    for plan in plans:
        own = plan["sides"]["writer"]
        for name, side in plan["sides"].items():
            workload = {"name": side["workload"], "script": str(PROBE), "path": str(PROBE.parent.parent),
                        "args": side["args"]}
            if name == "reader":   # handed the writer's probe: its layers' settings, to put back one by one
                workload["needs"] = {"workload": own["workload"], "environment": own["stack"], "as": "writer"}
            workloads[side["workload"]] = workload
            if {"environment": side["stack"], "workload": side["workload"]} not in include:
                include.append({"environment": side["stack"], "workload": side["workload"]})
    doc = {"name": NAME, "description": "layer by layer, where each group of differing files parts from its writer",
           "environments": stacks["environments"], "workloads": list(workloads.values()), "include": include,
           "timeouts": stacks.get("timeouts") or {"wall": 900, "progress": 600}}
    if "releases" in stacks:
        doc["releases"] = stacks["releases"]
    return doc


def compare(writer: dict, reader: dict, writer_outputs, reader_outputs, floor: float) -> dict:
    """Two probes of one file: each layer's largest difference, the first layer past the floor,
    and what differs in the configurations (per layer, the keys whose values differ)."""
    if len(writer["layers"]) != len(reader["layers"]):
        return {"structure": f"{len(writer['layers'])} layers on the writer, {len(reader['layers'])} on the reader"}
    layers, first = [], None
    for i, (w, rd) in enumerate(zip(writer["layers"], reader["layers"], strict=True)):
        a, b = writer_outputs[f"arr_{i}"], reader_outputs[f"arr_{i}"]
        diff = float(np.max(np.abs(a.astype("float64") - b.astype("float64")))) if a.shape == b.shape else None
        config = {k: [w["config"].get(k), rd["config"].get(k)]
                  for k in sorted(set(w["config"]) | set(rd["config"]))
                  if k != "name" and w["config"].get(k) != rd["config"].get(k)}
        entry = {"index": i, "name": rd["name"], "class": rd["class"], "max_abs_diff": diff, "config": config}
        layers.append(entry)
        if first is None and (diff is None or diff > floor):
            first = entry
    back = [{**t, "mends": t.get("max_abs_diff") is not None and t["max_abs_diff"] <= floor}
            for t in reader.get("settings_back") or []]
    theirs, mine = writer.get("activations") or {}, reader.get("activations") or {}
    # the activations both configurations name that the two releases compute otherwise, on the probe's grid
    otherwise = {n: float(np.max(np.abs(np.asarray(theirs[n]) - np.asarray(mine[n])))) for n in sorted(theirs)
                 if theirs[n] is not None and mine.get(n) is not None}
    return {"layers": layers, "first": first, "floor": floor, "settings_back": back,
            "activations_otherwise": {n: d for n, d in otherwise.items() if d > 1e-6},
            **({"settings_back_error": reader["settings_back_error"]} if reader.get("settings_back_error") else {})}


def sentence(evidence: dict) -> str:
    """The evidence in one line, for the page."""
    first = evidence.get("first")
    if evidence.get("structure"):
        return f"the two stacks build different models: {evidence['structure']}"
    if first is None:
        return "no layer's outputs differ past the floor on the probe (the difference is in the last step)"
    diff = first["max_abs_diff"]
    said = (f"parts at layer {first['index']} `{first['name']}` ({first['class']}), largest difference "
            + (f"{diff:.3g}" if diff is not None else "in its shape"))
    mends = [t for t in evidence.get("settings_back") or [] if t["mends"]]
    alone = [t for t in mends if len(t["settings"]) == 1]
    if alone or mends:
        said += "; built with the writer's " + " or with the writer's ".join(
            " and ".join(_setting(s) for s in t["settings"]) for t in (alone or mends)[:3])
        said += " (the reader's default " + ", ".join(
            f"`{k}={rd!r}`" for k, (_, rd) in first["config"].items() if any(
                s["key"] == k for t in (alone or mends) for s in t["settings"])) + "), it predicts as the writer did"
    elif evidence.get("settings_back"):
        tried = [t for t in evidence["settings_back"] if t.get("max_abs_diff") is not None]
        said += "; no setting of the writer's, put back, mends it" + ("" if not tried else " (" + "; ".join(
            " and ".join(_setting(s) for s in t["settings"]) + f": {t['max_abs_diff']:.3g}"
            for t in tried[:3]) + f", against the floor {evidence['floor']:.3g})")
    return said


def _setting(s: dict) -> str:
    """One setting put back, as the sentence says it: with the writer's own definition where the
    probe gave the function, not the name."""
    said = f"`{s['key']}={s['value']!r}`"
    return said + (f" as the writer's release defines it ({s['definition']})" if s.get("definition") else "")


def read_probe(folder: Path) -> tuple[dict, object]:
    out = folder / OUTPUT_DIR
    found = json.loads((out / "layers.json").read_text()) if (out / "layers.json").is_file() else {}
    arrays = np.load(out / "layers.npz") if (out / "layers.npz").is_file() else None
    return found, arrays


def check_plans(plans: list[dict], only: list[str] | None, known: list[Group]) -> None:
    if only and not plans:
        raise UserError(f"--group {' '.join(only)}: no group of differing files has that id (they are: "
                        f"{', '.join(g.id for g in known) or 'none'})")


def explain(results: Path, out: Path, probes_dir: Path, run_cells, say, only: list[str] | None = None,
            command: str = "") -> int:
    """Probe one pair of every group of differing files (`only` these group ids), compare, and leave
    each group's evidence in OUT/evidence; returns how many groups have evidence now. `run_cells`
    runs a loaded matrix's cells (the caller's engine and runner)."""
    from harness import api  # deferred: the API, when there is something to probe
    from harness.results.store import ResultStore

    got, g = judged(results)
    plans = probes(g, got.writers, only)
    check_plans(plans, only, list(groups(g.records, g.stacks, g.names)))
    if not plans:
        say("no file of the grid loads but predicts differently against a writer that loads its own: nothing to probe")
        return 0
    try:
        stacks = yaml.safe_load((results / "grid.yaml").read_text())
    except (OSError, yaml.YAMLError):
        raise UserError(f"{results / 'grid.yaml'}: the grid's matrix is not there; run the grid first "
                        f"(portability run STACKS --results {results})") from None
    probes_dir.mkdir(parents=True, exist_ok=True)
    m = api.matrix_from_dict(matrix_doc(stacks, plans), probes_dir / "explain.yaml", results=None)
    run_cells(m)
    store = ResultStore(probes_dir, m.name)
    cells = {(c.environment.name, c.workload.name): c for c in m.cells}
    (out / EVIDENCE).mkdir(parents=True, exist_ok=True)
    done = 0
    for plan in plans:
        group, r = plan["group"], plan["record"]
        seen = {}
        for side, s in plan["sides"].items():
            cell = cells[(s["stack"], s["workload"])]
            result = store.existing(cell)
            found, arrays = read_probe(store.final_dir(cell)) if result is not None else ({}, None)
            seen[side] = {"cell": cell.id, "status": getattr(result, "status", None), "found": found,
                          "arrays": arrays,
                          "error": found.get("error") or (None if arrays is not None else
                                                          (getattr(result, "failure_text", None) or "no result"))}
        pair = {"writer": r["writer"], "reader": r["reader"], "model": r["model"], "format": r["format"],
                "reader_way": r["way"], "writer_way": plan["sides"]["writer"]["way"],
                "max_abs_diff": r.get("max_abs_diff"), "floor": r["floor"]}
        evidence = {"group": group.as_dict(), "pair": pair, "command": command,
                    "stands_for": [[m["writer"], m["reader"]] for m in plan["members"]],
                    "probes": {side: {"cell": s["cell"], "status": s["status"], "error": s["error"]}
                               for side, s in seen.items()}}
        if all(s["error"] is None for s in seen.values()):
            evidence.update(compare(seen["writer"]["found"], seen["reader"]["found"], seen["writer"]["arrays"],
                                    seen["reader"]["arrays"], r["floor"]))
            evidence["sentence"] = sentence(evidence)
            done += 1
        else:
            evidence["sentence"] = "not followed: " + "; ".join(
                f"{side}: {str(s['error'])[:200]}" for side, s in seen.items() if s["error"])
        path_for(out, group).write_text(json.dumps(evidence, indent=1, sort_keys=True) + "\n")
        say(f"{group.id} ({len(plan['members'])} pairs; probed {r['writer']} -> {r['reader']}): {evidence['sentence']}")
    return done
