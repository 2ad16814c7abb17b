"""The watch's part of the site: a history page per matrix, its feeds, badges and evidence.

``site/history/<matrix>.html`` holds the support grid over time (for each stack and cell:
releases x watch dates, each entry the status known at that watch) and the change log with
links to the evidence; ``publish.write`` writes ``site/feeds/<matrix>.json`` / ``.atom.xml``
and ``site/badges/<matrix>/*.svg``; the evidence the change log links (result files, bisect
bundles) is copied under ``site/history/<matrix>/``. Plain HTML, relative links, no script: the
same rules as the report's site (``harness.report.site``), whose styles it shares (``harness.htmlpage``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections import defaultdict
from pathlib import Path

from harness import status
from harness.claims import Change
from harness.files import ownfiles
from harness.files.paths import inside
from harness.htmlpage import e, page
from harness.stacks import release_key
from harness.watch import changelog, history, publish, series


def load_changes(where: Path) -> list[tuple[Change, dict]]:
    out, seen = [], set()
    for record in history.read(where / history.CHANGES):
        try:
            change = changelog.from_dict(record["change"])
        except (KeyError, TypeError, ValueError):
            continue
        if change.id not in seen:
            seen.add(change.id)
            out.append((change, record.get("sources") or {}))
    return out


def write_site(site: Path, results: Path, matrix: str, *, home_url: str = "") -> dict:
    """Write (or bring up to date) the watch's files of `matrix` under `site`: never through a
    link or into a pipe there (``ownfiles``), and only evidence the watch itself recorded."""
    where = history.folder(results, matrix)
    entries = history.read(where / history.HISTORY)
    runs = history.read(where / history.RUNS)
    found = load_changes(where)
    name = publish.file_name(matrix)
    site.mkdir(parents=True, exist_ok=True)
    for _change, sources in found:
        for link, source in sources.items():
            if isinstance(link, str) and isinstance(source, str):
                _copy(Path(source), inside(site, site / link), results, site)
    badges = stack_badges(entries, found)
    feeds = publish.write(site, matrix, [c for c, _ in found], badges, home_url=home_url)
    target = site / publish.HISTORY_PAGE.format(matrix=name)
    ownfiles.write_atomic(site, target, history_page(matrix, entries, runs, [c for c, _ in found], badges, feeds,
                                                     site).encode("utf-8"))
    return {"page": target, "feeds": [p for p in feeds if p.suffix in (".json", ".xml")],
            "badges": sum(1 for p in feeds if p.suffix == ".svg")}


BUNDLE_FILES = ("README.md", "spec.json", "provenance.json")   # what every repro bundle holds (repro.py)


def _copy(source: Path, target: Path, results: Path, site: Path) -> None:
    """Copy one piece of evidence into the site, once. The record names it, and a record can be
    edited: so only a result file inside the results folder, or a repro bundle, is copied, and
    never a link -- a changes.jsonl pointed at any other file would publish it."""
    if os.path.lexists(target) or not os.path.lexists(source):
        return  # evidence, once copied, is what the change was found on
    info = os.lstat(source)
    bundle = stat.S_ISDIR(info.st_mode) and all((source / f).is_file() for f in BUNDLE_FILES)
    result = stat.S_ISREG(info.st_mode) and source.name == "result.json"
    if not (bundle or result):
        raise ownfiles.NotOwn(source, "is not evidence the watch recorded (a result file or a repro bundle)")
    if result:
        inside(results, source)
        ownfiles.write_atomic(site, target, ownfiles.read_bytes(source) or b"")
        return
    ownfiles.make_folders(site, target.parent)
    shutil.copytree(source, target, symlinks=False,
                    ignore=lambda folder, names: [n for n in names if os.path.islink(os.path.join(folder, n))])


def badge_name(package: str, stack: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{stack.replace('*', '')}-{package}").strip("_.-") or "stack"


def stack_badges(entries: list[dict], found: list[tuple[Change, dict]]) -> dict[str, tuple[str, str, str]]:
    """One badge per stack (the environment with its axis release left open): 'works with' the
    newest release whose cells were all ok, 'broken since' the first failing one after it."""
    latest = series.newest_per_cell(entries)
    by: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[tuple[str, str], str] = {}   # (package, open stack) -> the name of its first entry
    for key, version, e_ in series.keyed(latest):
        if e_.get("status") not in status.NOT_RUN:
            labels.setdefault((key.package, key.spec), key.stack)
            by[(key.package, key.spec)][version].append(e_.get("status"))
    out = {}
    for (package, spec), versions in sorted(by.items(), key=lambda kv: (kv[0][0], labels[kv[0]], kv[0][1])):
        stack = labels[(package, spec)]
        order = sorted(versions, key=release_key)
        good = [v for v in order if all(s == status.OK for s in versions[v])]
        if not good:
            out[badge_name(package, stack)] = publish.stack_badge(package, order[0] if order else None, False)
        elif good[-1] == order[-1]:
            out[badge_name(package, stack)] = publish.stack_badge(package, good[-1], True)
        else:
            first_bad = next(v for v in order if release_key(v) > release_key(good[-1]))
            bisected = [c.where["bisected_to"] for c, _ in found if c.kind == "broke"
                        and c.where["package"] == package and c.where["cell"].startswith(f"{stack}/")
                        and c.after == first_bad and c.where.get("bisected_to")
                        and " " not in c.where["bisected_to"]]   # a bisect's single answer is the release it broke in
            out[badge_name(package, stack)] = publish.stack_badge(package, bisected[0] if bisected else first_bad,
                                                                  False)
    return out


def history_page(matrix: str, entries: list[dict], runs: list[dict], changes: list[Change],
                 badges: dict, written: list[Path], site: Path) -> str:
    name = publish.file_name(matrix)
    rel = [p.relative_to(site).as_posix() for p in written]
    feeds = [p for p in rel if p.endswith((".json", ".xml"))]
    body = ["<p>What each watch of this matrix saw: the support grid over time, and every change found, "
            "first seen first. Also as feeds: " + ", ".join(f'<a href="../{e(f)}">{e(f)}</a>' for f in feeds)
            + ".</p>"]
    badge_files = [p for p in rel if p.endswith(".svg")]
    if badge_files:
        body.append("<p>" + " ".join(f'<img class="badge" src="../{e(b)}" alt="{e(Path(b).stem)}">'
                                     for b in badge_files) + "</p>")
    body.append("<h2 id=\"changes\">Change log</h2>")
    if changes:
        body.append("<table><thead><tr><th>first seen</th><th>kind</th><th>change</th><th>bisected to</th>"
                    "<th>evidence</th></tr></thead><tbody>")
        for c in sorted(changes, key=lambda c: (c.where["first_seen"], c.id), reverse=True):
            links = " ".join(f'<a href="../{e(link)}">{e(_link_text(link))}</a>' for link in c.evidence
                             if not link.startswith(publish.HISTORY_PAGE.format(matrix=name)))
            cls = "crash" if c.kind in ("broke", "slower", "expectation", "accuracy") else "ok"
            where = c.where
            body.append(f'<tr id="change-{e(c.id)}"><td>{e(where["first_seen"])}</td><td class="{cls}">{e(c.kind)}</td>'
                        f"<td>{e(where['summary'])}</td><td>{e(where.get('bisected_to') or '')}</td>"
                        f"<td>{links}</td></tr>")
        body.append("</tbody></table>")
    else:
        body.append("<p>No change found yet.</p>")
    body.append("<h2 id=\"grid\">Support over time</h2>")
    body.append(grid(entries, runs))
    body.append("<h2 id=\"runs\">Watches</h2><table><thead><tr><th>date</th><th>as of</th><th>cells</th>"
                "<th>run</th><th>new results</th><th>changes</th><th>host</th></tr></thead><tbody>")
    for r in runs:
        row = [r.get("date"), r.get("as_of") or "now", r.get("cells"), r.get("ran"), r.get("recorded"),
               len(r.get("changes") or []), r.get("host")]
        body.append("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>")
    body.append("</tbody></table>")
    return page(f"Watch: {matrix}", "\n".join(body))


def _link_text(link: str) -> str:
    if "/bundles/" in link:
        return "bundle"
    return "result " + Path(link).stem if "/evidence/" in link else Path(link).name


def grid(entries: list[dict], runs: list[dict]) -> str:
    """Per series: releases (rows, oldest first) x watches (columns, in order); an entry is the
    status of that release's cells as known after that watch ('' before it was first run)."""
    order = [r.get("watch") for r in runs]
    dates = {r.get("watch"): (r.get("as_of") or r.get("date") or "")[:10] for r in runs}
    state: dict[str, dict] = {}           # cell -> newest entry so far
    known: dict[str, dict[str, dict]] = {}  # watch -> that state
    by_watch = defaultdict(list)
    for x in entries:
        by_watch[x.get("watch")].append(x)
    for w in order:
        for x in by_watch.get(w, []):
            state[x["cell"]] = x
        known[w] = dict(state)
    if not order:
        return "<p>No watch has run yet.</p>"
    out = []
    tables: dict[series.Key, dict[str, dict[str, list[str]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for w in order:
        for key, version, x in series.keyed(list(known[w].values())):
            tables[key][version][w].append(x.get("status") or "?")   # the first key seen names the series
    for key, rows in sorted(tables.items(), key=lambda kv: (kv[0].package, kv[0].label, kv[0].host)):
        package, label, host = key.package, key.label, key.host
        out.append(f"<h3>{e(label)} across {e(package)} releases ({e(host)})</h3>")
        out.append("<table><thead><tr><th>" + e(package) + "</th>"
                   + "".join(f"<th>{e(dates[w])}</th>" for w in order) + "</tr></thead><tbody>")
        for version in sorted(rows, key=release_key):
            cells = []
            for w in order:
                got = rows[version].get(w)
                word = _word(got) if got else ""
                cells.append(f'<td class="{status.css_class(word)}">{e(word)}</td>')
            out.append(f"<tr><td>{e(version)}</td>{''.join(cells)}</tr>")
        out.append("</tbody></table>")
    return "\n".join(out)


def _word(statuses: list[str]) -> str:
    if all(s == status.OK for s in statuses):
        return status.OK
    bad = [s for s in statuses if s != status.OK]
    word = max(set(bad), key=bad.count)
    return word if len(bad) == len(statuses) else f"{word} ({len(bad)}/{len(statuses)})"
