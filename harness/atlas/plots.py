"""The atlas's plots: per line and workload, the validation accuracy release after release.

One PNG per (line, workload): x the line's rows in release order, y the accuracy's median with
its min-max over the repeats as a bar, one series per device count and wrapper, chance as a
dashed line. A wrapper that parts from one device shows as a series leaving the others; a break
as a series that stops. Drawn only where two or more rows trained.
"""

from __future__ import annotations

from pathlib import Path

from harness.atlas.rows import LINES, Row, lines
from harness.report.plots import pyplot


def file_for(line: str, workload: str) -> str:
    return f"accuracy-{line}-{workload}.png"


def draw(table: list[Row], out: Path) -> list[Path]:
    drawn = []
    for line, members in lines(table).items():
        workloads = list(dict.fromkeys(c.split(" ")[0] for r in members for c in r.entries))
        for workload in workloads:
            path = _draw(line, workload, members, out)
            if path:
                drawn.append(path)
    return drawn


def _draw(line: str, workload: str, members: list[Row], out: Path) -> Path | None:
    cols = list(dict.fromkeys(c for r in members for c in r.entries if c.split(" ")[0] == workload))
    series = {}
    for col in cols:
        points = [(i, r.entries[col].spread("val_accuracy")) for i, r in enumerate(members) if col in r.entries]
        points = [(i, s) for i, s in points if s]
        if len(points) >= 2:
            series[col.split(" ", 1)[1]] = points
    if not series:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(members)), 3.6))
    for label, points in series.items():
        xs = [i for i, _ in points]
        ys = [s[0] for _, s in points]
        err = [[s[0] - s[1] for _, s in points], [s[2] - s[0] for _, s in points]]
        ax.errorbar(xs, ys, yerr=err, marker="o", markersize=3, capsize=2, linewidth=1, label=label)
    chance = next((r.entries[c].chance for r in members for c in cols if c in r.entries and r.entries[c].chance), None)
    if chance:
        ax.axhline(chance, linestyle="--", color="grey", linewidth=1, label=f"chance {chance:g}")
    ax.set_xticks(range(len(members)))
    ax.set_xticklabels([_short(r) for r in members], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("validation accuracy")
    ax.set_title(f"{LINES.get(line, line)}: {workload}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / file_for(line, workload)
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)
    return path


def _short(row: Row) -> str:
    s = row.stack
    if row.line == "keras3-jax":
        return f"K {s.get('keras')}"
    if row.line.startswith("keras3"):
        return f"K {s.get('keras')} / TF {s.get('tensorflow')}"
    return f"TF {s.get('tensorflow')}"
