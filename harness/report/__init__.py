"""Reports: pure functions of result folders (they never import TensorFlow).

`publish()` writes the static site (index + a page per cell + plots), the
Markdown report, and CSV / JSON for tools; `compare()` sets two runs side by side.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections import Counter, defaultdict
from pathlib import Path

from ..store import iter_results
from . import plots, site, tables
from .markdown import md_escape, md_table

CSV_FIELDS = ("cell", "status", "environment", "workload", "parallelism", "devices", "batch_size", "repeat",
              "engine", "python", "tensorflow", "keras", "backend", "val_accuracy", "accuracy",
              "steady_epoch_seconds", "steady_samples_per_sec", "total_seconds", "signature", "reason",
              "launch", "first_epoch_seconds", "compile_cache")


def load(roots: list[Path]) -> list[tuple[Path, dict]]:
    found = []
    for root in roots:
        found += list(iter_results(Path(root)))
    return found


def report_tables(results: list[dict]) -> list[tables.Table]:
    return tables.report(results)


def provenance_lines(results: list[dict]) -> list[str]:
    statuses = Counter(r["status"] for r in results)
    prov = [r.get("provenance") or {} for r in results]
    hosts = sorted({(p.get("host") or {}).get("name", "?") for p in prov})
    commits = sorted({(p.get("harness_commit") or "?")[:12] for p in prov})
    matrices = sorted({p.get("matrix") or "?" for p in prov})
    engines = sorted({r.get("engine") or "?" for r in results})
    gpus = sorted({g for r in results for g in ((r.get("seen") or {}).get("gpus") or [])})
    return [
        f"{len(results)} cells: " + ", ".join(f"{n} {s}" for s, n in statuses.most_common()),
        f"matrices: {', '.join(matrices)}; engines: {', '.join(engines)}; {len(hosts)} host(s); "
        f"harness commits: {', '.join(commits)}",
        "devices seen: " + (", ".join(gpus) if gpus else "no GPU (CPU and virtual CPU devices only)"),
    ] + gpu_lines(results) + warmth_lines(results) + coverage_lines(results)


def warmth_lines(results: list[dict]) -> list[str]:
    """How the cells started (warm: forked from a launcher that had imported the stack; fresh: a
    new interpreter), and whether compilation came from a cache. Every figure the tables compare
    is a steady epoch (2..N); the first epoch, where compilation lands, is kept apart in each
    cell's timing and means something different warm with a cache hit than cold."""
    warmth = [r.get("warmth") for r in results if r.get("warmth")]
    if not warmth:
        return []
    launches = Counter(w.get("launch") or "fresh" for w in warmth)
    hits = Counter((w.get("compile_cache") or {}).get("hit") for w in warmth if w.get("compile_cache"))
    decided = sum(1 for r in results if r["status"] == "unsupported" and r.get("exit") is None
                  and r.get("warmth") is None and r.get("reason"))
    line = "launch: " + ", ".join(f"{n} {k}" for k, n in sorted(launches.items()))
    if hits:
        line += "; compile cache hit: " + ", ".join(f"{k} in {n}" for k, n in sorted(hits.items()))
    line += "; first epochs (compilation) are kept apart, steady epochs are compared"
    if decided:
        line += f"; {decided} unsupported cell(s) decided without launching"
    return [line]


def gpu_lines(results: list[dict]) -> list[str]:
    """The GPU hosts behind the results: model, memory, compute capability,
    driver, topology (from the host, once per run), and the CUDA / cuDNN the
    frameworks reported from inside the cells."""
    hosts: dict[tuple, dict] = {}
    for r in results:
        res = (r.get("provenance") or {}).get("host_resources") or {}
        gpus = res.get("gpus") or []
        if not gpus or not any(g.get("name") for g in gpus):
            continue
        g = gpus[0]
        links = sorted(set((res.get("topology") or {}).values()))
        key = ((r.get("provenance") or {}).get("host") or {}).get("name", "?"), len(gpus)
        hosts[key] = {"text": f"{len(gpus)} x {g.get('name')} ({(g.get('memory_mib') or 0) // 1024} GiB, "
                              f"compute capability {g.get('compute_capability')}, driver {g.get('driver')})"
                              + (f", GPU links: {', '.join(links)}" if links else "")}
    stacks = sorted({_cuda_seen(r["seen"]) for r in results
                     if (r.get("seen") or {}).get("gpus") and r["seen"].get("cuda")})
    lines = [f"GPU host {name}: {h['text']}" for (name, _), h in sorted(hosts.items())]
    if stacks:
        lines.append("CUDA as the frameworks report it: " + "; ".join(stacks))
    return lines


def _cuda_seen(seen: dict) -> str:
    framework = f"JAX {seen['jax']}" if seen.get("jax") else f"TF {seen.get('tensorflow')}"
    return f"{framework}: CUDA {seen.get('cuda')}, cuDNN {seen.get('cudnn')}"


def coverage_lines(results: list[dict]) -> list[str]:
    """How much of each matrix has results, when its file is still where the
    run found it: a report built while a run is unfinished says so itself."""
    from ..errors import UserError
    from ..matrix import load as load_matrix
    have: dict[str, set] = defaultdict(set)
    for r in results:
        have[(r.get("provenance") or {}).get("matrix") or ""].add(r["cell"])
    lines = []
    for path, cells in sorted(have.items()):
        if not path or not Path(path).is_file():
            continue
        try:
            ids = {c.id for c in load_matrix(path).cells}
        except UserError:
            continue  # changed into something invalid since: nothing to count against
        missing = len(ids - cells)
        if missing:
            lines.append(f"{path}: {len(ids) - missing} of {len(ids)} cells have results; {missing} "
                         f"{'has' if missing == 1 else 'have'} none yet")
    return lines


def _csv_row(r: dict) -> dict:
    seen, par, timing = r.get("seen") or {}, r.get("parallelism") or {}, r.get("timing") or {}
    metrics, err = r.get("metrics") or {}, r.get("error") or {}
    return {"cell": r["cell"], "status": r["status"], "environment": r.get("environment"),
            "workload": r.get("workload"), "parallelism": par.get("label"), "devices": par.get("devices"),
            "batch_size": r.get("batch_size"), "repeat": r.get("repeat"), "engine": r.get("engine"),
            "python": seen.get("python"), "tensorflow": seen.get("tensorflow"), "keras": seen.get("keras"),
            "backend": seen.get("backend"), "val_accuracy": metrics.get("val_accuracy"),
            "accuracy": metrics.get("accuracy"), "steady_epoch_seconds": timing.get("steady_epoch_seconds"),
            "steady_samples_per_sec": timing.get("steady_samples_per_sec"),
            "total_seconds": timing.get("total_seconds"), "signature": err.get("signature"),
            "reason": r.get("reason"), "launch": (r.get("warmth") or {}).get("launch"),
            "first_epoch_seconds": timing.get("first_epoch_seconds"),
            "compile_cache": ((r.get("warmth") or {}).get("compile_cache") or {}).get("hit")}


def markdown(results: list[dict], title: str, plot_links: list[tuple[str, str]], link=None) -> str:
    parts = [f"# {md_escape(title)}", ""] + [f"- {md_escape(line)}" for line in provenance_lines(results)] + [""]
    parts += [md_table(t, link) for t in report_tables(results)]
    if plot_links:
        parts.append("### Plots\n")
        parts += [f"![{caption}]({src})\n" for caption, src in plot_links]
    return "\n".join(p for p in parts if p is not None)


def publish(roots: list[Path], out: Path, title: str = "Compatibility report",
            markdown_path: Path | None = None) -> dict:
    found = load(roots)
    results = [r for _, r in found]
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("cells", "plots"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "cells").mkdir()
    drawn = plots.draw_all(results, out / "plots")
    rel = [(caption, os.path.relpath(path, out)) for caption, path in drawn]
    (out / "report.md").write_text(markdown(results, title, rel,
                                            link=lambda cell: f"cells/{tables.slug(cell)}.html"))
    with open(out / "results.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(_csv_row(r) for r in results)
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True, default=str))
    for folder, r in found:
        (out / "cells" / f"{tables.slug(r['cell'])}.html").write_text(site.cell_page(r, folder))
    (out / "index.html").write_text(site.index(title, provenance_lines(results), report_tables(results), rel,
                                               ["report.md", "results.csv", "results.json"]))
    written = {"site": out / "index.html", "markdown": out / "report.md", "cells": len(results),
               "plots": len(drawn)}
    if markdown_path:
        markdown_path = Path(markdown_path)
        plot_dir = markdown_path.parent / f"{markdown_path.stem}-plots"
        shutil.rmtree(plot_dir, ignore_errors=True)
        plot_dir.mkdir(parents=True)
        links = []
        for caption, path in drawn:
            shutil.copy(path, plot_dir / path.name)
            links.append((caption, f"{plot_dir.name}/{path.name}"))
        markdown_path.write_text(markdown(results, title, links))
        written["markdown_copy"] = markdown_path
    return written


def compare(run_a: Path, run_b: Path) -> tuple[str, int]:
    """Markdown of what changed from run A to run B, and how many regressions."""
    from .analysis import compare_runs
    a = [r for _, r in load([run_a])]
    b = [r for _, r in load([run_b])]
    diff = compare_runs(a, b)
    parts = [f"# {run_a} -> {run_b}", "",
             f"- {len(diff['regressions'])} regressions, {len(diff['fixes'])} fixes, {len(diff['slower'])} slower, "
             f"{len(diff['faster'])} faster; {len(diff['only_a'])} cells only in A, {len(diff['only_b'])} only in B",
             ""]
    parts += [md_table(t) for t in tables.comparison(diff)]
    return "\n".join(parts), len(diff["regressions"])
