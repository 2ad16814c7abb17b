"""Plots drawn from the results with matplotlib (no display needed).

Seed 000 plotted epoch time against batch size per GPU count; seeds 003/004
asked how throughput grows with the device count. Each point is a median,
its bar the min-max of the steady epochs over the repeats.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.names import file_name
from harness.report import analysis, reported
from harness.stacks import release_key
from harness.status import OK


def pyplot():
    """matplotlib's pyplot on the Agg backend: files, no display."""
    import matplotlib  # heavy (most of a second): imported only when there is something to draw
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use(): the backend is chosen before pyplot loads
    return plt


def _errorbar(ax, xs, spreads, label):
    ys = [s.median for s in spreads]
    err = [[s.median - s.lo for s in spreads], [s.hi - s.median for s in spreads]]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)


def _title(run: str, env: str, workload: str) -> str:
    return f"{Path(run).stem or 'run'}: {env} / {workload}"


def _file(kind: str, run: str, env: str, workload: str) -> str:
    """One file per (run, environment, workload): the run is its matrix path, not
    only the file's stem (two folders may each hold a smoke.yaml)."""
    return f"{kind}-{file_name(run or 'run', env, workload)}.png"


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


Series = dict[tuple, dict[str, list[tuple[float, object]]]]  # (run, env, workload) -> line -> [(x, spread)]


def _worth_drawing(series: Series) -> Series:
    """Only lines with at least two distinct x values, and only plots with
    such a line: a single point on an axis says nothing."""
    out: Series = {}
    for key, lines in series.items():
        kept = {name: sorted(points, key=lambda p: p[0]) for name, points in lines.items()
                if len({x for x, _ in points}) >= 2}
        if kept:
            out[key] = kept
    return out


def scaling_series(results: list[dict]) -> Series:
    """samples/s against devices, one line per wrapper and batch (the fixed
    global batch, or the per-device batch when it grows with the devices),
    the 1-device cell at the matching batch as each line's first point."""
    series: dict[tuple, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    rows_all = analysis.scaling(results)
    for row in rows_all:
        if row["status"] == OK and row["samples_per_sec"] and row["devices"] > 1:
            fixed = row["policy"] == "fixed"
            per = row["batch"] if fixed else row["batch"] // row["devices"]
            series[(row["run"], row["environment"], row["workload"])][(row["wrapper"], fixed, per)].append(row)
    base = {(r["run"], r["environment"], r["workload"], r["batch"]): r for r in rows_all
            if r["devices"] == 1 and r["status"] == OK and r["samples_per_sec"]}
    out: Series = defaultdict(dict)
    for (run, env, workload), lines in series.items():
        for (wrapper, fixed, per), rows in lines.items():
            first = base.get((run, env, workload, per))
            points = ([first] if first else []) + sorted(rows, key=lambda r: r["devices"])
            name = f"{wrapper}, batch {per}" if fixed else f"{wrapper}, {per} per device"
            out[(run, env, workload)][name] = [(p["devices"], p["samples_per_sec"]) for p in points]
    return _worth_drawing(out)


def time_vs_batch_series(results: list[dict]) -> Series:
    """Seed 000's plot: seconds per epoch against batch size, one line per parallelism."""
    out: Series = defaultdict(lambda: defaultdict(list))
    for g in analysis.groups(results).values():
        seconds = g.epoch_seconds() if g.all_ok else None
        if seconds:
            key = (analysis.run_of(g.first), analysis.env_of(g.first), analysis.workload_of(g.first))
            out[key][analysis.label_of(g.first)].append((g.first.batch_size, seconds))
    return _worth_drawing(out)


def _draw(series: Series, kind: str, caption: str, xlabel: str, ylabel: str, out: Path, stacks: list[str],
          log_x: bool = False) -> list[tuple[str, Path]]:
    plt = pyplot()
    made = []
    order = {env: n for n, env in enumerate(stacks)}  # version order, as in the tables
    for (run, env, workload), lines in sorted(series.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 0),
                                                                              kv[0][2])):
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, points in sorted(lines.items()):
            _errorbar(ax, [x for x, _ in points], [s for _, s in points], label)
        if log_x:
            ax.set_xscale("log", base=2)
        else:  # device counts: whole numbers only
            from matplotlib.ticker import MaxNLocator  # matplotlib is imported only to draw (see pyplot)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        title = _title(run, env, workload)
        made.append((f"{caption}: {title}", _save(plt, fig, ax, xlabel, ylabel, title,
                                                 out / _file(kind, run, env, workload))))
    return made


TREND_METRICS = (("val_accuracy", "validation accuracy"), ("samples_per_sec", "samples / s (steady epochs)"),
                 ("speedup", "N devices / 1 device, samples/s"))


def draw_trends(results: list[dict], out: Path) -> list[tuple[str, Path]]:
    """Per swept package, workload and stack: each metric against the release, on a
    version axis (PEP 440 order, evenly spaced, never text order), one line per
    parallelism; a release whose cell failed is marked on the axis with its status."""
    plt = pyplot()
    made = []
    for (run, workload, package, stack), rows in analysis.trend_series(results).items():
        versions = sorted({r["version"] for r in rows}, key=release_key)
        x_of = {v: n for n, v in enumerate(versions)}
        for metric, ylabel in TREND_METRICS:
            lines: dict[str, list] = defaultdict(list)
            for r in rows:
                value = r[metric]
                if value is not None:
                    lines[f"{r['label']} b{r['batch']}"].append((x_of[r["version"]], value))
            if not lines:
                continue
            failed = [r for r in rows if r["word"] != "ok" and (metric != "speedup" or r["devices"] > 1)]
            fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(versions) + 2), 4))
            for label, points in sorted(lines.items()):
                points.sort(key=lambda p: p[0])
                if isinstance(points[0][1], float):
                    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
                else:
                    _errorbar(ax, [p[0] for p in points], [p[1] for p in points], label)
            for n, r in enumerate(sorted(failed, key=lambda r: x_of[r["version"]])):
                ax.annotate(r["word"], (x_of[r["version"]], 0), xycoords=("data", "axes fraction"),
                            xytext=(0, 4 + 10 * (n % 2)), textcoords="offset points", ha="center", fontsize=7,
                            color="red")
                ax.axvline(x_of[r["version"]], color="red", alpha=0.15, linewidth=6)
            ax.set_xticks(range(len(versions)))
            ax.set_xticklabels(versions, rotation=45, ha="right", fontsize=8)
            title = f"{Path(run).stem or 'run'}: {workload}, {stack.replace('*', 'X')}"
            name = f"trend-{metric}-{file_name(run or 'run', workload, package, stack)}.png"
            made.append((f"{ylabel} across {package} releases: {title}",
                         _save(plt, fig, ax, f"{package} release", ylabel, title, out / name)))
    return made


def draw_all(results: list[dict], out: Path) -> list[tuple[str, Path]]:
    out.mkdir(parents=True, exist_ok=True)
    stacks = list(analysis.stacks(results))
    return (draw_trends(results, out)
            + _draw(scaling_series(results), "scaling", "Throughput against devices", "devices",
                    "samples / s (training, steady epochs)", out, stacks)
            + _draw(time_vs_batch_series(results), "time-vs-batch", "Epoch time against batch size", "batch size",
                    "seconds per epoch (training)", out, stacks, log_x=True)
            + reported.draw(results, out, pyplot))
