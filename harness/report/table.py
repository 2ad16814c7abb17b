"""The compatibility table: environments as rows, workload x parallelism as columns."""

from __future__ import annotations

import statistics
from collections import defaultdict

Result = dict


def md_escape(text: object) -> str:
    """Make any text safe inside a Markdown table cell."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|")
    s = " ".join(s.split())
    return s.replace("<", "&lt;").replace(">", "&gt;")


def si(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def short_failure(result: Result) -> str:
    err = result.get("error") or {}
    if result["status"] in ("unsupported", "unavailable"):
        return (result.get("reason") or "")[:60]
    if err.get("signal"):
        return err["signal"]
    if err.get("type"):
        return err["type"].rsplit(".", 1)[-1]
    return err.get("kind") or ""


def summarize_group(results: list[Result]) -> str:
    """One table entry for the repeats of one (env, workload, parallelism, batch)."""
    statuses = [r["status"] for r in results]
    n = len(results)
    ok = [r for r in results if r["status"] == "ok"]
    if len(ok) == n:
        acc = [r["metrics"].get("val_accuracy") for r in ok if r["metrics"].get("val_accuracy") is not None]
        sps = [r["timing"].get("steady_samples_per_sec") for r in ok]
        sps = [v for v in sps if v is not None]
        parts = ["ok"]
        if acc:
            parts.append(f"val {statistics.median(acc):.2f}")
        if sps:
            parts.append(f"{si(statistics.median(sps))}/s")
        return " ".join(parts)
    worst = next(r for r in results if r["status"] != "ok")
    label = worst["status"]
    if len(set(statuses)) > 1:
        label = f"{label} {statuses.count(worst['status'])}/{n}"
    detail = short_failure(worst)
    return f"**{label}** {detail}".strip()


def compatibility_table(results: list[Result]) -> str:
    envs: list[str] = []
    columns: list[tuple[str, str]] = []
    groups: dict[tuple[str, tuple[str, str]], dict[int, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        env = r.get("environment") or r["cell"].split("/")[0]
        col = (r.get("workload") or r["cell"].split("/")[1], (r.get("parallelism") or {}).get("label")
               or r["cell"].split("/")[2])
        if env not in envs:
            envs.append(env)
        if col not in columns:
            columns.append(col)
        groups[(env, col)][r.get("batch_size") or 0].append(r)
    header = "| environment | " + " | ".join(md_escape(f"{w} {p}") for w, p in columns) + " |"
    rule = "|---|" + "---|" * len(columns)
    lines = [header, rule]
    for env in envs:
        cells = []
        for col in columns:
            by_batch = groups.get((env, col), {})
            entries = [f"b{b}: {summarize_group(rs)}" if len(by_batch) > 1 else summarize_group(rs)
                       for b, rs in sorted(by_batch.items())]
            cells.append("<br>".join(md_escape(e) for e in entries) if entries else "")
        lines.append(f"| {md_escape(env)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
