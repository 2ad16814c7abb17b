"""Plots drawn from the results with matplotlib (no display needed).

Seed 000 plotted epoch time against batch size per GPU count; seeds 003/004
asked how throughput grows with the device count. Each point is a median,
its bar the min-max of the steady epochs over the repeats.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from . import analysis
from .tables import slug


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _errorbar(ax, xs, spreads, label):
    ys = [s.median for s in spreads]
    err = [[s.median - s.lo for s in spreads], [s.hi - s.median for s in spreads]]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)


def _title(run: str, env: str, workload: str) -> str:
    return f"{Path(run).stem or 'run'}: {env} / {workload}"


def _file(kind: str, run: str, env: str, workload: str) -> str:
    return f"{kind}-{slug('-'.join((Path(run).stem or 'run', env, workload)))}.png"


def _save(plt, fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def scaling_plots(results: list[dict], out: Path) -> list[tuple[str, Path]]:
    """samples/s against devices, one line per (wrapper, batch policy)."""
    series: dict[tuple, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    rows_all = analysis.scaling(results)
    for row in rows_all:
        if row["status"] == "ok" and row["samples_per_sec"] and row["devices"] > 1:
            series[(row["run"], row["environment"], row["workload"])][(row["wrapper"], row["policy"])].append(row)
    base = {(r["run"], r["environment"], r["workload"], r["batch"]): r for r in rows_all
            if r["devices"] == 1 and r["status"] == "ok" and r["samples_per_sec"]}
    plt = _pyplot()
    made = []
    for (run, env, workload), lines in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(6, 4))
        for (wrapper, policy), rows in sorted(lines.items()):
            rows = sorted(rows, key=lambda r: r["devices"])
            first = base.get((run, env, workload, rows[0]["batch"] // rows[0]["devices"] if policy != "fixed"
                              else rows[0]["batch"]))
            points = ([first] if first else []) + rows
            _errorbar(ax, [p["devices"] for p in points], [p["samples_per_sec"] for p in points],
                      f"{wrapper}, batch {policy}")
        title = _title(run, env, workload)
        path = _save(plt, fig, ax, "devices", "samples / s (training, steady epochs)", title,
                     out / _file("scaling", run, env, workload))
        made.append((f"Throughput against devices: {title}", path))
    return made


def time_vs_batch_plots(results: list[dict], out: Path) -> list[tuple[str, Path]]:
    """Seed 000's plot: seconds per epoch against batch size, one line per parallelism."""
    series: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for g in analysis.groups(results).values():
        seconds = g.epoch_seconds() if g.all_ok else None
        if seconds:
            key = (analysis.run_of(g.first), analysis.env_of(g.first), analysis.workload_of(g.first))
            series[key][analysis.label_of(g.first)].append((g.first.get("batch_size"), seconds))
    plt = _pyplot()
    made = []
    for (run, env, workload), lines in sorted(series.items()):
        if not any(len(points) > 1 for points in lines.values()):
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, points in sorted(lines.items()):
            points.sort()
            _errorbar(ax, [b for b, _ in points], [s for _, s in points], label)
        ax.set_xscale("log", base=2)
        title = _title(run, env, workload)
        path = _save(plt, fig, ax, "batch size", "seconds per epoch (training)", title,
                     out / _file("time-vs-batch", run, env, workload))
        made.append((f"Epoch time against batch size: {title}", path))
    return made


def draw_all(results: list[dict], out: Path) -> list[tuple[str, Path]]:
    out.mkdir(parents=True, exist_ok=True)
    return scaling_plots(results, out) + time_vs_batch_plots(results, out)
