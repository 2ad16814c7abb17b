"""Everything the harness publishes, held to its record: `harness audit`.

Each product keeps a record and renders its files from it -- the atlas (``atlas.json``: its
page beside the folder, the rows' pages, the changes, the feed, the plots), the portability grid
(``portability.json``: its page, the stacks' and formats' pages, the changes, the feed), a
dependency-bump verdict (``verdict.json`` -> ``COMMENT.md``), an upgrade report (``upgrade.json``
-> ``UPGRADE.md``), a watch's site (its feeds name the matrices; their record, ``.watch/`` beside
the matrix's results, renders the history page, the feeds and the badges). A publication is known
by what it holds, so the audit takes any folder and needs no flag to say what it is.

Two checks hold for every kind, and a kind adds its own:

- **rendered**: every file the record renders is what is published, byte for byte -- rendered
  again from the record alone into a copy (the committed folder is never written), then compared
  file by file; a sentence typed into a page, or a page left from an earlier record, is named with
  its file and first differing line;
- the kind's **own audit**: the atlas's (`atlas.audit`: counts, devices, verdicts against their
  evidence, facts, side-by-side medians, cut-offs, few runs, cells owed).

One line per finding, each with its publication, file and place; exit 0 when there is none, 1 when
there is, 2 when a record cannot be read (`exits`)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.claims.findings import Finding  # one finding, whichever check names it: check, where, what
from harness.errors import UserError
from harness.files.markdown import unlike_lines
from harness.files.outputroots import MARKER


@dataclass(frozen=True)
class Publication:
    kind: str    # atlas | portability | verdict | upgrade | watch
    folder: Path
    watched: dict = field(default_factory=dict)   # a watch's site: matrix -> the home URL of its feeds


def known(folder: Path) -> Publication:
    """What `folder` publishes, by the record it holds."""
    for kind, record in (("atlas", "atlas.json"), ("portability", "portability.json"), ("verdict", "verdict.json"),
                         ("upgrade", "upgrade.json")):
        if (folder / record).is_file():
            return Publication(kind, folder)
    if watched := _watched(folder):
        return Publication("watch", folder, watched)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder")
    raise UserError(f"{folder}: holds no record the harness publishes from (atlas.json, portability.json, "
                    "verdict.json or upgrade.json) and no watch's feeds (feeds/*.json)")


def audit(*folders: str | Path | Publication, matrices: str | Path | None = None,
          results: str | Path | None = None) -> list[Finding]:
    """Every finding in the publications `folders`, in their order; [] when each says only what its
    record holds. Every folder is read before any is audited, so one that holds no record raises
    `UserError` (naming it) before any work. `matrices` (an atlas only): the matrices whose every
    cell its data must hold or its page name, their ranges as `results` recorded them (default
    `results/atlas`); a watch's site is rendered from the record in `results` (default `results`)."""
    pubs = [f if isinstance(f, Publication) else known(Path(f)) for f in folders]
    return [f for pub in pubs for f in audit_one(pub, matrices=Path(matrices) if matrices else None,
                                                 results=Path(results) if results else None)]


def audit_one(pub: Publication, *, matrices: Path | None = None, results: Path | None = None) -> list[Finding]:
    """Every finding in one publication (`audit`'s arguments)."""
    if pub.kind == "atlas":
        return _rendered(pub.folder, _render_atlas, page=True) + _atlas_own(pub.folder, matrices, results)
    if pub.kind == "portability":
        return _rendered(pub.folder, _render_portability, page=False)
    if pub.kind == "watch":
        return _rendered(pub.folder, lambda copy: _render_watch(copy, pub.watched, results), page=False)
    if pub.kind == "verdict":
        return _lines(pub.folder / "COMMENT.md", _verdict_made(pub.folder))
    return _lines(pub.folder / "UPGRADE.md", _upgrade_made(pub.folder))


def _render_atlas(folder: Path) -> None:
    # imported when this kind is audited: a verdict's audit loads no atlas, plots or portability code
    from harness.atlas import publish
    publish.republish(folder / publish.DATA, folder)


def _render_portability(folder: Path) -> None:
    # imported when this kind is audited: a verdict's audit loads no atlas, plots or portability code
    from harness.portability import publish
    publish.republish(folder)


def _watched(site: Path) -> dict[str, str]:
    """The matrices a watch published into `site` -- matrix -> the home URL its feeds were written
    with -- read from each JSON feed the watch wrote (its generator named in the description);
    {} where there is none. The record itself is the watch's, beside the matrix's results."""
    # imported when a folder is asked about: the feeds' format is the watch's to say
    from harness.watch import publish
    found = {}
    for feed_path in sorted((site / "feeds").glob("*.json")) if (site / "feeds").is_dir() else []:
        try:
            feed = json.loads(feed_path.read_text())
        except (OSError, ValueError):
            continue
        if not (isinstance(feed, dict) and publish.GENERATOR in str(feed.get("description", ""))
                and str(feed.get("title", "")).endswith(": changes")):
            continue
        matrix = feed["title"][:-len(": changes")]
        page = publish.HISTORY_PAGE.format(matrix=publish.file_name(matrix))
        home = str(feed.get("home_page_url", ""))
        found[matrix] = home[:-len(page)] if home.endswith(page) and not home.startswith("../") else ""
    return found


def _render_watch(site: Path, matrices: dict[str, str], results: Path | None) -> None:
    # imported when a watch's site is audited: nothing else needs the watch's pages
    from harness.watch import history, page
    results = results or Path("results")
    for matrix, home_url in matrices.items():
        if not history.folder(results, matrix).is_dir():
            raise UserError(f"{history.folder(results, matrix)}: no watch record of {matrix} here, which the site "
                            "publishes (name its results folder with --results)")
        page.write_site(site, results, matrix, home_url=home_url)


def _atlas_own(folder: Path, matrices: Path | None, results: Path | None) -> list[Finding]:
    # imported when this kind is audited: a verdict's audit loads no atlas, plots or portability code
    from harness.atlas import audit as atlas_audit
    from harness.atlas.facts import load_facts
    return atlas_audit.audit(folder / "atlas.json", folder.with_suffix(".md"), load_facts(), matrices,
                             results or Path("results/atlas"))


def _rendered(folder: Path, render: Callable[[Path], None], *, page: bool) -> list[Finding]:
    """The publication rendered again from its record, in a copy, against what is published: a file
    that differs is named at its first differing line; one the record renders and nobody published,
    too. `page`: the publication's page lies beside its folder (the folder's name + .md)."""
    beside = folder.with_suffix(".md")
    with tempfile.TemporaryDirectory(prefix="harness-audit-") as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy, symlinks=True)
        if page and beside.is_file():
            shutil.copy2(beside, copy.with_suffix(".md"))
        render(copy)
        pairs = [(folder / p.relative_to(copy), p) for p in sorted(copy.rglob("*"))
                 if p.is_file() and p.name != MARKER]
        if page:
            pairs.append((beside, copy.with_suffix(".md")))
        return [f for published, made in pairs for f in _compare(published, made)]


def _compare(published: Path, made: Path) -> list[Finding]:
    if not published.is_file():
        return [Finding("rendered", str(published), "its record renders this file, and it is not published")]
    a, b = published.read_bytes(), made.read_bytes()
    if a == b:
        return []
    try:
        unlike = unlike_lines(a.decode(), b.decode())
    except UnicodeDecodeError:
        return [Finding("rendered", str(published), "differs from what its record renders (not text)")]
    n, what = unlike[0] if unlike else (0, "differs from what its record renders (line endings)")
    return [Finding("rendered", f"{published}:{n}", what + (f" (and {len(unlike) - 1} more lines)"
                                                            if len(unlike) > 1 else ""))]


def _verdict_made(folder: Path) -> str:
    # imported when this kind is audited: a verdict's audit loads no atlas, plots or portability code
    from harness.verdict import writers
    try:
        return writers.markdown(writers.read(folder))
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _upgrade_made(folder: Path) -> str:
    # imported when this kind is audited: a verdict's audit loads no atlas, plots or portability code
    from harness.upgrade import writers
    path = folder / "upgrade.json"
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the upgrade report's record ({type(exc).__name__})") from None
    if not isinstance(report, dict):
        raise UserError(f"{path}: not a report (a JSON object)")
    try:
        return writers.markdown(report)
    except (KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{path}: not a report this harness wrote ({type(exc).__name__}: {exc})") from None


def _lines(page: Path, made: str) -> list[Finding]:
    """A Markdown page its record renders whole (a comment, a report), line by line."""
    if not page.is_file():
        return [Finding("rendered", str(page), "missing: its record renders it")]
    return [Finding("rendered", f"{page}:{n}", what) for n, what in unlike_lines(page.read_text(), made)]
