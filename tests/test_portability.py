"""`harness portability`: model files saved on one release, loaded on another.

The judge's rules on planted observations, the grid's matrix and bad input (quick tier); a real
grid over two stacks -- tf.keras 2.15 and Keras 3 on JAX -- written, read, judged, published and
resumed, then one of its files checked as a user's own (its custom layer from a file of theirs),
run as a user runs it."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import pytest
import yaml

from harness import SCHEMA
from harness.files import outputroots
from harness.investigate.bisect_search import BAD, GOOD, SKIP, Found, Verdict
from harness.portability import bounded, changes, evidence, explain, grid, judge, narrow, pages, publish
from harness.results.store import ResultStore, scan

from .conftest import ROOT, harness

QUICK = pytest.mark.quick


def _tried(*ways):
    return {"tried": list(ways)}


def _loads(writer_entry, reader_entry, own_diff=0.0):
    """Two stacks: A wrote a gru in h5; A reads its own file (own_diff), B reads it (reader_entry)."""
    own = _tried({"way": "load_model", "loaded": True, "max_abs_diff": own_diff})
    stack = {"keras": "2.15.0", "tensorflow": "2.15.0"}
    wrote = {"stack": stack, "models": {"gru": {"h5": own}}}
    return {"A": {"stack": stack, "writers": {"A": wrote}},
            "B": {"stack": {"keras": "3.15.1"}, "writers": {"A": {**wrote, "models": {"gru": {"h5": reader_entry}}}}}}


def _judged(reader_entry, own_diff=0.0):
    return {(r["writer"], r["reader"]): r for r in judge.records(_loads(None, reader_entry, own_diff))}[("A", "B")]


@QUICK
def test_each_file_is_judged_by_one_rule_against_the_floor_its_writers_own_stack_measured():
    same = _judged(_tried({"way": "load_model", "loaded": False, "error": "ValueError: x"},
                          {"way": "load_model compile=False", "loaded": True, "max_abs_diff": 3e-7}))
    assert same["verdict"] == judge.SAME and same["way"] == "load_model compile=False"   # the way that works, named
    assert same["floor"] == judge.FLOOR                                       # own stack exact: the least floor
    differs = _judged(_tried({"way": "load_model", "loaded": True, "max_abs_diff": 0.2},
                             {"way": "load_model compile=False", "loaded": True, "max_abs_diff": 0.1}))
    assert differs["verdict"] == judge.DIFFERS and differs["max_abs_diff"] == 0.1   # the best way's difference
    # the writer's own stack shows 1e-4 on reloading: the floor is ten times that, so 5e-4 is the same
    assert _judged(_tried({"way": "load_model", "loaded": True, "max_abs_diff": 5e-4}), own_diff=1e-4)["verdict"] \
        == judge.SAME
    shape = _judged(_tried({"way": "load_weights", "loaded": True, "shape": [16, 4]}))
    assert shape["verdict"] == judge.DIFFERS and shape["shape"] == [16, 4]
    refused = _judged(_tried({"way": "load_model", "loaded": False, "error": "TypeError: Could not locate"}))
    assert refused["verdict"] == judge.REFUSES and refused["errors"] == {"load_model": "TypeError: Could not locate"}
    unknown = _judged({"unknown": "Keras 2.2.4 knows no .keras archive"})
    assert unknown["verdict"] == judge.UNKNOWN and "2.2.4" in unknown["reason"]
    # a file its writer listed and no way found (ENOENT): nothing to judge, not the reader's refusal
    gone = _tried({"way": "load_weights", "loaded": False, "error": "FileNotFoundError: [Errno 2] Unable to "
                   "synchronously open file (unable to open file: name = 'x/model.weights.h5', errno = 2, error "
                   "message = 'No such file or directory')"})
    assert judge.unwritten(gone) and ("A", "B") not in {(r["writer"], r["reader"]) for r in judge.records(
        _loads(None, gone))}
    op = _tried({"way": "tf.saved_model.load", "loaded": False, "error": "FileNotFoundError: Op type not "
                 "registered 'DisableCopyOnRead'"})   # TensorFlow's NotFoundError: a refusal, the file was there
    assert not judge.unwritten(op) and _judged(op)["verdict"] == judge.REFUSES
    # a handed file is named from the reader's inputs/, never by the folder of the machine that read it
    handed = "/srv/r/A/load-A/r0.partial-h-9/inputs/A/m.keras"
    error = f"ValueError: File not found: filepath={handed}"
    named = _judged(_tried({"way": "load_model", "loaded": False, "error": error}))
    assert named["errors"] == {"load_model": "ValueError: File not found: filepath=inputs/A/m.keras"}


@QUICK
def test_the_page_and_the_csv_say_every_verdict(tmp_path):
    loads = _loads(None, _tried({"way": "load_model", "loaded": True, "max_abs_diff": 0.3}))
    records = judge.records(loads, {("A", "A"): "A/load-A/none-c1/b128/r0", ("B", "A"): "B/load-A/none-c1/b128/r0"})
    g = publish.Judged.of(records)
    text = publish.page(g, missing=["C/load/none-c1/b128/r0: error (planted)"])
    assert f"| [`h5`]({pages.format_link('h5')}) | 2 | 1 | 1 | 0 | 0 |" in text   # per format: each verdict's count
    table = pages.format_page("h5", g.names, g.records, g.stacks)
    assert '<div class="pg" data-format="h5">' in table and "<th" in table and ">A</th>" in table
    assert f'data-verdict="{judge.DIFFERS}"' in table and f">{publish.MARK[judge.DIFFERS]}</span>" in table
    assert "`A` -> `B`, gru, h5 by `load_model`: largest difference 0.3" in text   # the worst case, loudly
    assert "C/load/none-c1/b128/r0" in text                                       # a reader that left nothing
    rows = list(csv.DictReader(io.StringIO(publish.as_csv(records))))
    assert {(r["writer"], r["reader"], r["verdict"]) for r in rows} == {("A", "A", "same"), ("A", "B", "differs")}
    assert [r["cell"] for r in rows] == ["", ""]   # the pair's cell is the rule's: not repeated on every row
    records[0]["cell"] = "A/load-A/none-c1/b128/r1"   # one the rule does not give is kept
    assert list(csv.DictReader(io.StringIO(publish.as_csv(records))))[0]["cell"] == "A/load-A/none-c1/b128/r1"


@QUICK
def test_a_clone_with_no_results_republishes_the_committed_grid_byte_for_byte(tmp_path):
    """The door a fresh clone has: `portability publish` with no results folder makes every page,
    feed and data file again from the committed data, and changes none of them."""
    committed = ROOT / "docs" / "portability"
    out = tmp_path / "portability"
    shutil.copytree(committed, out)
    done = harness("portability", "publish", "--results", str(tmp_path / "no-results"), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "republishing the committed data" in done.stdout
    files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    written = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.name != outputroots.MARKER)
    assert written == files   # none added, none lost (the marker says the folder is the harness's output)
    assert [f for f in files if (out / f).read_bytes() != (committed / f).read_bytes()] == []


@QUICK
def test_the_grid_is_a_matrix_with_a_reader_cell_per_pair_so_a_new_stack_costs_a_row_and_a_column(tmp_path):
    stacks = Path("matrices/portability/stacks.yaml").resolve()
    m = grid.write(stacks, tmp_path / "grid.yaml")
    names = [e.name for e in m.environments]
    readers = [c for c in m.cells if grid.is_reader(c.workload.name)]
    assert len(readers) == len(names) ** 2 and len(names) >= 2
    pairs = set()
    for cell in readers:   # each reader cell is handed one writer's files, its own stack's too (the floor)
        [need] = cell.needs
        writer = need["cell"].split("/")[0]
        assert need["as"] == writer and cell.workload.name == grid.reader_workload(writer)
        pairs.add((cell.environment.name, writer))
    assert pairs == {(r, w) for r in names for w in names}
    # one stack more: every cell of the smaller grid is still a cell of the larger, by the same id
    raw = yaml.safe_load(stacks.read_text())
    raw["environments"].append({"python": "3.11", "keras": "3.14.0", "backend": "jax"})
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(raw))
    grown = grid.write(tmp_path / "more.yaml", tmp_path / "grown.yaml")
    assert {c.id for c in m.cells} < {c.id for c in grown.cells}
    assert len(grown.cells) - len(m.cells) == 2 * len(names) + 2   # its writer, its column, its row


@QUICK
def test_a_slice_of_the_grid_is_its_stacks_writers_and_the_pairs_between_them_and_the_page_says_what_is_missing(
        tmp_path):
    m = grid.write(Path("matrices/portability/stacks.yaml").resolve(), tmp_path / "grid.yaml")
    chosen = grid.among(m.cells, ["tf2.1*"])
    stacks = {c.environment.name for c in chosen}
    assert stacks == {"tf2.10.1", "tf2.13.1", "tf2.14.1", "tf2.15", "tf2.16.2-keras3.3.3", "tf2.18-keras3.6.0"}
    assert len(chosen) == len(stacks) + len(stacks) ** 2    # their writers, and every pair between them
    assert all(n["cell"].split("/")[0] in stacks for c in chosen for n in c.needs)
    # a new release's row and column: its writer, its reads of every writer, every stack's read of it
    names = [e.name for e in m.environments]
    crossing = grid.among(m.cells, ["tf2.15"], crossing=True)
    assert sorted((c.environment.name, [n["cell"].split("/")[0] for n in c.needs]) for c in crossing) == sorted(
        [("tf2.15", [])] + [("tf2.15", [w]) for w in names] + [(r, ["tf2.15"]) for r in names if r != "tf2.15"])
    assert len(crossing) == 2 * len(names)   # its writer, its N reads, the N - 1 other stacks' reads of it
    proc = harness("portability", "run", "--row-and-column", "--engine", "venv", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2 and "--stacks" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    # one pair read of four: the page says so, and marks the pairs not read yet
    loads = _loads(None, _tried({"way": "load_model", "loaded": True, "max_abs_diff": 0.0}))
    whole = publish.Judged.of(judge.records({"A": loads["A"]}))
    assert "pairs read so far" not in publish.page(whole, missing=[])   # the whole grid
    assert f">{publish.NOT_RUN}</td>" not in pages.format_page("h5", whole.names, whole.records, whole.stacks)
    loads["B"]["writers"]["B"] = loads["B"]["writers"]["A"]   # B read its own files; A has not read B's yet
    g = publish.Judged.of(judge.records(loads))
    assert "3 of 4 pairs read so far" in publish.page(g, missing=[])
    table = pages.format_page("h5", g.names, g.records, g.stacks)
    row = next(line for line in table.splitlines() if ">B</th><td" in line)   # B's files: A has not read them
    assert row.index(f">{publish.NOT_RUN}</td>") < row.index('data-verdict="same"'), row


def _three_lines():
    """Three stacks of three lines (tf.keras, Keras 3 on JAX, on TensorFlow), each reading the
    others' gru and lstm in two formats: the tf.keras files refuse on Keras 3, the rest load."""
    stacks = {"T": {"api": "tf.keras", "keras": "2.15.0", "tensorflow": "2.15.0"},
              "J": {"api": "keras3", "backend": "jax", "keras": "3.15.1"},
              "K": {"api": "keras3", "backend": "tensorflow", "keras": "3.15.1", "tensorflow": "2.21.0"}}
    same = _tried({"way": "load_model", "loaded": True, "max_abs_diff": 0.0})
    refused = _tried({"way": "load_model", "loaded": False, "error": "TypeError: planted"})
    loads = {}
    for reader in stacks:
        writers = {}
        for writer in stacks:
            entry = refused if stacks[writer]["api"] == "tf.keras" and reader != writer else same
            writers[writer] = {"stack": stacks[writer], "models": {m: {"h5": entry, "keras": same}
                                                                  for m in ("gru", "lstm")}}
        loads[reader] = {"stack": stacks[reader], "writers": writers}
    return loads


@QUICK
def test_the_grid_page_filters_by_the_address_in_a_browser(tmp_path):
    """The page's tables and their filter script, opened in headless Chromium at an address that
    names a format, a model, a verdict and a line of writers (as a shared link does): only that
    format's table, that line's rows and that model's refusals stay shown; no script error."""
    from .test_report import _browse
    g = publish.Judged.of(judge.records(_three_lines()))
    text = pages.format_page("h5", g.names, g.records, g.stacks)
    start, end = text.index('<style>'), text.index("</script>") + len("</script>")
    shown = tmp_path / "h5.html"
    shown.write_text('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>grid</title></head><body>\n'
                     '<script>history.replaceState(null, "", "#model=gru&verdict=refuses'
                     '&writer=tf.keras");</script>\n'
                     f"{text[start:end]}\n</body></html>\n")
    dom, errors = _browse(shown)
    assert errors == [], errors
    blocks = re.findall(r'<div class="pg" data-format="([^"]+)"( hidden="")?', dom)
    assert dict(blocks) == {"h5": ""}, blocks                              # the page's one format
    h5 = dom
    assert dict(re.findall(r'<tr data-line="([^"]+)"( hidden="")?><th[^>]*>T</th>', h5)) == {"tf.keras": ""}
    assert not re.search(r'<tr data-line="keras3-[a-z]+"><th', h5)         # the other lines' writers hidden
    visible = re.findall(r'<span class="v-(\w+)" data-model="(\w+)" data-verdict="\w+" title="[^"]*">', h5)
    assert visible and set(visible) == {("refuses", "gru")}, visible         # gru's refusals only
    for value in ("gru", "lstm", "refuses", "same", "tf.keras", "keras3-jax"):
        assert f'<option value="{value}">{value}</option>' in dom
    assert 'data-filter="format"' not in dom                               # a page of one format: no format box


def _refusing(stacks: dict, pair: tuple[str, str]) -> dict:
    """Every stack reads every stack's custom-layer .keras archive the same, but for one (writer,
    reader) pair, which refuses it (planted)."""
    same = _tried({"way": "load_model", "loaded": True, "max_abs_diff": 0.0})
    refused = _tried({"way": "load_model", "loaded": False, "error": "ValueError: planted"})
    return {rd: {"stack": stacks[rd], "writers": {
        w: {"stack": stacks[w], "models": {"custom": {"keras": refused if (w, rd) == pair else same}}}
        for w in stacks}} for rd in stacks}


def _plant(results: Path, loads: dict, status: str = "ok", writers: bool = True) -> None:
    """The grid's cells as they leave their results: each stack's writer (`writers`), and a reader
    cell per stack holding its observations of every writer (one cell here, as the grid's are)."""
    for rd, found in loads.items():
        cells = [("save", None)] if writers else []
        for workload, observed in cells + [(f"load-{rd}", found)]:
            folder = results / "grid" / rd / workload / "none-c1" / "b128" / "r0"
            (folder / "artifacts").mkdir(parents=True)
            if observed is not None:
                (folder / "artifacts" / publish.LOADS).write_text(json.dumps(observed))
            (folder / "result.json").write_text(json.dumps({
                "schema": SCHEMA, "cell": f"{rd}/{workload}/none-c1/b128/r0", "status": status, "environment": rd,
                "workload": workload}))


@QUICK
def test_a_change_is_two_neighbours_of_a_line_that_judge_the_same_file_otherwise_and_it_is_published(tmp_path):
    """tf.keras 2.13 and 2.14 (one line) and Keras 3 on JAX (another): 2.14 refuses 2.13's .keras
    archive, as keras-team/keras#18830 reports (planted here). One reader change along tf.keras,
    listed on the page, in changes.json, in the feed and on 2.14's own page; none across lines."""
    stacks = {"tf2.13": {"api": "tf.keras", "keras": "2.13.1", "tensorflow": "2.13.1"},
              "tf2.14": {"api": "tf.keras", "keras": "2.14.0", "tensorflow": "2.14.1"},
              "k3": {"api": "keras3", "backend": "jax", "keras": "3.15.1"}}
    loads = _refusing(stacks, ("tf2.13", "tf2.14"))
    records = judge.records(loads)
    names = ["tf2.13", "tf2.14", "k3"]
    [change] = changes.find(records, names, {n: stacks[n] for n in names})
    assert (change.kind, change.where["line"], change.before, change.after) == \
        (changes.READER, "tf.keras", "tf2.13", "tf2.14")
    assert (change.where["was"], change.where["now"], change.evidence) == \
        (judge.SAME, judge.REFUSES, [("tf2.13", "custom", "keras")])
    # published: the page, the data, the feed, the release's own page
    results = tmp_path / "r"
    _plant(results, loads)
    out = tmp_path / "out"
    data = publish.publish(results, out)
    assert len(data["records"]) == 9
    # the data file keeps each error once, by its place; a reader of it gets every record whole
    written = json.loads((out / "portability.json").read_text())
    assert written["texts"] == ["ValueError: planted"] and written["schema"] == publish.SCHEMA
    full = {(r["writer"], r["reader"]): r for r in publish.expanded(written)}
    assert full[("tf2.13", "tf2.14")]["errors"] == {"load_model": "ValueError: planted"}
    assert full[("tf2.13", "tf2.14")]["cell"] == "tf2.14/load-tf2.14/none-c1/b128/r0"   # as the cell was named
    own = next(dict(zip(written["columns"], r, strict=False)) for r in written["records"] if r[:2] == ["k3", "k3"])
    assert own.get("cell") is None and full[("k3", "k3")]["cell"] == "k3/load-k3/none-c1/b128/r0"   # by the rule
    text = (out / "portability.md").read_text()
    assert "reading on `tf2.14` (after `tf2.13`): same -> refuses, for files of `tf2.13` (custom keras)" in text
    said = json.loads((out / publish.CHANGES).read_text())
    assert [c["id"] for c in said["records"]] == [change.id]
    feed = (out / publish.FEED).read_text()
    assert f"change:{escape(change.id)}" in feed and feed.count("<entry>") == 3 + 1   # a stack each, the change
    own = (out / pages.link("tf2.14")).read_text()
    assert "refuses" in own and "(after `tf2.13`)" in own and "| [`tf2.13`](" in own


def _layers(*configs):
    return {"layers": [{"index": i, "name": f"l{i}", "class": cls, "config": config}
                       for i, (cls, config) in enumerate(configs)]}


@QUICK
def test_explain_names_the_first_layer_past_the_floor_and_the_setting_whose_writers_value_mends_it():
    """Two probes of one LSTM's weights (planted): the writer's and the reader's layer outputs, the
    reader's own defaults in its configuration, and its settings put back one at a time."""
    writer = _layers(("LSTM", {"units": 8, "recurrent_activation": "hard_sigmoid", "kernel_initializer": "a"}),
                     ("Dense", {"units": 3}))
    reader = _layers(("LSTM", {"units": 8, "recurrent_activation": "sigmoid", "kernel_initializer": "b"}),
                     ("Dense", {"units": 3}))
    reader["settings_back"] = [{"settings": [{"layer": 0, "key": "recurrent_activation", "value": "hard_sigmoid"}],
                                "max_abs_diff": 0.0}]
    ones = np.ones((4, 8), "float32")
    w_out, r_out = {"arr_0": ones, "arr_1": ones[:, :3]}, {"arr_0": ones + 0.03, "arr_1": ones[:, :3] + 0.02}
    found = explain.compare(writer, reader, w_out, r_out, floor=1e-5)
    assert found["first"]["index"] == 0 and found["first"]["class"] == "LSTM"
    assert found["first"]["max_abs_diff"] == pytest.approx(0.03, abs=1e-6)
    assert found["first"]["config"]["recurrent_activation"] == ["hard_sigmoid", "sigmoid"]
    assert [t["mends"] for t in found["settings_back"]] == [True]
    said = explain.sentence(found)
    assert "layer 0 `l0` (LSTM)" in said and "`recurrent_activation='hard_sigmoid'`" in said
    assert "`recurrent_activation='sigmoid'`" in said and "predicts as the writer did" in said
    # a setting that brings it closer but not within the floor: said with its number, never as mended
    reader["settings_back"][0]["max_abs_diff"] = 0.012
    found = explain.compare(writer, reader, w_out, r_out, floor=1e-5)
    assert not found["settings_back"][0]["mends"] and "no setting of the writer's, put back, mends it" in \
        explain.sentence(found) and "0.012" in explain.sentence(found)
    # every layer within the floor: no first layer
    assert explain.compare(writer, reader, w_out, w_out, floor=1e-5)["first"] is None


@QUICK
def test_the_page_lists_each_group_of_differing_files_with_its_evidence_or_says_it_is_not_followed(tmp_path):
    loads = _loads(None, _tried({"way": "load_weights", "loaded": True, "max_abs_diff": 0.04}))
    for side in ("A", "B"):
        loads[side]["stack"] = {**loads[side]["stack"], "api": "tf.keras"}
    loads["B"]["writers"]["A"]["models"]["gru"]["weights-h5"] = loads["B"]["writers"]["A"]["models"]["gru"].pop("h5")
    loads["A"]["writers"]["A"]["models"]["gru"]["weights-h5"] = loads["A"]["writers"]["A"]["models"]["gru"].pop("h5")
    g = publish.Judged.of(judge.records(loads))
    [(group, members)] = evidence.groups(g.records, g.stacks, g.names).items()
    assert group.id == "gru-weights-h5-load-weights-tf.keras-to-tf.keras" and len(members) == 1
    text = publish.page(g, [], explained=publish.differing(g, {}))
    assert "(1 pairs): not followed yet" in text
    path = evidence.path_for(tmp_path, group)
    path.parent.mkdir()
    path.write_text(json.dumps({"group": group.as_dict(), "pair": {"writer": "A", "reader": "B"},
                                "sentence": "parts at layer 0 (planted)"}))
    said = publish.differing(g, evidence.load(tmp_path))
    assert said[0]["evidence"] == f"evidence/{group.id}.json" and said[0]["probed"] == ["A", "B"]
    assert f"parts at layer 0 (planted) (probed `A` -> `B`; [evidence](evidence/{group.id}.json))" in \
        publish.page(g, [], explained=said)


@QUICK
def test_a_readers_change_is_bisected_on_its_newer_readers_cell_judged_by_the_grids_rule_and_kept_out_of_the_grid(
        tmp_path):
    """tf.keras 2.14 refuses 2.13's .keras archive (planted, as keras-team/keras#18830 reports): the
    bisect runs 2.14.1's reader of 2.13.1's files with each TensorFlow between, and judges each release
    by the file's verdict; a release's reader it ran is not a stack of the grid."""
    stacks = {"tf2.13.1": {"api": "tf.keras", "keras": "2.13.1", "tensorflow": "2.13.1"},
              "tf2.14.1": {"api": "tf.keras", "keras": "2.14.0", "tensorflow": "2.14.1"}}
    broke = ("tf2.13.1", "tf2.14.1")
    loads = _refusing(stacks, broke)
    g = publish.Judged.of(judge.records(loads))
    [change] = g.changes
    m = grid.write(Path("matrices/portability/stacks.yaml").resolve(), tmp_path / "grid.yaml")
    p = narrow.plan(change, g.stacks, g.records, m.cells)
    assert (p["package"], p["old"], p["new"]) == ("tensorflow", "2.13.1", "2.14.1")
    assert p["also"] == [("keras", "2.13.1", "2.14.0")]   # searched when TensorFlow's ends agree
    assert p["cell"].id == "tf2.14.1/load-tf2.13.1/none-c1/b128/r0" and (p["model"], p["format"]) == ("custom", "keras")
    # what follows TensorFlow's search: Keras's with TensorFlow at its old end, when TensorFlow's ends
    # agree (across two Pythons, beside the newer stack); TensorFlow's again with Keras at its old end,
    # when its old end does not install beside the newer Keras; nothing after a search that held one
    q = {**p, "pinned": {}}
    agree = Found(versions=["2.13.1", "2.14.1"], steps=[], problem="the ends do not differ: (planted)",
                  tested={v: Verdict(BAD, "refuses") for v in ("2.13.1", "2.14.1")})
    assert narrow.then(agree, q, p, crossed=False) == [("keras", "2.13.1", "2.14.0", {"tensorflow": "2.13.1"})]
    assert narrow.then(agree, q, p, crossed=True) == [("keras", "2.13.1", "2.14.0", {})]
    unjudged = Found(versions=["2.13.1", "2.14.1"], steps=[], problem="the old end 2.13.1 cannot be judged here",
                     tested={"2.13.1": Verdict(SKIP, "unavailable: it requires keras<2.14"),
                             "2.14.1": Verdict(BAD, "refuses")})
    assert narrow.then(unjudged, q, p, crossed=False) == [("tensorflow", "2.13.1", "2.14.1", {"keras": "2.13.1"})]
    assert narrow.then(agree, {**q, "pinned": {"tensorflow": "2.13.1"}}, p, crossed=False) == []
    held = narrow.derived_cell(p["cell"], "tensorflow", "2.13.1", None, 0).environment
    assert (held.tensorflow, held.python) == ("2.13.1", p["cell"].environment.python)
    ev = {"change": changes.as_dict(change), "package": "keras", "first_bad": "2.14.0", "last_good": "2.13.1",
          "file": narrow._file(p), "pinned": {"tensorflow": "2.13.1"}}
    assert narrow.sentence(ev).endswith("with tensorflow 2.13.1 held, the older stack's"), narrow.sentence(ev)
    # a release judged by the grid's rule: the older end's verdict is good, the newer's bad, a reader
    # that did not run is skipped
    results = tmp_path / "r"
    _plant(results, {"tf2.14": {"stack": {**stacks["tf2.14.1"], "tensorflow": "2.14.0"},
                                "writers": {"tf2.13.1": loads["tf2.14.1"]["writers"]["tf2.13.1"]}},
                     "tf2.13.1": loads["tf2.13.1"]}, writers=False)
    verdict = narrow.verdicts(results / "grid", {**p, "writer": "tf2.13.1"})
    by = {r.cell.split("/")[0]: r for _, r in scan(results)}
    judged = verdict("2.14.0", [by["tf2.14"]])
    assert judged.kind == BAD and "ValueError: planted" in judged.why
    assert verdict("2.13.1", [by["tf2.13.1"]]).kind == GOOD
    _plant(tmp_path / "failed", {"tf2.14": loads["tf2.14.1"]}, status="unavailable", writers=False)
    [(_, failed)] = scan(tmp_path / "failed")
    assert verdict("2.14.0", [failed]).kind == SKIP
    # in the grid's results, a reader of a stack that does not write (a bisect's release) is not in the grid
    _plant(tmp_path / "grid", loads)
    _plant(tmp_path / "grid", {"tf2.14": loads["tf2.14.1"]}, writers=False)
    assert set(publish.gather(tmp_path / "grid").loads) == set(stacks)
    assert "tf2.14" in publish.gather(tmp_path / "grid", grid=False).loads   # a check's readers all count


@QUICK
def test_a_writers_change_is_bisected_on_its_newer_writers_cell_each_releases_files_read_by_its_reader(tmp_path):
    """tf.keras 2.15 refuses 2.14.1's .keras archive and loads 2.13.1's (planted): the bisect runs
    2.14.1's writer with each TensorFlow between, and 2.15's reader cell, handed each release's
    files as the grid hands a writer's, judges them by the grid's rule."""
    stacks = {"tf2.13.1": {"api": "tf.keras", "keras": "2.13.1", "tensorflow": "2.13.1"},
              "tf2.14.1": {"api": "tf.keras", "keras": "2.14.0", "tensorflow": "2.14.1"},
              "tf2.15": {"api": "tf.keras", "keras": "2.15.0", "tensorflow": "2.15.0"}}
    loads = _refusing(stacks, ("tf2.14.1", "tf2.15"))
    g = publish.Judged.of(judge.records(loads))
    [change] = [c for c in g.changes if c.kind == changes.WRITER]
    assert (change.before, change.after, change.evidence) == ("tf2.13.1", "tf2.14.1", [("tf2.15", "custom", "keras")])
    results = tmp_path / "r"
    m = grid.write(Path("matrices/portability/stacks.yaml").resolve(), results / "grid.yaml")
    p = narrow.plan(change, g.stacks, g.records, m.cells)
    assert (p["package"], p["old"], p["new"]) == ("tensorflow", "2.13.1", "2.14.1")
    assert p["cell"].id == "tf2.14.1/save/none-c1/b128/r0"              # the cell each release runs
    assert p["reader"].id == "tf2.15/load-tf2.14.1/none-c1/b128/r0"     # the reader of each release's files
    assert narrow.writers_folder(results) == tmp_path / "r-writers"   # beside the grid, not among its stacks
    # a release's reader: the grid's cell for that pair, as a grid of the release would name and link it
    spec = {"cell": "tf2.14/save/none-c1/b128/r0", "environment": {"tensorflow": "2.14.0"}, "expect": None}
    cell = narrow.reader_of(p["reader"], "tf2.14/save/none-c1/b128/r0", spec)
    assert cell.id == "tf2.15/load-tf2.14/none-c1/b128/r0" and cell.environment == p["reader"].environment
    [need] = cell.needs
    assert (need["cell"], need["as"]) == ("tf2.14/save/none-c1/b128/r0", "tf2.14")
    assert need["spec_sha256"] == narrow.chains.spec_sha256_of({**spec, "expect": {"status": "ok"}})
    # judged: each release's files as the reader judges them; a writer that wrote nothing is skipped
    folder = tmp_path / "w"
    _plant(folder, {"tf2.14": {"stack": {}, "writers": {}}}, writers=True)
    read = {"stack": stacks["tf2.15"], "writers": {"tf2.14": loads["tf2.15"]["writers"]["tf2.14.1"]}}
    _plant(folder, {"tf2.15": read}, writers=False)
    by = {r.cell: r for _, r in scan(folder)}
    writer, reader = by["tf2.14/save/none-c1/b128/r0"], by["tf2.15/load-tf2.15/none-c1/b128/r0"]
    asked = []
    verdict = narrow.verdicts(folder / "grid", p, lambda w: asked.append(w) or reader)
    judged = verdict("2.14.0", [writer])
    assert judged.kind == BAD and "ValueError: planted" in judged.why and asked == [writer.cell]
    assert narrow.verdicts(folder / "grid", p, lambda w: None)("2.14.0", [writer]).kind == SKIP
    _plant(tmp_path / "failed", {"tf2.14": None}, status="error")
    failed = next(r for _, r in scan(tmp_path / "failed") if r.cell.split("/")[1] == "save")
    assert verdict("2.14.0", [failed]).kind == SKIP
    # two stacks on two Pythons (TF 2.11 has no wheel for 2.12's Python 3.11): the releases after the
    # old end are searched on the newer Python; when all of them judge as the newer stack, it is the first
    crossed = {**p, "pythons": ("3.10", "3.11"), "old": "2.11.1", "new": "2.12.1"}
    ends = Found(versions=["2.12.0", "2.12.1"], steps=[], problem="the ends do not differ: (planted)",
                        tested={v: Verdict(BAD, "refuses") for v in ("2.12.0", "2.12.1")})
    ev = narrow.across(ends, crossed, ends.versions, "cmd")
    assert (ev["first_bad"], ev["last_good"], ev["problem"]) == ("2.12.0", "2.11.1", None) and ev["across_python"]
    assert narrow.sentence(ev).startswith("first at tensorflow 2.12.0, as before at 2.11.1"), narrow.sentence(ev)
    ends.tested["2.12.0"] = Verdict(SKIP, "did not install")
    assert narrow.across(ends, crossed, ends.versions, "cmd")["problem"].startswith("the ends do not differ")
    assert narrow.across(None, crossed, ["2.12.1"], "cmd")["first_bad"] == "2.12.1"   # nothing between the two
    # a change id that is no change: said, exit 2
    _plant(results, loads)
    proc = harness("portability", "bisect", "--results", str(results), "--out", str(tmp_path / "out"),
                   "--engine", "venv", "--change", "writer:tf2.13.1->tf2.15:same->refuses")
    assert proc.returncode == 2 and "--change" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@QUICK
@pytest.mark.parametrize("text, key", [
    ("environments: []\n", "environments"),
    ("environments: [{python: '3.11', keras: '3.15.1', backend: jax}]\nworkloads: []\n", "workloads"),
    ("environments: [{python: '3.11', keras: '3.15.1', backend: jaks}]\n", "backend"),
])
def test_a_bad_stacks_file_is_exit_2_naming_the_file_and_the_key(tmp_path, text, key):
    (tmp_path / "stacks.yaml").write_text(text)
    proc = harness("portability", "run", str(tmp_path / "stacks.yaml"), "--engine", "venv",
                   "--results", str(tmp_path / "r"), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "stacks.yaml" in proc.stderr or "grid.yaml" in proc.stderr, proc.stderr
    assert key in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@QUICK
def test_a_disk_bound_run_writes_on_every_stack_before_any_stack_reads_and_skips_what_it_owes_nothing(tmp_path):
    m = grid.write(Path("matrices/portability/stacks.yaml").resolve(), tmp_path / "grid.yaml")
    chosen = grid.among(m.cells, ["tf2.1*"])
    store = ResultStore(tmp_path / "r", m.name)
    plan = bounded.passes(m, chosen, store)
    names = [e.name for e in m.environments if any(c.environment.name == e.name for c in chosen)]
    assert [(p, stack) for p, stack, _ in plan] == [("writes", n) for n in names] + [("reads", n) for n in names]
    for p, stack, owed in plan:   # a stack's pass is its own cells: its writer, or its reader of each writer
        assert {c.environment.name for c in owed} == {stack}
        assert len(owed) == (1 if p == "writes" else len(names))
    assert sorted(c.id for _, _, owed in plan for c in owed) == sorted(c.id for c in chosen)
    # a writer that wrote nothing (its stack does not install): once it has failed again in this run's
    # writes, its readers, unavailable for it before, are not owed -- no stack is built to say so again
    writer = next(c for c in chosen if c.workload.name == grid.WRITER)
    readers = [c for c in chosen if c.needs and c.needs[0]["cell"] == writer.id]
    for cell in [writer, *readers]:
        folder = store.final_dir(cell)
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({
            "schema": SCHEMA, "cell": cell.id, "status": "unavailable", "environment": cell.environment.name,
            "workload": cell.workload.name}))
    before = {c.id for _, _, owed in bounded.passes(m, chosen, store) for c in owed}
    assert {writer.id, *(c.id for c in readers)} <= before    # the writer tries again, and so may they
    after = {c.id for _, _, owed in bounded.passes(m, chosen, store, writing=set()) for c in owed}
    assert not after & {c.id for c in readers} and len(after) == len(chosen) - len(readers)


CUSTOM_LAYER = '''"""The user's own layer, as their training code defines it."""
import keras


class Scale(keras.layers.Layer):
    def __init__(self, offset=0.5, **kwargs):
        super().__init__(**kwargs)
        self.offset = offset

    def build(self, input_shape):
        self.factor = self.add_weight(name="factor", shape=(int(input_shape[-1]),), initializer="ones")
        super().build(input_shape)

    def call(self, inputs):
        return inputs * self.factor + self.offset

    def get_config(self):
        return {**super().get_config(), "offset": self.offset}
'''

THREE = """\
environments:
  - {python: "3.6", tensorflow: "1.12.0", keras: "2.2.4", packages: ["numpy<1.17", "h5py<3"]}
  - {python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}
  - {python: "3.11", keras: "3.15.1", backend: jax}
"""
TWO = "environments:\n" + "\n".join(THREE.splitlines()[2:]) + "\n"   # the user's file is checked on these
ONE = "environments:\n" + THREE.splitlines()[-1] + "\n"   # Keras 3 on JAX alone


@QUICK
def test_an_evidence_files_command_names_folders_below_where_it_ran_relative_to_it(tmp_path, monkeypatch):
    """Evidence is published: a folder below the command's own place is named from there (another
    checkout can run it), one elsewhere as given, each quoted for a shell."""
    monkeypatch.chdir(tmp_path)
    assert evidence.as_run(tmp_path / "results" / "portability-atlas") == "results/portability-atlas"
    assert evidence.as_run("docs/portability/atlas") == "docs/portability/atlas"
    assert evidence.as_run("/elsewhere/my results") == "'/elsewhere/my results'"


@QUICK
def test_check_refuses_what_is_no_model_file_in_one_line(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "layers.txt").write_text("")
    for args in (["nowhere.h5"], [str(tmp_path / "folder")],
                 [str(tmp_path / "layers.txt"), "--custom", str(tmp_path / "layers.txt")]):
        proc = harness("portability", "check", *args, "--results", str(tmp_path / "r"), timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr


@pytest.mark.tf
@pytest.mark.slow
def test_three_stacks_write_read_judge_explain_every_file_resume_and_check_a_users_own_file(tmp_path):
    (tmp_path / "stacks.yaml").write_text(THREE)
    run = ("portability", "run", str(tmp_path / "stacks.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"))
    proc = harness(*run, "--stacks", "tf*", timeout=1800)   # a slice first: the TF stacks' writers and pairs
    assert proc.returncode == 0 and "2 stacks of 3: 2 writers" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the whole grid: the slice's six cells are kept, the other six run (a run that removes its stacks'
    # environments, --disk-bound, is not run here: the suite's other tests share those environments)
    proc = harness(*run, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "6 of 12 cells already have results" in proc.stdout, proc.stdout[-3000:]
    tf1, tf, k3 = "tf1.12-keras2.2.4", "tf2.15", "keras3.15.1-jax"
    # where the files that load but predict differently part from their writer: TF 1.12's standalone
    # Keras 2.2.4 LSTM weights, built on TF 2.15 with its own defaults, part at the LSTM, and the
    # writer's recurrent_activation put back mends them
    proc = harness("portability", "explain", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out"),
                   "--group", "lstm-weights-h5-load-weights-standalone-to-tf.keras", "--engine", "venv", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = json.loads((tmp_path / "out" / "evidence" / "lstm-weights-h5-load-weights-standalone-to-tf.keras.json")
                      .read_text())
    assert said["pair"]["writer"] == tf1 and said["pair"]["reader"] == tf, said["pair"]
    assert said["first"]["class"] == "LSTM" and said["first"]["max_abs_diff"] > said["floor"], said
    mended = [t["settings"] for t in said["settings_back"] if t["mends"]]
    assert [{"layer": 0, "key": "recurrent_activation", "value": "hard_sigmoid"}] in mended, said["settings_back"]
    assert said["activations_otherwise"] == {}, said   # tf.keras 2.15 computes every one as Keras 2.2.4 does
    # on Keras 3 the name is not enough: its hard_sigmoid is another function, and Keras 2's own mends it
    group = "lstm-weights-h5-load-weights-standalone-to-keras3-jax"
    proc = harness("portability", "explain", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out"),
                   "--group", group, "--engine", "venv", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = json.loads((tmp_path / "out" / "evidence" / f"{group}.json").read_text())
    assert said["pair"]["reader"] == k3 and said["activations_otherwise"]["hard_sigmoid"] > said["floor"], said
    by_name = [(t["settings"][0].get("definition"), t["mends"]) for t in said["settings_back"]
               if [s["key"] for s in t["settings"]] == ["recurrent_activation"]]
    assert (None, False) in by_name and any(d and m for d, m in by_name), said["settings_back"]
    proc = harness("portability", "publish", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "out" / "portability.json").read_text())
    records = publish.expanded(data)
    by = {(r["writer"], r["reader"], r["model"], r["format"]): r for r in records}
    assert data["schema"] == publish.SCHEMA and not data["missing"]
    assert any(d.get("evidence") == "evidence/lstm-weights-h5-load-weights-standalone-to-tf.keras.json"
               for d in data["differing"]), data["differing"]
    assert {data["stacks"][r["writer"]]["keras"] for r in records} == {"2.2.4", "2.15.0", "3.15.1"}   # what ran
    warmth = [json.loads(p.read_text())["warmth"] for p in (tmp_path / "r").rglob("result.json")]
    notes = " ".join(n for w in warmth for n in w["notes"])
    assert any(w["launch"] == "warm" for w in warmth), warmth   # the harness's own script forks from a launcher
    assert "own interpreter" not in notes, notes                 # never held fresh as a user's script is
    for (w, rd, _, fmt), r in by.items():
        assert r["verdict"] in judge.VERDICTS and r["cell"] == f"{rd}/{grid.reader_workload(w)}/none-c1/b128/r0"
        if w == rd and fmt in ("h5", "keras", "weights-h5"):   # a stack loads its own files the same
            assert r["verdict"] == judge.SAME, r
    # a SavedModel and a TF checkpoint need TensorFlow: Keras 3 on JAX cannot know them, and says so untried
    for fmt in ("savedmodel", "tf-checkpoint"):
        assert by[(tf, k3, "gru", fmt)]["verdict"] == judge.UNKNOWN and by[(tf, k3, "gru", fmt)]["reason"]
    # what a user asks first: the tf.keras 2.15 HDF5 file on Keras 3 -- answered per model, with the way
    assert all(by[(tf, k3, m, "h5")]["verdict"] in judge.VERDICTS for m in ("gru", "lstm", "convnet", "custom"))
    page = (tmp_path / "out" / "portability.md").read_text()
    table = (tmp_path / "out" / pages.format_link("h5")).read_text()   # a format's table, on its own page
    assert 'data-format="h5"' in table and f">{tf}</th>" in table and f">{k3}</th>" in table
    assert "One stack more on this grid of 3: its writer and 7 reader cells" in page   # its cost, from its cells
    assert "[evidence](evidence/lstm-weights-h5-load-weights-standalone-to-tf.keras.json)" in page
    again = harness(*run, timeout=600)   # resumable: 3 writers and 9 pairs have their results, nothing runs again
    assert again.returncode == 0 and "12 of 12 cells already have results" in again.stdout, again.stdout[-2000:]
    # a user's own file: the tf.keras 2.15 model with a custom layer, its layer's code in a file of the
    # user's; loaded on two stacks, compared against the stack that wrote it
    (tmp_path / "two.yaml").write_text(TWO)
    [written] = (tmp_path / "r").glob(f"*/{tf}/save/*/*/*/artifacts/custom/model.h5")
    (tmp_path / "layers.py").write_text(CUSTOM_LAYER)
    [inputs] = (tmp_path / "r").glob(f"*/{tf}/save/*/*/*/artifacts/custom.inputs.npy")   # the user's own inputs
    proc = harness("portability", "check", str(written), str(tmp_path / "two.yaml"), "--writer", tf,
                   "--custom", str(tmp_path / "layers.py"), "--inputs", str(inputs), "--engine", "venv",
                   "--results", str(tmp_path / "c"), "--out", str(tmp_path / "b"), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = json.loads((tmp_path / "b" / "check.json").read_text())
    assert said["reference"] == tf and said["readers"][tf]["verdict"] == judge.SAME
    assert said["readers"][tf]["max_abs_diff"] == 0.0 and said["readers"][tf]["format"] == "h5"
    other = said["readers"][k3]
    assert other["verdict"] in (judge.SAME, judge.DIFFERS, judge.REFUSES), other
    if other["verdict"] != judge.SAME:   # a refusal or a difference leaves a bundle for a report upstream
        assert (Path(other["bundle"]) / "run.sh").is_file(), other
    assert f"{k3}:" in proc.stdout and f"{tf}: loads and predicts the same" in proc.stdout, proc.stdout[-2000:]
    # a SavedModel folder and no inputs: they are drawn from its serving signature's input, and the
    # stack that wrote it loads it and predicts the same; Keras 3 on JAX cannot know the format. As the
    # how-to writes it, without --engine: virtualenvs, which see the file where it lies, even where a
    # Docker daemon answers
    [folder] = (tmp_path / "r").glob(f"*/{tf}/save/*/*/*/artifacts/gru/savedmodel")
    proc = harness("portability", "check", str(folder), str(tmp_path / "two.yaml"), "--writer", tf,
                   "--results", str(tmp_path / "c2"), "--out", str(tmp_path / "b2"), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {r.engine for _, r in scan(tmp_path / "c2")} == {"venv"}
    said = json.loads((tmp_path / "b2" / "check.json").read_text())
    assert said["readers"][tf]["verdict"] == judge.SAME and said["readers"][tf]["format"] == "savedmodel", said
    assert said["readers"][k3]["verdict"] == judge.UNKNOWN, said
    # on a stack that cannot read it the same, the answer is no: exit 1, a script can branch on it
    (tmp_path / "one.yaml").write_text(ONE)
    proc = harness("portability", "check", str(folder), str(tmp_path / "one.yaml"), "--results", str(tmp_path / "c3"),
                   "--out", str(tmp_path / "b3"), timeout=1800)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "b3" / "check.json").read_text())["readers"][k3]["verdict"] == judge.UNKNOWN
