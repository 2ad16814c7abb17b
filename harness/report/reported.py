"""The numbers the user's own scripts reported (``workloads.metrics.report``):
a table per script workload, a plot per metric across stacks, and the
changes ``report compare`` lists.

A script's metrics are whatever it chose to report, so they get their own
tables (one column per name) instead of the compatibility tables' accuracy
and samples/s. A value is the median over the repeats with [min-max], like
every other figure; a cell that failed after reporting keeps its numbers,
marked by its status.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.names import file_name
from harness.report import analysis
from harness.report.analysis import Result
from harness.report.tables import MAX_COLUMNS, Entry, Table


def _scripts(results: list[Result]) -> list[Result]:
    return [r for r in results if r.code_kind == "script" and r.metrics]


def _names(results: list[Result]) -> list[str]:
    return sorted({k for r in results for k, v in r.metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)})


def _spread(results: list[Result], name: str):
    return analysis.spread_of(r.metric(name) for r in results)


def _show(s) -> str:
    """A reported number as it was given (a count stays a count), with the spread of repeats."""
    if s is None:
        return "-"
    text = f"{s.median:.6g}"
    return text + (f" [{s.lo:.6g}-{s.hi:.6g}]" if s.n > 1 and s.lo != s.hi else "")


def _by_workload(results: list[Result]) -> dict[tuple[str, str], dict[str, list[Result]]]:
    """(run, workload) -> group (cell id without the repeat) -> its results."""
    out: dict[tuple[str, str], dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in _scripts(results):
        run, group = analysis.group_id(r)
        out[(run, analysis.workload_of(r))][group].append(r)
    return out


def tables(results: list[Result]) -> list[Table]:
    out = []
    order = {env: n for n, env in enumerate(analysis.stacks(results))}
    for (run, workload), cells in sorted(_by_workload(results).items()):
        rows = [r for group in cells.values() for r in group]
        names = _names(rows)
        for start in range(0, len(names), MAX_COLUMNS - 1):
            chunk = names[start:start + MAX_COLUMNS - 1]
            part = f" (part {start // (MAX_COLUMNS - 1) + 1})" if len(names) >= MAX_COLUMNS else ""
            table = Table(f"Reported by {workload} ({Path(run).stem or 'run'}){part}", ["cell", "status", *chunk],
                          note="Numbers the script reported (workloads.metrics.report): the median over "
                               "repeats [min-max]; a failed cell keeps what it reported before it failed.")
            for group, members in sorted(cells.items(), key=lambda kv: (order.get(analysis.env_of(kv[1][0]), 0),
                                                                        kv[0])):
                status = analysis.Group(members).status
                table.rows.append([Entry(group, link=members[0]["cell"]),
                                   Entry(status, mark="ok" if status == "ok" else "error"),
                                   *(Entry(_show(_spread(members, n))) for n in chunk)])
            out.append(table)
    return out


def draw(results: list[Result], out: Path, pyplot) -> list[tuple[str, Path]]:
    """A bar per stack for each reported metric of each script workload (where two stacks or
    more reported it): where a number moved between versions is seen at a glance. `pyplot`
    gives matplotlib's pyplot (plots.pyplot: asked only when there is something to draw)."""
    made = []
    plt = None
    order = list(analysis.stacks(results))
    for (run, workload), cells in sorted(_by_workload(results).items()):
        rows = [r for group in cells.values() for r in group]
        for name in _names(rows):
            per_env: dict[str, list[Result]] = defaultdict(list)
            for r in rows:
                if r.metric(name) is not None:
                    per_env[analysis.env_of(r)].append(r)
            if len(per_env) < 2:
                continue
            if plt is None:
                plt = pyplot()
            envs = sorted(per_env, key=lambda e: order.index(e) if e in order else len(order))
            spreads = [_spread(per_env[e], name) for e in envs]
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.bar(range(len(envs)), [s.median for s in spreads],
                   yerr=[[s.median - s.lo for s in spreads], [s.hi - s.median for s in spreads]], capsize=3,
                   color=[_colour(per_env[e]) for e in envs])
            ax.set_xticks(range(len(envs)))
            ax.set_xticklabels(envs, rotation=45, ha="right", rotation_mode="anchor", fontsize=8)
            ax.set_ylabel(name)
            title = f"{Path(run).stem or 'run'}: {workload} / {name}"
            ax.set_title(title + "\n(orange: not the value expected; red: the cell failed)", fontsize=9)
            ax.grid(alpha=0.3, axis="y")
            fig.tight_layout()
            path = out / f"reported-{file_name(Path(run).stem or 'run', workload, name)}.png"  # one-to-one
            fig.savefig(path, dpi=90)
            plt.close(fig)
            made.append((f"Reported {name} across stacks: {title}", path))
    return made


def changes(a: list[Result], b: list[Result], tolerance: float = 1e-9) -> list[dict]:
    """Reported numbers that differ from run A to run B, cell by cell (a script's metric is
    the finding itself, so any change beyond A's own spread is listed)."""
    def index(results: list[Result]) -> dict[str, list[Result]]:
        out: dict[str, list[Result]] = defaultdict(list)
        for r in _scripts(results):
            out[analysis.group_id(r)[1]].append(r)
        return out
    ia, ib = index(a), index(b)
    found = []
    for cell in sorted(set(ia) & set(ib)):
        for name in sorted(set(_names(ia[cell])) & set(_names(ib[cell]))):
            sa, sb = _spread(ia[cell], name), _spread(ib[cell], name)
            if sa is None or sb is None:
                continue
            if abs(sb.median - sa.median) > tolerance * max(1.0, abs(sa.median)) and not sa.lo <= sb.median <= sa.hi:
                found.append({"cell": cell, "metric": name, "a_value": sa, "b_value": sb})
    return found


def _colour(results: list[Result]) -> str:
    """A bar's colour: red when a cell of it failed, orange when one ran but missed the value its
    matrix expects (drifted), blue otherwise."""
    if any(r.status != "ok" for r in results):
        return "#c44e52"
    if any(r.met is False for r in results):
        return "#dd8452"
    return "#4c72b0"
