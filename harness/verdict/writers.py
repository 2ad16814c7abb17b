"""What a verdict writes, from its one record only, so the comment, the JSON and the job summary
never say different things: `verdict.json` (versioned: `SCHEMA`), `COMMENT.md` (the verdict in
its first line, the evidence folded below, for a pull request), and -- where the CI provides
one (`$GITHUB_STEP_SUMMARY`) -- the same Markdown appended to the job's summary.

Every sentence names its cells or its file; the advice is upgrade's (`upgrade.writers.actions`),
said once for both reports. The comment ends with a marker line, so an Action that posts it
finds and updates its own comment instead of adding one per push."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.files.markdown import cell_ids, table_cell, unlike_lines
from harness.verdict import BREAKS, CANNOT_INSTALL, CANNOT_JUDGE, CHANGES, NOTHING, SAFE, SCHEMA

MARKER = "<!-- harness-verdict -->"   # the Action finds its own comment by this line
SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"
MEANING = {SAFE: "Same status, values within the base's spread",
           BREAKS: "The status changed",
           CHANGES: "A value moved past the base's spread",
           CANNOT_INSTALL: "The head's pins do not install together",
           CANNOT_JUDGE: "The base itself does not run here, so nothing is judged against it",
           NOTHING: "The bump moves no pin up"}


def _moves(record: dict) -> str:
    up = record["moves"]["up"]
    return ", ".join(f"{n} {a} -> {b}" for n, (a, b) in up.items()) or "no pin moved up"


def _reader(said: dict | None) -> str:
    if not said:
        return "-"
    v = said["verdict"]
    if v == "same":
        return f"loads, predicts the same ({said.get('way')})"
    if v == "differs":
        return f"loads, predicts differently by {said.get('max_abs_diff')} ({said.get('way')})"
    if v == "refuses":
        first = next(iter((said.get("errors") or {}).items()), ("", ""))
        return f"refuses ({first[0]}: {first[1]})" if first[0] else "refuses"
    return f"cannot know: {said.get('reason')}"


def _joint(part: dict, j: dict) -> str:
    """What the installer said of moving the pin that holds the bump back."""
    if j["first"]:
        return (f"{part['package']}=={part['to']} cannot be installed beside {j['package']}=={j['pinned']}; "
                f"it installs beside {j['package']}=={j['first']}, the first {j['package']} after {j['pinned']} "
                "that allows it: move both")
    return (f"{part['package']}=={part['to']} cannot be installed beside {j['package']}=={j['pinned']}, nor beside "
            f"any release of {j['package']} after it that was asked")


def headline(record: dict) -> str:
    """The first line: the verdict, what moved, and the worst part's reason."""
    verdict = record["verdict"]
    if verdict == NOTHING:
        return f"Verdict: {NOTHING} -- {record.get('why') or MEANING[NOTHING].lower()}"
    worst = next((p for p in record["parts"] if p["verdict"] == verdict), None)
    worst_model = next((m for m in record.get("models", []) if m.get("verdict") == verdict), None)
    if worst is not None:
        error = worst.get("error") or {}
        reason = (f"{error['family']}: {error['message']}" if error.get("family") and error.get("message")
                  else worst["why"])
        if worst.get("first_bad") and worst["first_bad"] != worst.get("to"):
            reason = f"first bad {worst['first_bad']}: {reason}"
        if verdict == CANNOT_INSTALL and worst.get("joint"):
            reason = "; ".join(_joint(worst, j) for j in worst["joint"])
        if verdict == SAFE and (record.get("baseline") or {}).get("val_accuracy"):
            acc = record["baseline"]["val_accuracy"]
            reason += f", the base's {acc['median']:.3f} [{acc['min']:.3f}-{acc['max']:.3f}] over {acc['n']} run(s)"
    elif worst_model is not None:
        reason = f"the model file {worst_model['file']}: {_reader(worst_model['readers'].get('head'))}"
    else:
        reason = MEANING[verdict]
    return table_cell(f"Verdict: {verdict} -- {_moves(record)}: {reason}", 400)


def markdown(record: dict) -> str:
    """The comment: the verdict first, the evidence folded below."""
    lines = [f"**{headline(record)}**", "",
             f"{MEANING[record['verdict']]}. Base: {_side(record['base'])}; head: {_side(record['head'])}."]
    if record.get("python_why"):
        lines += ["", f"{record['python_why']}; {record['repeats']} run(s) of each side, "
                      f"engine {record.get('engine')}."]
    lines += ["", "<details><summary>The evidence</summary>", ""]
    if record["parts"]:
        lines += ["| package | from | to | verdict | first bad | why | cells |", "|---|---|---|---|---|---|---|"]
        for p in record["parts"]:
            lines.append(f"| {table_cell(p['package'])} | {p.get('from', '-')} | {p.get('to', '-')} | {p['verdict']} | "
                         f"{p.get('first_bad') or '-'} | {table_cell(p['why'])} | {cell_ids(p['cells'])} |")
    base = record.get("baseline") or {}
    acc = base.get("val_accuracy")
    if acc:
        lines += ["", f"The base's spread: val_accuracy median {acc.get('median')} "
                      f"[{acc.get('min')}, {acc.get('max')}] over {acc.get('n')} run(s) "
                      f"(cells {cell_ids(base.get('cells', []))}); a change counts past "
                      f"{base.get('accuracy_tolerance')}."]
    for p in record["parts"]:
        if p["verdict"] == SAFE or p.get("combined"):
            continue
        lines += ["", f"### {p['package']} {p.get('from')} -> {p.get('to')}: {p['verdict']}", ""]
        if p.get("first_bad"):
            lines.append(f"- first bad {p['first_bad']}, last good {p.get('last_good')}: {table_cell(p['why'], 400)} "
                         f"(cells {cell_ids(p['cells'])})")
        error = p.get("error") or {}
        if error.get("message"):
            lines.append(f"- the error, as {p['package']} {p.get('first_bad')} gives it ({error.get('family')}, cell "
                         f"`{error.get('cell')}`): {table_cell(error['message'], 600)}")
        for j in p.get("joint") or []:
            tried = ", ".join(j["tried"][:6]) + (" ..." if len(j["tried"]) > 6 else "")
            lines.append(f"- the joint move: {_joint(p, j)} (asked of the installer: {tried or 'none'})"
                         + ("" if j["first"] else f": {table_cell(j['why'], 300)}"))
        road = p.get("road") or {}
        if road:
            lines.append(f"- {road['setting']} at {road['at']}: {'mends it' if road['mends'] else 'does not mend it'} "
                         f"(cells {cell_ids(road.get('cells', []))})")
        if p.get("advice"):
            lines += ["", "What you can do:", ""] + [f"- {a}" for a in p["advice"]]
        lines += _atlas(p)
    files = record.get("models") or []
    if files:
        lines += ["", "### Model files the project keeps", "",
                  "| file | base | head | head with tf-keras |", "|---|---|---|---|"]
        for m in files:
            if "readers" not in m:
                lines.append(f"| `{m['file']}` | {table_cell(m['note'], 200)} | | |")
                continue
            r = m["readers"]
            lines.append(f"| `{m['file']}` | {table_cell(_reader(r.get('base')))} | "
                         f"{table_cell(_reader(r.get('head')))} | "
                         f"{table_cell(_reader(r.get('head-tf_keras')))} |")
    up = record.get("upgrade") or {}
    if up:
        lines += ["", f"The search behind it: `{up['report']}` (matrix `{up['matrix']}`).", "", "```sh"]
        for cmds in (up.get("commands") or {}).values():
            lines += list(cmds.values())
        lines.append("```")
    lines += ["", f"{record.get('seconds', 0):.0f} s.", "", "</details>", "", MARKER]
    return "\n".join(lines) + "\n"


def _atlas(part: dict) -> list[str]:
    """What the atlas already knows of the release's minor: its rows, and the changes into them."""
    rows = part.get("atlas") or []
    if not rows:
        return []
    out = ["", f"What the atlas knows of {part['package']} {part['to']}'s minor, on the seeds' models:", ""]
    for r in rows:
        said = "; ".join(f"{c['kind']}: {table_cell(c['detail'], 200)}" for c in r["changes"][:3])
        said = said or "no change into it"
        out.append(f"- [{r['row']}]({r['link']}) ({r['release']}): {said}")
    return out


def _side(side: dict) -> str:
    if side.get("revision"):
        return f"`{side['path']}` at {side['asked']} ({side['revision'][:12]})"
    return f"`{side['pins']}`"


def write(record: dict, out: Path) -> list[Path]:
    """verdict.json and COMMENT.md under `out`; the job summary where the CI names one."""
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "verdict.json", out / "COMMENT.md"
    kept = json.dumps(record, indent=2, sort_keys=True, default=str)
    js.write_text(kept + "\n")
    text = markdown(json.loads(kept))   # the comment from the record as kept: what `audit` holds it to
    md.write_text(text)
    written = [md, js]
    summary = os.environ.get(SUMMARY_VARIABLE)
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(text + "\n")
        written.append(Path(summary))
    return written


def read(out: Path) -> dict:
    """The verdict's record under `out`, as `write` kept it; one it cannot read is the caller's
    error (`ValueError`, naming the file and the key)."""
    js = out / "verdict.json"
    try:
        record = json.loads(js.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{js}: cannot read the verdict's record ({type(exc).__name__})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{js}: schema: expected {SCHEMA}, found "
                         f"{record.get('schema') if isinstance(record, dict) else None}")
    return record


def audit(out: Path) -> list[str]:
    """The comment under `out` held against its record: every line COMMENT.md states is the line
    verdict.json makes (`markdown`), so a comment edited by hand, or left from an earlier record,
    is named line by line."""
    record, md = read(out), out / "COMMENT.md"
    try:
        said = md.read_text()
    except OSError:
        return [f"{md}: missing (its record is {out / 'verdict.json'})"]
    return [f"{md}:{n}: {what}" for n, what in unlike_lines(said, markdown(record))]
