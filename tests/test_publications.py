"""`harness audit`: every publication held to its record. The committed atlas and portability grid
are what their data renders, byte for byte, and the atlas passes its own audit (owing no cell its
matrices name); a sentence typed into a page, a page its record renders and nobody published, and
an atlas page that hides what its data says are each named with the file and the line."""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import ROOT, harness

pytestmark = pytest.mark.quick


def test_the_committed_publications_say_only_what_their_records_hold():
    """The repository's own: docs/atlas (with docs/atlas.md and the cells of matrices/atlas) and
    docs/portability -- rendered again from their data, in a copy, the same bytes; the atlas's own
    audit names nothing (its counts, devices, verdicts against their evidence, the facts, the
    side-by-side medians, cut-offs, few runs, cells owed). The committed files are not written."""
    before = {p: p.read_bytes() for p in (ROOT / "docs" / "atlas.md", ROOT / "docs" / "portability" / "portability.md")}
    proc = harness("audit", "--json")
    assert (proc.returncode, json.loads(proc.stdout or "null")) == (0, []), proc.stdout + proc.stderr
    assert all(p.read_bytes() == b for p, b in before.items())


def test_a_typed_sentence_a_missing_page_and_an_unknown_folder_are_each_named(tmp_path):
    atlas, grid = tmp_path / "atlas", tmp_path / "portability"
    shutil.copytree(ROOT / "docs" / "atlas", atlas)
    shutil.copy(ROOT / "docs" / "atlas.md", tmp_path / "atlas.md")
    shutil.copytree(ROOT / "docs" / "portability", grid)
    page = (tmp_path / "atlas.md").read_text().splitlines()
    typed = next(n for n, line in enumerate(page) if line.startswith("**"))   # the header's counts
    page[typed] = page[typed] + " Every row trains the same on two devices."
    (tmp_path / "atlas.md").write_text("\n".join(page) + "\n")
    gone = sorted((grid / "stacks").glob("*.md"))[0]
    gone.unlink()
    proc = harness("audit", str(atlas), str(grid), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = json.loads(proc.stdout)
    rendered = {f["where"]: f["what"] for f in found if f["check"] == "rendered"}
    assert rendered.get(f"{tmp_path / 'atlas.md'}:{typed + 1}", "").count("Every row trains the same") == 1, found
    assert "not published" in rendered.get(str(gone), ""), found
    assert len(rendered) == 2, found            # nothing else differs
    assert (ROOT / "docs" / "portability" / "stacks" / gone.name).is_file()
    proc = harness("audit", str(tmp_path))      # a folder that holds no record
    assert proc.returncode == 2 and str(tmp_path) in proc.stderr, proc.stdout + proc.stderr
    # in-process, the same findings as values, and the same error as a typed exception
    from harness import publications
    from harness.errors import UserError
    assert [(f.check, f.where) for f in publications.audit(atlas, grid)] == [(f["check"], f["where"]) for f in found]
    with pytest.raises(UserError, match=str(tmp_path)):
        publications.audit(grid, tmp_path)
