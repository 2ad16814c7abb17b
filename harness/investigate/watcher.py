"""One watch of one matrix: expand, run what is new, record, find changes, bisect, publish.

Exit statuses (``harness watch``), for CI and schedulers:
  0  nothing new changed (new cells may have run; they changed nothing);
  1  new changes found (a break, a mend, a slow-down ...): the summary and the feeds name them;
  2  bad input or an error of the harness itself (one line naming what);
  3  another watch of this matrix holds its lock: nothing was done (``--wait`` waits instead);
  130 interrupted: finished cells are kept, the next watch resumes with the rest.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import time
import uuid
from pathlib import Path

from packaging.version import InvalidVersion, Version
from rich.console import Console

from harness import exits, status
from harness import matrix as matrix_mod
from harness.cells import Cell
from harness.claims import Change
from harness.errors import NothingReleasedYet, UserError
from harness.files.paths import check_writable
from harness.index import releases
from harness.index.nightly import nightly_of
from harness.investigate import bisect, bisect_ends
from harness.investigate.diverge import MODELS
from harness.results.store import ResultStore
from harness.run.runner import Runner
from harness.stacks import release_key
from harness.terminal import shown
from harness.watch import changelog as ch
from harness.watch import expand, history, page, publish, series

BISECTED_KINDS = ("broke", "mended", "expectation", "family-changed")  # a bisect goes whichever way the ends do
DIVERGED_KINDS = ("accuracy", "expectation")  # a value moved: `diverge` says where in the model


def command(args, console: Console, engine_factory) -> int:
    """`engine_factory()` opens the engine (a context manager), only when something must run."""
    as_of = expand.as_of_moment(args.as_of)
    resolver = expand.WatchResolver(as_of, offline=args.offline)
    try:
        m = expand.capped(matrix_mod.load(args.matrix, resolver=resolver), as_of)
    except NothingReleasedYet as nothing:   # a future major, a date before the first release: not an error
        console.print(f"watch {shown(args.matrix)}" + (f" as of {as_of}" if as_of else "") + ": no release yet in "
                      + ", ".join(shown(r) for r in nothing.ranges) + f"; nothing to run. Exit {exits.OK}.",
                      highlight=False)
        return exits.OK
    results = Path(args.results)
    check_writable(results, "--results")
    where = history.folder(results, m.name)
    try:
        with history.locked(where, wait=args.wait):
            return Watch(args, console, m, as_of, results, where, engine_factory).run()
    except history.Busy as busy:
        console.print(f"another watch of {shown(m.name)} is running (pid {shown(str(busy))}, lock "
                      f"{shown(where / history.LOCK)}); nothing done. Exit {exits.BUSY}; --wait waits for it.",
                      highlight=False)
        return exits.BUSY


class Watch:
    def __init__(self, args, console: Console, m, as_of: str | None, results: Path, where: Path, engine_factory):
        self.args, self.console, self.m, self.as_of = args, console, m, as_of
        self.results, self.where, self.engine_factory = results, where, engine_factory
        self.date = (as_of or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"))[:10]
        self.id = uuid.uuid4().hex[:12]
        self.store = ResultStore(results.resolve(), m.name)
        self.stack = contextlib.ExitStack()
        self._engine = None
        self.why: dict[str, str | None] = {}  # change id -> the diverge command that explains it

    def engine(self):
        if self._engine is None:
            self._engine = self.stack.enter_context(self.engine_factory())
            self._engine.warm = not self.args.fresh
        return self._engine

    def run(self) -> int:
        started = time.time()
        m, console = self.m, self.console
        with self.stack:
            expanded = self._expansion()
            old = history.read(self.where / history.HISTORY)
            seen = {(e.get("cell"), e.get("result_id")) for e in old}
            if m.resolver:  # `run`, `repro` and `report` of this results folder see what the watch saw
                m.resolver.record(self.results / m.name)
            new = [c for c in m.cells if self.store.existing(c) is None or self.store.is_stale(c)]
            console.print(f"watch {shown(m.name)}" + (f" as of {self.as_of}" if self.as_of else "")
                          + f": {len(m.cells)} cell(s), {len(new)} new", highlight=False)
            if getattr(m.resolver, "not_yet", None):
                console.print("  no release yet in " + ", ".join(shown(r) for r in m.resolver.not_yet)
                              + ": those environments wait for one", highlight=False)
            if new:
                Runner(m, self.engine(), self.results, console, jobs=self.args.jobs).complete(new)
            lines = []
            for cell in m.cells:
                result = self.store.existing(cell)
                folder = self.store.final_dir(cell)
                if result is not None and (cell.id, history.result_id(folder)) not in seen:
                    lines.append(history.entry(result, cell, folder_=folder, watch=self.id, date=self.date,
                                               as_of=self.as_of))
            history.append(self.where / history.HISTORY, lines)
            entries = series.newest_per_cell(old + lines, {c.id for c in m.cells})
            known = history.read(self.where / history.CHANGES)
            known_ids = {k.get("change", {}).get("id") for k in known}
            fresh = [c for c in series.find(m.name, entries, self.date) if c.id not in known_ids]
            records = []
            for change in fresh:
                records.append(self._evidence(change, entries))
            history.append(self.where / history.CHANGES, records)
            code = exits.CHANGED if fresh else exits.OK
            history.append(self.where / history.RUNS, [{
                "watch": self.id, "date": self.date, "as_of": self.as_of,
                "started": releases.utc_text(dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat()),
                "seconds": round(time.time() - started, 1), "host": socket.gethostname(),
                "expanded": expanded, "cells": len(m.cells), "ran": len(new), "recorded": len(lines),
                "changes": [c.id for c in fresh], "exit": code}])
            written = page.write_site(Path(self.args.site), self.results, m.name, home_url=self.args.home_url or "")
            self._summary(expanded, new, lines, fresh, written)
            return code

    def _expansion(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for exp in (self.m.resolver.used.values() if self.m.resolver else []):
            out.setdefault(exp["package"], [])
            out[exp["package"]] = sorted({*out[exp["package"]], *exp.get("versions", [])}, key=release_key)
        return out

    def _evidence(self, change: Change, entries: list[dict]) -> dict:
        """The change's record: links (relative to the site) to the results that show it, and its
        bisect (a new break or mend) with the bundle of the first changed release's cell."""
        sources: dict[str, str] = {}
        package = change.where["package"]
        at_after = [e for e in entries if self._in_series(e, change) and _version_of(e, package) == change.after]
        bad = [e for e in at_after if e.get("status") != status.OK] or at_after
        for n, e in enumerate(bad[:3], 1):
            link = f"history/{publish.file_name(self.m.name)}/evidence/{change.id}/{n}.json"
            sources[link] = str(self.store.run_dir / e["result"])
        change.evidence = [f"history/{publish.file_name(self.m.name)}.html#change-{change.id}", *sources]
        if change.kind in BISECTED_KINDS and change.before and not self.args.no_bisect:
            bundle = self._bisect(change)
            if bundle:
                link = f"history/{publish.file_name(self.m.name)}/bundles/{bundle.name}"
                sources[link] = str(bundle.resolve())
                change.evidence.append(f"{link}/README.md")
        if change.where.get("bisected_to"):
            change.where["summary"] = ch.describe(change)
        if change.kind in DIVERGED_KINDS and change.before:
            self.why[change.id] = self._diverge_command(change)
        return {"change": ch.to_dict(change), "sources": sources, "watch": self.id}

    def _diverge_command(self, change: Change) -> str | None:
        """The `diverge` that says why a value moved between the two releases: a cell of the last
        release before the change against the same cell of the first one after it."""
        after = [c for c in self.m.cells if self._cell_in(c, change) and c.workload.model in MODELS]
        for cell in after:
            label = cell.id.split("/", 1)[1]
            before = [c for c in self.m.cells if self._cell_in(c, change, change.before) and
                      c.id.split("/", 1)[1] == label]
            if before:
                return f"python -m harness diverge {self.m.path} {before[0].id} {cell.id}"
        return None

    def _in_series(self, e: dict, change: Change) -> bool:
        cell = change.where["cell"]
        return any(key.package == change.where["package"] and (cell == key.label or cell.startswith(key.label + " ["))
                   for key, _version, _e in series.keyed([e]))

    def _bisect(self, change: Change) -> Path | None:
        """The existing bisect between the releases the watch saw on either side of the change (the
        last good and first bad of a break, the last bad and first good of a mend): every index
        release between them (the watch may have seen only some), as of the watch's date; the ends'
        outcomes say which way it searches."""
        cells = [c for c in self.m.cells if self._cell_in(c, change)]
        if not cells:
            return None
        env = cells[0].environment
        cells = [c for c in cells if c.environment == env]
        resolver = expand.WatchResolver(self.as_of, offline=self.args.offline)
        package = change.where["package"]
        pre = any(Version(v).is_prerelease for v in (change.before, change.after) if _is_version(v))
        try:
            versions = bisect_ends.bounds(package, env.python, good=change.before, bad=change.after, spec=None,
                                          pre=pre, resolver=resolver)
        except Exception as exc:  # noqa: BLE001 - a bisect that cannot start leaves the change unbisected
            self.console.print(f"[yellow]not bisected[/]: {shown(str(exc))}", highlight=False)
            return None
        nightly = None
        if self.m.watch_nightly:
            try:
                nightly = nightly_of(package, self.m.watch_nightly)
            except UserError as exc:  # a package without a nightly distribution: the release bisect only
                self.console.print(f"[yellow]no nightly search[/]: {shown(str(exc))}", highlight=False)
        found, bundle = bisect.run(m=self.m, base_cells=cells, package=package, versions=versions,
                                   engine=self.engine(), results_root=self.results, console=self.console,
                                   jobs=self.args.bisect_jobs, cutoff=env.uploaded_before is not None,
                                   bundles=Path(self.args.bundles), resolver=resolver, nightly=nightly,
                                   as_of=self.as_of)
        if not found.problem:
            change.where["bisected_to"] = found.after or " or ".join(found.candidates)
        return bundle

    def _cell_in(self, cell: Cell, change: Change, release: str | None = None) -> bool:
        """Whether `cell` is of `change`'s series at `release` (default: the first release after it)."""
        for package, _spec, version in cell.environment.ranges:
            if package != change.where["package"] or version != (release or change.after):
                continue
            parts = cell.id.split("/")
            label = f"{series.blank(cell.environment.name, version)}/{'/'.join(parts[1:-1])}"
            if change.where["cell"] == label or change.where["cell"].startswith(label + " ["):
                return True
        return False

    def _summary(self, expanded: dict, new: list[Cell], lines: list[dict], fresh: list[Change],
                 written: dict) -> None:
        c = self.console
        c.rule(f"watch {self.m.name}" + (f" as of {self.as_of[:10]}" if self.as_of else ""))
        for package, versions in expanded.items():
            shown_versions = versions if len(versions) <= 12 else [*versions[:3], "...", *versions[-8:]]
            c.print(f"{shown(package)}: {len(versions)} release(s) {shown(', '.join(shown_versions))}", highlight=False)
        c.print(f"cells: {len(self.m.cells)} in the matrix, {len(new)} run now, {len(lines)} new result(s) recorded "
                f"in {shown(self.where / history.HISTORY)}", highlight=False)
        if not fresh:
            c.print("[green]no new change[/]", highlight=False)
        for change in fresh[:15]:
            colour = "red" if change.kind in ("broke", "slower", "expectation", "accuracy") else "yellow"
            c.print(f"[{colour}]{change.kind}[/] {shown(change.where['summary'])}", highlight=False)
            if self.why.get(change.id):
                c.print(f"  why, layer by layer: {shown(self.why[change.id])}", highlight=False)
        if len(fresh) > 15:
            c.print(f"... and {len(fresh) - 15} more (the feeds list every one)")
        c.print(f"published: {shown(written['page'])}; feeds {shown(', '.join(str(p) for p in written['feeds']))}; "
                f"{written['badges']} badge(s)", highlight=False)
        c.print(f"exit {exits.CHANGED if fresh else exits.OK}: " + ("new changes" if fresh else "nothing new changed"))


def _is_version(text) -> bool:
    try:
        Version(str(text))
        return True
    except InvalidVersion:
        return False


def _version_of(e: dict, package: str) -> str | None:
    return next((v for p, _s, v in e.get("releases") or [] if p == package), None)
