"""The page of one divergence (`harness diverge`): verdicts, a per-layer plot, the configuration
keys that differ. Written beside the record by the command, and again into the site by
`report` for every record it finds (`pages`), from the record alone."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.htmlpage import e, page
from harness.names import file_name
from harness.report.plots import pyplot

PLOT = "layers.png"
RECORD = "divergence.json"
PAGE = "index.html"


def _value(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def plot(found: dict, path: Path) -> bool:
    """Relative error per layer, forward and backward, on a log scale, with the thresholds;
    the first layer whose output parts is marked. False when there is nothing to draw."""
    fw = [r for r in found["forward"]["layers"] if "relative" in r]
    bw = [r for r in found["backward"]["layers"] if "relative" in r]
    if not fw and not bw:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(found["layout"]["layers"]) + 3), 4.2))
    tiny = 1e-12
    for rows, label, marker in ((fw, "forward: layer output", "o"), (bw, "backward: gradient", "s")):
        xs = [r["index"] for r in rows]
        ys = [max(_value(r["relative"]) or 1.0, tiny) for r in rows]
        th = [max(_value(r["threshold"]) or tiny, tiny) for r in rows]
        if xs:
            line, = ax.plot(xs, ys, marker=marker, label=label)
            ax.plot(xs, th, linestyle="--", color=line.get_color(), alpha=0.6, label=f"{label.split(':')[0]} threshold")
    first = found["forward"].get("first")
    if first:
        ax.axvline(first["index"], color="red", alpha=0.4, linewidth=6, label=f"first: {first['layer']}")
    names = [f"{r['index']} {r['layer']}" for r in found["layout"]["layers"]]
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("relative error (max |a-b| / max |a|; gradients: norm)")
    ax.set_title("where the two sides part, layer by layer", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _table(head: list[str], rows: list[list], marked: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"]
    for k, row in enumerate(rows):
        cls = ' class="flag"' if k in marked else ""
        out.append("<tr>" + "".join(f"<td{cls}>{e(v)}</td>" for v in row) + "</tr>")
    return "\n".join(out) + "</table>"


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return "inf" if math.isinf(v) else f"{v:.3g}"


def body(found: dict, plot_src: str | None) -> str:
    head = "diverges" if found["diverges"] else "no divergence above the floor"
    parts = [f"<p><b>{e(head)}</b>: {e(found['summary'])}</p>"]
    for role in ("reference", "other"):
        stack = found.get("stacks", {}).get(role) or {}
        parts.append(f"<p class=\"note\">{e(role)}: <code>{e(found[role])}</code> -- "
                     + e(", ".join(f"{k} {v}" for k, v in stack.items() if k != "devices")) + "</p>")
    if plot_src:
        parts.append(f"<img src=\"{e(plot_src)}\" alt=\"relative error per layer\">")
    fw = {r["index"]: r for r in found["forward"]["layers"]}
    bw = {r["index"]: r for r in found["backward"]["layers"]}
    first = (found["forward"].get("first") or {}).get("index")
    rows, marked = [], set()
    for k, layer in enumerate(found["layout"]["layers"]):
        i = layer["index"]
        f, g = fw.get(i, {}), bw.get(i, {})
        if i == first:
            marked.add(k)
        rows.append([i, layer["layer"], layer["class"], layer["mapped"], _num(f.get("relative", f.get("note"))),
                     _num(f.get("threshold")), _num(g.get("relative")), _num(g.get("cosine")),
                     _num(g.get("norm_ratio")), _num(g.get("threshold"))])
    parts.append("<h2>Layers</h2>" + _table(["#", "layer", "class", "weights", "forward rel. err", "threshold",
                                            "gradient rel. err", "cosine", "norm ratio", "threshold"], rows, marked))
    diffs = found["configurations"]["differences"]
    parts.append("<h2>Configuration values that differ</h2>" + (
        _table(["#", "layer", "key", "reference", "other"],
               [[d["index"], d["layer"], d["key"], json.dumps(d["reference"]), json.dumps(d["other"])] for d in diffs])
        if diffs else "<p>none (keys present on one side only are in the record)</p>"))
    epochs = found["training"]["epochs"]
    if epochs:
        parts.append("<h2>Training from the same weights, data in order</h2>" + _table(
            ["epoch", "reference loss", "other loss", "relative", "threshold"],
            [[r["epoch"], _num(r["reference"]), _num(r["other"]), _num(r["relative"]), _num(r["threshold"])]
             for r in epochs], {k for k, r in enumerate(epochs) if r["above"]}))
    notes = found["randomness"]["notes"] + found["training"]["notes"]
    zeroed = sorted(set(found["randomness"]["reference"]) | set(found["randomness"]["other"]))
    if zeroed:
        notes.append("dropout and noise set to 0 in both sides' twins for these layers: " + ", ".join(zeroed))
    notes.append("thresholds: the larger of 10 x the measured floor (the reference's stack run again, and each "
                 "side's two gradient readings) and float32's resolution for the quantity")
    parts += [f"<p class=\"note\">{e(n)}</p>" for n in notes]
    return "\n".join(parts)


def write_page(found: dict, folder: Path) -> Path:
    drawn = plot(found, folder / PLOT)
    path = folder / PAGE
    path.write_text(page(f"Divergence: {found['reference']} vs {found['other']}", body(found, PLOT if drawn else None)))
    return path


def pages(folders: list[Path], out: Path) -> list[tuple[str, Path]]:
    """Every divergence record below `folders`, as a page under `out`/diverge/: (caption, page)."""
    made = []
    for root in folders:
        for record in sorted(Path(root).glob(f"*/*/{RECORD}")) if Path(root).is_dir() else []:
            try:
                found = json.loads(record.read_text())
                caption = f"{found['reference']} vs {found['other']}: {found['summary']}"
            except (OSError, ValueError, KeyError, TypeError):
                continue
            folder = out / "diverge" / file_name(record.parent.parent.name, record.parent.name)
            folder.mkdir(parents=True, exist_ok=True)
            made.append((caption, write_page(found, folder)))
    return made
