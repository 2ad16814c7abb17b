"""The report: `upgrade.json` (everything, for tools) and `UPGRADE.md` (for people), the second
written from the first only, so the two never say different things. Every line that claims
something names the cells behind it; what the user can do is only what the evidence supports:
pin below the first bad release, move to the release or setting that mends it, the reduced
script that shows the break."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from harness.files.markdown import cell_ids


def commands(report: dict, args) -> dict:
    """The command lines that reproduce each answer (the same matrix, so the same cells)."""
    matrix, results = report["matrix"], report["results"]
    engine = f"--engine {args.engine}" if args.engine != "auto" else ""
    parts = (report.get("from") or {}).get("parts") or ["*"]  # of a matrix cell: the cells its glob named
    out: dict = {}
    for p in report["packages"]:
        acc = report.get("baseline", {}).get("accuracy_tolerance")
        cell = " ".join(f"--cell {shlex.quote(p['environment'] + '/' + part + ('' if part == '*' else '/*'))}"
                        for part in parts)
        line = (f"python -m harness bisect {shlex.quote(matrix)} --package {p['package']} {cell} --old "
                f"{p['current']} --new {p['target']} --results {shlex.quote(results)}"
                + (f" --accuracy-drop {acc:g}" if acc is not None else "") + (f" {engine}" if engine else ""))
        cmds = {"search": line}
        b = p.get("blocker") or {}
        mend = b.get("mend_release") or {}
        if mend.get("newest") and mend["newest"] != p["target"]:  # releases past the target to search
            cmds["mend"] = (f"python -m harness bisect {shlex.quote(matrix)} --package {p['package']} {cell} "
                            f"--old {p['target']} --new {mend['newest']} --results "
                            f"{shlex.quote(results)}" + (f" {engine}" if engine else ""))
        if (b.get("reduced") or {}).get("folder"):
            cmds["reduce"] = (f"python -m harness reduce {shlex.quote(matrix)} '{p['environment']}/' --package "
                              f"{p['package']} --good {b['last_good']} --bad {b['first_bad']} --results "
                              f"{shlex.quote(results)}" + (f" {engine}" if engine else ""))
        out[p["package"]] = cmds
    return out


def actions(p: dict) -> list[str]:
    b = p["blocker"]
    out = []
    said = b.get("announced")
    if said:  # a change made on purpose: the code change its project names, not a report upstream
        words = said["change"] if said["change"] == said["says"] else f"{said['change']} -- {said['says']}"
        out.append(f"change the code: {words} (source: {said['by']}, {said['source']})")
        if said.get("warned"):
            w = said["warned"]
            out.append(f"{w['by']} for `{w['name']}`: {w['says']} ({w['source']})")
    out.append(f"pin `{p['package']}<{b['first_bad']}` (newest safe: {b['last_good']})"
               + (" until the code is changed" if said else ""))
    mend = b.get("mend_release") or {}
    if mend.get("found"):
        out.append(f"move to `{p['package']}=={mend['first_good']}`, the first release that mends it "
                   f"(cells {cell_ids(mend['cells'])})")
    setting = b.get("mend_setting") or {}
    if setting.get("mends"):
        values = setting.get("values")
        kept = ("" if not values else
                f"; the values: {'the same within their spread' if values['kept'] else 'they differ'} -- "
                f"{values['why'][:200]} (cells {cell_ids(values['cells'])})")
        out.append(f"move to `{p['package']}=={setting['at']}` with {setting['setting']}: it ends as the "
                   f"baseline does (cells {cell_ids(setting['cells'])}){kept}")
    red = b.get("reduced") or {}
    if red.get("script"):
        out.append(f"report it upstream: the reduced script `{red['script']}` "
                   f"({red['lines']['original']} -> {red['lines']['reduced']} lines) and the draft `{red['issue']}`")
    return out


def _frontier(p: dict) -> str:
    """The table's newest safe release, and the pins it installs only with, moved (a release said
    safe as the project pins it would be false where it installs only beside another numpy)."""
    if not p["frontier"]:
        return "-"
    moved = p.get("frontier_moved_with")
    if not moved:
        return p["frontier"]
    got = ", ".join(f"{n} {moved.get('resolved', {}).get(n) or '(resolved)'}" for n in moved["with"])
    return f"{p['frontier']} (installs only with {got} moved)"


def markdown(report: dict) -> str:
    start = report.get("from")
    origin = (f"Matrix `{start['matrix']}`, cell `{start['cell']}` (environment `{start['environment']}`: "
              f"{cell_ids(start['cells'])})" if start else
              f"Project `{report['project']}`, pins from `{report['pins']}`")
    lines = ["# Upgrade report", "",
             f"{origin}, {report.get('python_why') or 'Python ' + report['python']}, "
             f"engine {report.get('engine')}; the matrix it ran: `{report['matrix']}`, "
             f"results in `{report['results']}`.", ""]
    base = report.get("baseline")
    if base:
        lines += [f"Baseline: {base['status']} (cells {cell_ids(base['cells'])}); an accuracy change counts past "
                  f"{base['accuracy_tolerance']:g}.", ""]
    else:
        lines += ["Baseline: it does not run here, so nothing below is judged against it.", ""]
    lines += ["| package | current | newest safe | target | blocking change | cells (run now) |",
              "|---|---|---|---|---|---|"]
    for p in report["packages"]:
        b = p.get("blocker")
        block = (f"{b['kind']} at {b['first_bad']}" if b else ("none" if p["holds"] else f"no answer: {p['problem']}"))
        lines.append(f"| {p['package']} | {p['current']} | {_frontier(p)} | {p['target']} | "
                     f"{block.replace('|', '/')} | {p['cells']} ({p['ran']}) |")
    lines += [f"\n{p['python_note']}" for p in report["packages"] if p.get("python_note")]
    c = report["combined"]
    lines += ["", "## The combined stack", ""]
    if c.get("holds") is None:
        lines.append(c["why"])
    else:
        moved = ", ".join(f"{k}=={v}" for k, v in c["moved"].items())
        opened = f" (with {', '.join(c['moved_with'])} moved too)" if c.get("moved_with") else ""
        lines.append(f"{moved}{opened}: {'holds' if c['holds'] else 'does **not** hold'} -- {c['why']} "
                     f"(cells {cell_ids(c.get('cells', []))})")
    for p in report["packages"]:
        b = p.get("blocker")
        if not b:
            continue
        lines += ["", f"## {p['package']}: {b['kind']} at {b['first_bad']}", "",
                  f"- first bad {b['first_bad']}: {b['why'][:300]} (cells {cell_ids(b['cells'])})",
                  f"- last good {b['last_good']} (cells {cell_ids(b['good_cells'])})"]
        night = b.get("nightly") or {}
        if night.get("first_bad") or night.get("first_good"):
            lines.append(f"- first bad night: {night['nightly']} {night['first_bad']} (last good night "
                         f"{night['last_good']}){'; ' + night['history'] if night.get('history') else ''}")
        elif night.get("problem"):
            lines.append(f"- nights: {night['problem']}")
        moved = b.get("moved_with")
        if moved:
            lines.append(f"- {p['package']} {b['first_bad']} cannot be installed beside the pinned "
                         f"{', '.join(moved['with'])}: it was tried with them moved too "
                         f"({', '.join(f'{k} {v}' for k, v in moved['resolved'].items()) or 'as resolved'}; "
                         f"cells {cell_ids(moved['cells'])})")
        mend = b.get("mend_release")
        if mend and not mend.get("found"):
            lines.append(f"- no release up to {mend['newest']} mends it (cells {cell_ids(mend['cells'])})")
        setting = b.get("mend_setting")
        if setting and not setting["mends"]:
            lines.append(f"- {setting['setting']} at {setting['at']} does not mend it: {setting['why'][:200]} "
                         f"(cells {cell_ids(setting['cells'])})")
        for key in ("reduced", "diverge"):
            if (b.get(key) or {}).get("problem"):
                lines.append(f"- no {key}: {b[key]['problem']}")
        if (b.get("diverge") or {}).get("folder"):
            d = b["diverge"]
            lines.append(f"- diverge: {'the models part' if d['diverges'] else 'no divergence above the floor'} "
                         f"({d['folder']})")
        lines += ["", "What you can do:", ""] + [f"- {a}" for a in actions(p)]
    lines += ["", "## Reproduce", "", "```sh"]
    for cmd in report["commands"].values():
        for line in ([cmd] if isinstance(cmd, str) else cmd.values()):
            lines.append(line)
    lines += ["```", "", f"Cost: {report['cells']} cell(s), {report['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def summary(report: dict) -> str:
    parts = []
    for p in report["packages"]:
        state = "holds" if p["holds"] else (f"newest safe {p['frontier']}" if p["frontier"] else "no answer")
        b = p.get("blocker") or {}
        if b:
            state += f", {b['kind']} at {b['first_bad']}"
            if b.get("announced"):
                state += f" (announced in {b['announced']['by']}: {b['announced']['change'][:160]})"
        parts.append(f"{p['package']} {p['current']} -> {p['target']}: {state} "
                     f"({p['cells']} cells, {p['ran']} run now)")
    c = report["combined"]
    parts.append("combined: " + ("not run: " + c["why"] if c.get("holds") is None else
                                 ("holds" if c["holds"] else "does not hold") + f" ({len(c.get('cells', []))} cells)"))
    return "\n".join(parts) + f"\n{report['cells']} cell(s) in all, {report['seconds']:.0f} s"


def write(report: dict, out: Path) -> tuple[Path, Path]:
    js, md = out / "upgrade.json", out / "UPGRADE.md"
    kept = json.dumps(report, indent=2, sort_keys=True, default=str)
    js.write_text(kept + "\n")
    md.write_text(markdown(json.loads(kept)))   # from the record as kept: what `harness audit` holds it to
    return md, js
