"""`harness atlas lookup`: a project's pins against the atlas -- the measured rows nearest them,
and every change the atlas knows between them and a target.

The pins (a requirements file, pyproject.toml or lock, and/or ``NAME==VERSION`` arguments) name
a line: Keras 3 pinned is Keras 3 on JAX when JAX is pinned and TensorFlow is not, else on
TensorFlow; tf-keras pinned, or TensorFlow before 2.16, is TensorFlow with its Keras 2; TensorFlow
2.16 or later alone is Keras 3 on TensorFlow (its tf.keras). On that line the nearest rows are
those of the same minor first, then the closest releases. The target is the newest row of the
line, or the row nearest ``--target`` pins -- newer or older: going down, a mend crossed is a
break for the project. Exit 0 when nothing on the way breaks what the project's stack does, 1
when something does (a break, a changed failure, two devices parting from one at the target), 2
for pins or data that cannot be used.
"""

from __future__ import annotations

import json
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version
from rich.console import Console

from harness import exits
from harness.atlas import changes, explain, publish, records, rows
from harness.errors import UserError
from harness.terminal import shown
from harness.upgrade import project
from harness.upgrade.announced import NOTES

TENSORFLOW = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "intel-tensorflow", "tensorflow-macos")
# The packages whose pins choose the rows: a range of one of these cannot be looked up (exit 2, its line);
# a range of any other package is named as ignored
LOOKED_UP = frozenset({*TENSORFLOW, "keras", "tf-keras", "jax", "torch"})
# Where tf.keras became Keras 3: Keras 2 code goes on there by one of two roads (`roads`)
KERAS3_SWITCH = next(n for n in NOTES if n.package == "tensorflow" and n.release == "2.16.0")
BREAKING = ("devices",)  # a finding within the target row that breaks what worked on one device
NEAREST = 3


def command(args, console: Console) -> int:
    pins, ignored = _pins(args.requirements, args.pins)
    recs, _about = records.read(Path(args.data))
    table = rows.build(recs)
    found = changes.find(table)
    evidence = Path(args.data).parent / publish.EVIDENCE
    explain.attach(found, evidence, str(evidence))  # links a reader opens from where the lookup ran
    # run side by side, a refuted one was the host's, not the release's
    found = [c for c in found if changes.standing(c) != "refuted"]
    answer = answer_for(pins, table, found, _pins(None, args.target)[0] if args.target else None)
    answer["ignored"] = ignored
    answer["not_looked_up"] = sorted(k for k in pins if canonicalize_name(k) not in LOOKED_UP)
    if args.json:
        print(json.dumps(answer, indent=1))
    else:
        for line in text(answer):
            console.print(shown(line), highlight=False)
    return exits.CHANGED if any(c["for_you"] == "breaks" for c in answer["changes"]) else exits.OK


def _pins(path: str | None, texts: list[str]) -> tuple[dict[str, str], list[str]]:
    """The exact pins, and the file's lines that pin nothing exactly (a range): no row is theirs, so
    they are said to be ignored rather than refused."""
    if not path and not texts:
        raise UserError("no pins: give -r FILE (requirements.txt, pyproject.toml, uv.lock, poetry.lock) "
                        "or NAME==VERSION arguments")
    if path and not Path(path).is_file():
        raise UserError(f"-r {path}: no such file")
    read = project.read(Path(path), lenient=lambda name: canonicalize_name(name) not in LOOKED_UP) if path else None
    out = dict(read.pins) if read else {}
    out.update(project.arguments(texts).pins if texts else {})
    for name in TENSORFLOW:
        if name in out:
            out.setdefault("tensorflow", out[name])
    return out, (read.ignored if read else [])


def line_of(pins: dict[str, str]) -> str:
    keras, tf = rows.parse_version(pins.get("keras")), rows.parse_version(pins.get("tensorflow"))
    if keras and keras.major >= 3:
        if not tf:  # a Keras 3 project without TensorFlow runs on the backend it pins (JAX first: the
            #        atlas's JAX line has two devices to say something of)
            backend = next((b for b in ("jax", "torch") if b in pins), None)
            if backend:
                return f"keras3-{backend}"
        return "keras3-tensorflow"
    if "tf-keras" in pins or (tf and tf < Version("2.16")) or (keras and keras.major == 2):
        return "keras2"
    if tf:
        return "keras3-tensorflow"
    raise UserError("the pins name neither TensorFlow nor Keras: the atlas has nothing to say of them")



def _distance(row: rows.Row, pins: dict[str, str]) -> tuple:
    """Smaller is nearer: the primary package's minor first, then its release, then the other's."""
    keys = ("keras", "tensorflow") if row.line.startswith("keras3") else ("tensorflow", "keras")
    out = []
    for key in keys:
        want, have = rows.parse_version(pins.get(key)), rows.parse_version(row.stack.get(key))
        if want is None or have is None:
            out += [0, 0.0]
            continue
        same_minor = (want.major, want.minor) == (have.major, have.minor)
        out += [0 if same_minor else 1, abs(_ordinal(want) - _ordinal(have))]
    return tuple(out)


def _ordinal(v: Version) -> float:
    return v.major * 10_000 + v.minor * 100 + v.micro


def answer_for(pins: dict[str, str], table: list[rows.Row], found: list[changes.Change],
               target: dict[str, str] | None) -> dict:
    line = line_of(pins)
    members = [r for r in table if r.line == line]
    if not members:
        raise UserError(f"the atlas data has no row on the line {rows.LINES.get(line, line)!r}")
    nearest = sorted(members, key=lambda r: (_distance(r, pins), -members.index(r)))[:NEAREST]  # a row per stack
    start = members.index(nearest[0])
    if target:  # every row at the target's release (two matrices may both hold it), the farthest one
        best = min(_distance(r, target) for r in members)
        at_goal = [i for i, r in enumerate(members) if _distance(r, target) == best]
    else:
        at_goal = [len(members) - 1]
    down = max(at_goal) < start
    stop = min(at_goal) if down else max(at_goal)
    # a change between two rows is crossed when its `after` row lies past the start, up to the goal
    # (going down: past the goal, up to the start); a finding within a row counts at the goal's rows
    low, high = sorted((start, stop))
    crossed = {r.key for r in members[low + 1:high + 1]}
    at_target = {members[i].key for i in at_goal}
    moved = [c for c in found if c.where["line"] == line and ((c.before is not None and c.after in crossed)
                                                     or (c.before is None and c.after in at_target))]
    return {"pins": pins, "line": line, "line_name": rows.LINES.get(line, line),
            "nearest": [_row(r) for r in nearest], "target": _row(members[stop]),
            "direction": "down" if down else "up",
            "changes": [{**changes.to_dict(c), "for_you": _for_you(c, down)} for c in moved],
            "roads": roads(pins, line, members[stop], table)}


def roads(pins: dict[str, str], line: str, target: rows.Row, table: list[rows.Row]) -> list[dict]:
    """Keras 2 pins going to TensorFlow 2.16 or later go on by one of two roads, and the lookup names
    both: tf-keras with TF_USE_LEGACY_KERAS=1 (the Keras 2 line's rows from 2.16 on are those), or a
    plain upgrade, where tf.keras is Keras 3 and Keras 2 code must be ported (the Keras 3 line's row
    at the target's TensorFlow: what that stack does with code written for it). [] otherwise."""
    tf, want = rows.parse_version(target.stack.get("tensorflow")), Version(KERAS3_SWITCH.release)
    if line != "keras2" or "tf-keras" in pins or tf is None or tf < want:
        return []
    keras3 = [r for r in table if r.line == "keras3-tensorflow"]
    # the newest Keras 3 row at (or nearest) the target's TensorFlow
    same = min(reversed(keras3), key=lambda r: _distance(r, {"tensorflow": str(tf)}), default=None)
    return [{"road": "tf-keras", "rows": "the Keras 2 line above (its rows from TF 2.16 on run tf-keras)",
             "how": f"install tf-keras {tf.major}.{tf.minor} beside TensorFlow and set TF_USE_LEGACY_KERAS=1"},
            {"road": "Keras 3", "rows": _row(same) if same else None,
             "how": "a plain upgrade (no tf-keras): tf.keras is Keras 3 from TensorFlow 2.16, and code written "
                    "for Keras 2 breaks there until it is ported (the row below runs code written for Keras 3; "
                    "`harness upgrade` runs your own script there and names what breaks)",
             "source": KERAS3_SWITCH.source}]


def _for_you(change: changes.Change, down: bool) -> str:
    """What the change means for the move asked: a mend crossed going down is a break for you."""
    if change.before is None:
        return "breaks" if change.kind in BREAKING else "changes"
    flipped = {"broke": "mended", "mended": "broke"}.get(change.kind, change.kind) if down else change.kind
    return "breaks" if flipped in ("broke", "family-changed") else "mends" if flipped == "mended" else "changes"


def _row(row: rows.Row) -> dict:
    summary = {}
    for col, entry in row.entries.items():
        acc = entry.spread("val_accuracy")
        summary[col] = {"status": entry.status, "family": entry.family or None,
                        "val_accuracy": round(acc[0], 4) if acc else None}
    return {"key": row.key, "label": row.label, "stack": row.stack, "cells": summary}


def text(answer: dict) -> list[str]:
    pins = ", ".join(f"{k} {v}" for k, v in answer["pins"].items() if k in ("tensorflow", "keras", "tf-keras", "jax"))
    out = [f"pins: {pins} -> {answer['line_name']}"]
    if answer.get("ignored"):
        out.append(f"ignored (not exact pins, so no row is theirs): {', '.join(answer['ignored'])}")
    if answer.get("not_looked_up"):
        named = ", ".join(f"{k} {answer['pins'][k]}" for k in answer["not_looked_up"])
        out.append(f"not used to choose rows (the atlas resolves them as of each release's day): {named}")
    out.append("nearest measured:")
    for row in answer["nearest"]:
        out.append(f"  {row['label']}: {_summary(row)}")
    out.append(f"target: {answer['target']['label']}: {_summary(answer['target'])}")
    if not answer["changes"]:
        out.append("changes on the way: none measured")
    else:
        out.append(f"changes on the way ({len(answer['changes'])}):")
        out += [f"  {c['kind']} ({c['for_you']} for this move): {c['detail']} (at {c['after']})"
                for c in answer["changes"]]
    for road in answer.get("roads") or []:
        out.append(f"road '{road['road']}': {road['how']}")
        if isinstance(road["rows"], dict):
            out.append(f"  measured: {road['rows']['label']}: {_summary(road['rows'])}")
    return out


def _summary(row: dict) -> str:
    cells = row["cells"]
    ok = sum(1 for c in cells.values() if c["status"] == "ok")
    other = [f"{col} {c['status']}" for col, c in cells.items() if c["status"] != "ok"]
    return f"{ok} of {len(cells)} cells ok" + (f"; {', '.join(other)}" if other else "")
