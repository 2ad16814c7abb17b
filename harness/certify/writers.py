"""What a certificate writes, from its one record only: `certificate.json` (versioned: `SCHEMA`) and
`CERTIFICATE.md`, a table of every pair -- the stack, the workload, the wrapper and its devices, the
verdict, where the sides part and by how much -- and below it each pair's evidence: diverge's
folder (its page plots every layer), the control and what it showed."""

from __future__ import annotations

import json
from pathlib import Path

from harness.certify import EXPECTED
from harness.files.markdown import table_cell

WIDE = 200   # a table cell's characters: where two sides part takes a sentence


def lines(record: dict) -> list[str]:
    """One line per pair, for the terminal."""
    out = []
    for p in record["pairs"]:
        said = p["verdict"] + (f" ({p['expected']})" if p["verdict"] == EXPECTED else "")
        out.append(f"{p['one']} against {p['many']}: {said} -- {p.get('why', '')}"
                   + (f"; {p['finding']}" if p.get("finding") else ""))
    return out


def markdown(record: dict) -> str:
    rows = ["# Certificate: one device against N", "",
            f"Matrix `{record['matrix']}`; each pair is the one-device cell against a multi-device cell of the "
            "same stack, workload and global batch, compared layer by layer above the floor the one-device "
            "side measured on itself.", "",
            "| stack | workload | one device | wrapper | devices | verdict | where they part | finding |",
            "|---|---|---|---|---|---|---|---|"]
    for p in record["pairs"]:
        said = p["verdict"] + (f": {p['expected']}" if p["verdict"] == EXPECTED else "")
        rows.append(f"| {p['stack']} | {p['workload']} | 1 {p['one_kind']} | {p['wrapper']} | "
                    f"{p['devices']} {p['device_kind']} | "
                    f"{table_cell(said, WIDE)} | {table_cell(p.get('why', ''), WIDE)} | "
                    f"{table_cell(p.get('finding', ''), WIDE)} |")
    for p in record["pairs"]:
        rows += ["", f"## {p['one']} against {p['many']}", "", f"- verdict: {p['verdict']}",
                 f"- {p.get('why', '')}"]
        where = p.get("where") or {}
        if where.get("folder"):
            rows.append(f"- layer by layer: `{where['folder']}`")
        if p.get("control"):
            c = p["control"]
            rows.append(f"- control `{c['workload']}`: {'agrees' if c['agrees'] else 'does not agree'} -- "
                        f"{c.get('why', '')}" + (f" (`{c['folder']}`)" if c.get("folder") else ""))
        if p.get("finding"):
            rows.append(f"- {p['finding']}")
    rows += ["", f"{record['seconds']:.0f} s."]
    return "\n".join(rows) + "\n"


def write(record: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "certificate.json", out / "CERTIFICATE.md"
    js.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    md.write_text(markdown(record))
    return [md, js]
