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
from collections.abc import Callable
from pathlib import Path

from harness.errors import UserError
from harness.files.outputs import Manifest
from harness.host.beside import NEXT_CELL
from harness.launch.allocation import PREALLOCATE
from harness.matrix import load as load_matrix
from harness.report import divergence, plots, reported, site, tables
from harness.report.analysis import compare_runs
from harness.report.markdown import md_escape, md_table
from harness.results.result import Result
from harness.results.store import read_all
from harness.results.views import Provenance, Seen
from harness.watch import history, page
from harness.workloads.protocol import cuda_version_text, cudnn_version_text

CSV_FIELDS = ("cell", "status", "environment", "workload", "parallelism", "devices", "batch_size", "repeat",
              "engine", "python", "tensorflow", "keras", "backend", "val_accuracy", "accuracy",
              "steady_epoch_seconds", "steady_samples_per_sec", "total_seconds", "signature", "reason", "releases",
              "launch", "first_epoch_seconds", "compile_cache")


def load(roots: list[Path], notes: Callable[[str], None] | None = None) -> list[tuple[Path, Result]]:
    """The results below `roots`, read through the result model; a file that is not a result is
    told to `notes` in one line and left out."""
    return read_all([Path(root) for root in roots], notes)


def report_tables(results: list[Result]) -> list[tables.Table]:
    return tables.report(results) + reported.tables(results)  # then what users' scripts reported


def provenance_lines(results: list[dict]) -> list[str]:
    statuses = Counter(r.status for r in results)
    hosts = sorted({r.host for r in results})
    commits = sorted({_harness_of(r.origin) for r in results})
    matrices = sorted({r.matrix or "?" for r in results})
    engines = sorted({r.engine or "?" for r in results})
    gpus = sorted({g for r in results for g in r.inside.gpus})
    return [
        f"{len(results)} cells: " + ", ".join(f"{n} {s}" for s, n in statuses.most_common()),
        f"matrices: {', '.join(matrices)}; engines: {', '.join(engines)}; {len(hosts)} host(s); "
        f"harness: {', '.join(commits)}",
        "devices seen: " + (", ".join(gpus) if gpus else "no GPU (CPU and virtual CPU devices only)"),
    ] + gpu_lines(results) + warmth_lines(results) + coverage_lines(results)


def warmth_lines(results: list[Result]) -> list[str]:
    """How the cells started (warm: forked from a launcher that had imported the stack; fresh: a
    new interpreter), and whether compilation came from a cache. Every figure the tables compare
    is a steady epoch (2..N); the first epoch, where compilation lands, is kept apart in each
    cell's timing and means something different warm with a cache hit than cold."""
    warmth = [r.warmth for r in results if r.warmth]
    if not warmth:
        return []
    launches = Counter(w.launch or "fresh" for w in warmth)
    hits = Counter(w.cache_hit for w in warmth if w.compile_cache)
    decided = sum(1 for r in results if r.status == "unsupported" and r.exit is None
                  and r.warmth is None and r.reason)
    line = "launch: " + ", ".join(f"{n} {k}" for k, n in sorted(launches.items()))
    if hits:
        line += "; compile cache hit: " + ", ".join(f"{k} in {n}" for k, n in sorted(hits.items()))
    on_demand = sum(1 for w in warmth if (w.settings or {}).get(PREALLOCATE) == "false")
    if on_demand:
        line += f"; GPU memory taken as needed (not reserved up front) in {on_demand}"
    line += "; first epochs (compilation) are kept apart, steady epochs are compared"
    busy = sum(1 for w in warmth if any(b.kind != NEXT_CELL for b in w.beside or []))
    if busy:
        line += (f"; {busy} cell(s) ran while the harness itself imported a launcher or built an "
                 "environment on other cores (warmth.beside)")
    followed = sum(1 for w in warmth if any(b.kind == NEXT_CELL for b in w.beside or []))
    stood_by = sum(1 for r in results if (r.timing or {}).get("standby"))
    if stood_by:
        line += (f"; {stood_by} cell(s) prepared while another trained on their GPUs and trained after it "
                 f"(timing.standby); {followed} cell(s) trained beside such a preparation on their cores")
    if decided:
        line += f"; {decided} unsupported cell(s) decided without launching"
    return [line]


def _harness_of(prov: Provenance) -> str:
    """Which harness wrote a result: its commit from a checkout, else (installed) its
    version and the hash of its files."""
    if prov.harness_commit:
        return prov.harness_commit[:12]
    if prov.harness_files_sha256:
        return f"{prov.harness_version or '?'} (installed; files {prov.harness_files_sha256[:12]})"
    return f"{prov.harness_version} (no commit recorded)" if prov.harness_version else "not recorded"


def gpu_lines(results: list[dict]) -> list[str]:
    """The GPU hosts behind the results: model, memory, compute capability,
    driver, topology (from the host, once per run), and the CUDA / cuDNN the
    frameworks reported from inside the cells."""
    hosts: dict[tuple, dict] = {}
    for r in results:
        prov = r.origin
        gpus, links = prov.gpus, prov.gpu_links
        if not gpus or not any(g.name for g in gpus):
            continue
        g = gpus[0]
        key = r.host, len(gpus)
        hosts[key] = {"text": f"{len(gpus)} x {g.name} ({(g.memory_mib or 0) // 1024} GiB, "
                              f"compute capability {g.compute_capability}, driver {g.driver})"
                              + (f", GPU links: {', '.join(links)}" if links else "")}
    stacks = sorted({_cuda_seen(r.inside) for r in results if r.inside.gpus and r.inside.cuda})
    lines = [f"GPU host {name}: {h['text']}" for (name, _), h in sorted(hosts.items())]
    if stacks:
        lines.append("CUDA as the frameworks report it: " + "; ".join(stacks))
    return lines


def _cuda_seen(seen: Seen) -> str:
    framework = f"JAX {seen.jax}" if seen.jax else f"TF {seen.tensorflow}"
    return f"{framework}: CUDA {cuda_version_text(seen.cuda)}, cuDNN {cudnn_version_text(seen.cudnn)}"


def coverage_lines(results: list[dict]) -> list[str]:
    """How much of each matrix has results, when its file is still where the
    run found it: a report built while a run is unfinished says so itself."""
    have: dict[str, set] = defaultdict(set)
    for r in results:
        have[r.matrix].add(r.cell)
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


def _csv_row(r: Result) -> dict:
    return {"cell": r.cell, "status": r.status, "environment": r.environment, "workload": r.workload,
            "parallelism": r.parallelism.get("label"), "devices": r.parallelism.get("devices"),
            "batch_size": r.batch_size, "repeat": r.repeat, "engine": r.engine,
            **{k: getattr(r.inside, k) for k in ("python", "tensorflow", "keras", "backend")},
            "val_accuracy": r.metric("val_accuracy"), "accuracy": r.metric("accuracy"),
            **{k: r.timing_of(k) for k in ("steady_epoch_seconds", "steady_samples_per_sec", "total_seconds")},
            "signature": r.signature, "reason": r.reason,
            "releases": " ".join(f"{p}=={v}" for p, _, v in r.releases),
            "launch": r.warmth and r.warmth.launch, "first_epoch_seconds": r.timing_of("first_epoch_seconds"),
            "compile_cache": r.warmth and r.warmth.cache_hit}


REPORT_FILES = ("index.html", "report.md", "results.csv", "results.json")


def _legacy_report(out: Path) -> list[str]:
    """What a report from before manifests wrote in `out` -- only where all four of its
    files are there to say it was one: its pages (cells/*.html) and plots (plots/*.png)."""
    if not all((out / name).is_file() for name in REPORT_FILES):
        return []
    return [*REPORT_FILES, *(f"cells/{p.name}" for p in (out / "cells").glob("*.html")),
            *(f"plots/{p.name}" for p in (out / "plots").glob("*.png"))]


def markdown(results: list[dict], title: str, plot_links: list[tuple[str, str]], link=None) -> str:
    parts = [f"# {md_escape(title)}", ""] + [f"- {md_escape(line)}" for line in provenance_lines(results)] + [""]
    parts += [md_table(t, link) for t in report_tables(results)]
    if plot_links:
        parts.append("### Plots\n")
        parts += [f"![{caption}]({src})\n" for caption, src in plot_links]
    return "\n".join(p for p in parts if p is not None)


def publish(roots: list[Path], out: Path, title: str = "Compatibility report",
            markdown_path: Path | None = None, notes: Callable[[str], None] | None = None,
            divergences: list[Path] = ()) -> dict:
    """The site, Markdown, CSV and JSON of the results below `roots`; with `divergences`, a page
    for every `harness diverge` record below those folders, linked from the index."""
    found = load(roots, notes)
    results = [r for _, r in found]
    out.mkdir(parents=True, exist_ok=True)
    # only what an earlier report wrote here goes (outputs.Manifest): a user's file, or a
    # run that happens to be named `cells` or `plots`, stays
    written = Manifest(out, legacy=lambda: _legacy_report(out))
    written.clear_earlier()
    (out / "cells").mkdir(exist_ok=True)
    drawn = plots.draw_all(results, out / "plots")
    for _, path in drawn:
        written.add(path)
    rel = [(caption, os.path.relpath(path, out)) for caption, path in drawn]
    written.add(out / "report.md").write_text(markdown(results, title, rel,
                                                       link=lambda cell: f"cells/{tables.slug(cell)}.html"))
    with open(written.add(out / "results.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(_csv_row(r) for r in results)
    written.add(out / "results.json").write_text(json.dumps([r.to_dict() for r in results], indent=1,
                                                            sort_keys=True, default=str))
    by_id: dict[str, list] = defaultdict(list)  # one cell id may come from several runs
    for folder, r in found:
        by_id[r.cell].append((folder, r))
    for cell_id, entries in by_id.items():
        text = site.cell_page(entries[0][1], entries[0][0]) if len(entries) == 1 else site.cells_page(entries)
        written.add(out / "cells" / f"{tables.slug(cell_id)}.html").write_text(text)
    watched = _watch_pages(roots, out)
    for _, made in divergence.pages(list(divergences), out):
        for path in (made, made.parent / divergence.PLOT):
            if path.exists():
                written.add(path)
        watched.append(os.path.relpath(made, out))
    written.add(out / "index.html").write_text(site.index(title, provenance_lines(results), report_tables(results), rel,
                                               ["report.md", "results.csv", "results.json", *watched]))
    written.save()
    summary = {"site": out / "index.html", "markdown": out / "report.md", "cells": len(results),
               "plots": len(drawn), "notes": written.notes}
    if markdown_path:
        markdown_path = Path(markdown_path)
        plot_dir = markdown_path.parent / f"{markdown_path.stem}-plots"
        plot_dir.mkdir(parents=True, exist_ok=True)
        copies = Manifest(plot_dir, legacy=lambda: [p.name for p in plot_dir.glob("*.png")]
                          if markdown_path.exists() else [])
        copies.clear_earlier()
        links = []
        for caption, path in drawn:
            shutil.copy(path, copies.add(plot_dir / path.name))
            links.append((caption, f"{plot_dir.name}/{path.name}"))
        copies.save()
        markdown_path.write_text(markdown(results, title, links))
        summary["markdown_copy"] = markdown_path
        summary["notes"] += copies.notes
    return summary


def _watch_pages(roots: list[Path], out: Path) -> list[str]:
    """The history page, feeds and badges of every watched matrix below `roots` (``harness watch``
    writes them too; they are the watch's files, not in this report's manifest), linked from the index."""
    links = []
    for root in roots:
        for run in sorted(p for p in Path(root).iterdir() if p.is_dir()) if Path(root).is_dir() else []:
            if (run / history.FOLDER / history.HISTORY).is_file():
                links.append(os.path.relpath(page.write_site(out, Path(root), run.name)["page"], out))
    return links


def compare(run_a: Path, run_b: Path, notes: Callable[[str], None] | None = None) -> tuple[str, int]:
    """Markdown of what changed from run A to run B, and how many regressions."""
    a = [r for _, r in load([run_a], notes)]
    b = [r for _, r in load([run_b], notes)]
    diff = compare_runs(a, b)
    diff["metric_changes"] = reported.changes(a, b)
    parts = [f"# {run_a} -> {run_b}", "",
             f"- {len(diff['regressions'])} regressions, {len(diff['fixes'])} fixes, {len(diff['slower'])} slower, "
             f"{len(diff['faster'])} faster, {len(diff['metric_changes'])} reported numbers changed; "
             f"{len(diff['only_a'])} cells only in A, {len(diff['only_b'])} only in B",
             ""]
    parts += [md_table(t) for t in tables.comparison(diff)]
    return "\n".join(parts), len(diff["regressions"])
