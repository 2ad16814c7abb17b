"""`atlas audit`: the published atlas held against itself and against the facts file. A clean atlas
passes; each class of contradiction, planted in it, is found and named with its place; the
committed atlas (published before the audit existed) shows what the audit is for."""

from __future__ import annotations

import json

import pytest

from harness.atlas import records

from .conftest import ROOT, harness

pytestmark = pytest.mark.quick


def _record(matrix: str, env: str, cell: str, **pins) -> dict:
    out = {k: "" for k in records.FIELDS}
    model, wrapper, devices = pins.pop("model", "gru"), pins.pop("wrapper", "none"), pins.pop("devices", 1)
    out.update(schema=records.SCHEMA, matrix=matrix, environment=env, workload=f"{model}-2x32", model=model,
               wrapper=wrapper, devices=devices, repeat=0, status="ok", devices_trained=devices, python="3.8.18",
               keras_api="tf.keras", backend="tensorflow", numpy="1.19.5", val_accuracy=0.8, samples_per_sec=100.0,
               cell=f"{env}/{cell}/b128/r0")
    out.update(pins)
    return out


def _atlas(folder, recs, changes, evidence=None, header=None):
    """Write an atlas as `publish` lays it out: folder/atlas.json, changes.json, evidence/, and the page
    beside the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    stacks = {(r["matrix"], r["environment"]) for r in recs}
    statuses: dict[str, int] = {}
    for r in recs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    about = {"cells": len(recs), "statuses": statuses, "rows": len(stacks), "changes": len(changes)}
    (folder / "atlas.json").write_text(json.dumps({"schema": records.SCHEMA, "fields": list(records.FIELDS),
                                                   "about": about, "records": recs}))
    (folder / "changes.json").write_text(json.dumps(changes))
    (folder / "evidence").mkdir(exist_ok=True)
    for cid, data in (evidence or {}).items():
        (folder / "evidence" / f"{cid}.json").write_text(json.dumps(data))
    said = ", ".join(f"{n} {s}" for s, n in statuses.items())
    cells = {r["cell"].rsplit("/r", 1)[0] for r in recs}
    between = sum(1 for c in changes if c.get("before"))
    page = header or (f"**{len(stacks)} stacks, {len(cells)} cells, {len(recs)} records** ({said}: a record per "
                      f"run, a cell's repeats included); **{between} changes** between neighbouring releases, "
                      f"**{len(changes) - between} findings** within one row.\n")
    links = "".join(f"\n- {e['what']}: [{e['link']}]({e['link']})\n" for c in changes for e in c.get("evidence") or []
                    if e.get("link"))   # as publish links each change's evidence from the page
    folder.with_suffix(".md").write_text("# The atlas\n\n" + page + links)
    return folder / "atlas.json"


def _clean():
    """Two neighbouring TF 2 rows: 2.3 has multi_gpu_model, 2.4 says it is unsupported (removed), and a
    change says it went at 2.4; the convnet is faster on 2.4, with nothing else moved, and its bisect
    found the same direction."""
    recs = [_record("atlas-tf2", "tf2.3.4", "convnet-16px/none-c1", tensorflow="2.3.4", keras="2.4.0",
                    model="convnet"),
            _record("atlas-tf2", "tf2.3.4", "gru-2x32/multi_gpu_model-c2", tensorflow="2.3.4", keras="2.4.0",
                    wrapper="multi_gpu_model", devices=2),
            _record("atlas-tf2", "tf2.4.4", "convnet-16px/none-c1", tensorflow="2.4.4", keras="2.4.0",
                    model="convnet", samples_per_sec=200.0),
            _record("atlas-tf2", "tf2.4.4", "gru-2x32/multi_gpu_model-c2", tensorflow="2.4.4", keras="2.4.0",
                    wrapper="multi_gpu_model", devices=2, status="unsupported", devices_trained=""),
            ]
    change = {"id": "c1", "line": "keras2", "column": "convnet-16px none-c1", "kind": "faster",
              "before": "atlas-tf2/tf2.3.4", "after": "atlas-tf2/tf2.4.4",
              "detail": "convnet-16px none-c1: samples/s x2.00", "size": 2.0,
              "evidence": [{"what": "bisect: first good tensorflow 2.4.0", "link": "atlas/evidence/c1.json"}]}
    went = {"id": "went", "line": "keras2", "column": "gru-2x32 multi_gpu_model-c2", "kind": "wrapper",
            "before": "atlas-tf2/tf2.3.4", "after": "atlas-tf2/tf2.4.4",
            "detail": "gru-2x32 multi_gpu_model-c2: no longer available (tf.keras 2.4.0 has no multi_gpu_model)"}
    evidence = {"c1": {"direction": "mended", "first_good": "2.4.0", "package": "tensorflow", "problem": ""}}
    return recs, [change, went], evidence


def _audit(data, *more):
    proc = harness("atlas", "audit", "--data", str(data), "--json", *more)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_a_header_that_counts_records_as_cells_or_findings_as_changes_is_named(tmp_path):
    """The header an earlier publish wrote: one number for cells and records, one for changes and
    findings within a row. With a repeat and a finding, both are named as a unit mixed."""
    recs, changes, evidence = _clean()
    recs.append(dict(recs[0], cell=recs[0]["cell"].replace("/r0", "/r1"), repeat=1))
    changes.append({**changes[0], "id": "c2", "before": "", "kind": "devices-seed"})
    page = ("**2 stacks, 5 cells** (4 ok, 1 unsupported); **3 changes** between neighbouring releases.\n")
    code, found = _audit(_atlas(tmp_path / "atlas", recs, changes, evidence, page))
    said = " ".join(f["what"] for f in found if f["check"] == "counts")
    assert code == 1 and "repeats included" in said and "within one row" in said, found


def test_a_clean_atlas_passes(tmp_path):
    recs, changes, evidence = _clean()
    code, found = _audit(_atlas(tmp_path / "atlas", recs, changes, evidence))
    assert (code, found) == (0, [])


def _plant_counts(recs, changes, evidence):
    return recs, changes, evidence, "**9 stacks, 4 cells, 4 records** (3 ok, 1 unsupported: a record per run); " \
                                    "**2 changes** between neighbouring releases, **0 findings** within one row.\n"


def _plant_devices(recs, changes, evidence):
    recs[1]["devices_trained"] = 3
    return recs, changes, evidence, None


def _plant_duplicates(recs, changes, evidence):
    twin = [dict(r, matrix="atlas-other") for r in recs if r["environment"] == "tf2.4.4"]
    return recs + twin, changes, evidence, None


def _plant_verdicts(recs, changes, evidence):
    evidence["c1"] = {"direction": "broke", "first_bad": "2.4.0", "package": "tensorflow", "problem": ""}
    return recs, changes, evidence, None


def _plant_like_for_like(recs, changes, evidence):
    for r in recs:
        if r["environment"] == "tf2.4.4":
            r["numpy"] = "1.21.6"  # a neighbour whose NumPy moved too, unsaid
    return recs, changes, evidence, None


def _plant_facts(recs, changes, evidence):
    return [r for r in recs if not (r["environment"] == "tf2.4.4" and r["wrapper"] == "multi_gpu_model")], \
        changes, evidence, None  # silent where TF 2.4 removed the wrapper


def _plant_removal_unsaid(recs, changes, evidence):
    return recs, [c for c in changes if c["kind"] != "wrapper"], evidence, None  # it went, and no change says so


def _plant_claims(recs, changes, evidence):
    for r in recs:
        r["numpy"] = "2.0.2"
    return recs, changes, evidence, "**2 stacks, 4 cells, 4 records** (3 ok, 1 unsupported: a record per run); " \
                                    "**2 changes** between neighbouring releases, **0 findings** within one row." \
                                    "\n\nEvery stack whose own week resolved NumPy 2, measured again with " \
                                    "`numpy<2`.\n"


def _plant_refuted_against_its_side_by_side(recs, changes, evidence):
    """A speed-up published as refuted whose bisect's own two ends, run in one session, moved x1.69
    past its 20 % threshold (the bisect called them alike: their ranges overlapped)."""
    changes[0]["confirmed"] = False
    evidence["c1"] = {"package": "tensorflow", "direction": None, "problem": "the ends do not differ",
                      "command": "python -m harness bisect m.yaml --package tensorflow --speed-drop 20",
                      "versions": ["2.3.4", "2.4.4"],
                      "tested": {"2.3.4": {"evidence": {"samples_per_sec": {"median": 7908.0, "min": 3800.0}}},
                                 "2.4.4": {"evidence": {"samples_per_sec": {"median": 13347.0, "min": 12000.0}}}}}
    return recs, changes, evidence, None


def _plant_evidence_no_page_links(recs, changes, evidence):
    evidence["0c11f7ba70a2"] = {"direction": "broke", "package": "tensorflow", "problem": ""}
    return recs, changes, evidence, None


@pytest.mark.parametrize("check,plant", [
    ("side by side", _plant_refuted_against_its_side_by_side), ("evidence", _plant_evidence_no_page_links),
    ("counts", _plant_counts), ("devices", _plant_devices), ("duplicates", _plant_duplicates),
    ("verdicts", _plant_verdicts), ("like-for-like", _plant_like_for_like), ("facts", _plant_facts),
    ("facts", _plant_removal_unsaid), ("claims", _plant_claims)])
def test_each_planted_contradiction_is_found_and_named(tmp_path, check, plant):
    recs, changes, evidence, header = plant(*_clean())
    code, found = _audit(_atlas(tmp_path / "atlas", recs, changes, evidence, header))
    assert code == 1
    assert check in {f["check"] for f in found}, found
    assert all(f["where"] and f["what"] for f in found), "each finding names its place and what contradicts"


OWING_MATRIX = """\
name: atlas-tf2
environments:
  - {python: "3.8", tensorflow: "2.3.4"}
  - {python: "3.8", tensorflow: "2.4.4"}
workloads:
  - {name: convnet-16px, model: convnet, height: 16, width: 16, classes: 4, samples: 256}
  - {name: gru-2x32, model: rnn, cell: gru, layers: 2, units: 32, timesteps: 8, features: 4, classes: 4, samples: 256}
parallelism:
  - {wrapper: none, devices: 1}
  - {wrapper: multi_gpu_model, devices: 2}
include:
  - {workload: convnet-16px, wrapper: none}
  - {workload: gru-2x32, wrapper: multi_gpu_model}
batch_sizes: [128]
repeats: REPEATS
"""


def test_an_owed_cell_the_page_hides_is_named_with_the_matrix_and_the_page(tmp_path):
    """The atlas matrices name a cell the data holds no record of: the page that leaves it out is
    named, with the matrix and the cell; the matrices the data covers pass; a page that names the
    owed cell says what it owes (exit 0)."""
    recs, changes, evidence = _clean()
    data = _atlas(tmp_path / "atlas", recs, changes, evidence)
    page = data.parent.with_suffix(".md")
    covered, owing = tmp_path / "covered.yaml", tmp_path / "owing.yaml"
    covered.write_text(OWING_MATRIX.replace("REPEATS", "1"))
    owing.write_text(OWING_MATRIX.replace("REPEATS", "2"))   # a second repeat of every cell: four owed
    audit = ("atlas", "audit", "--data", str(data), "--results", str(tmp_path / "r"), "--json", "--matrices")
    proc = harness(*audit, str(covered))
    assert (proc.returncode, json.loads(proc.stdout)) == (0, []), proc.stdout + proc.stderr
    proc = harness(*audit, str(owing))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    owed = [f for f in json.loads(proc.stdout) if f["check"] == "owed"]
    assert len(owed) == 2 and all(str(page) in f["where"] and str(owing) in f["where"] for f in owed), owed
    assert {f["where"].split(": ", 1)[1].split(" ")[0] for f in owed} == {"atlas-tf2/tf2.3.4", "atlas-tf2/tf2.4.4"}
    assert all("2 cell(s)" in f["what"] and "/r1" in f["what"] for f in owed), owed
    page.write_text(page.read_text() + "".join(f"\n- owed: `{r['cell'][:-1]}1`" for r in recs))
    proc = harness(*audit, str(owing))
    assert (proc.returncode, json.loads(proc.stdout)) == (0, []), proc.stdout + proc.stderr


def test_a_change_across_changed_defaults_is_like_for_like_only_where_both_sides_pinned_them(tmp_path):
    """Across TF 2.0 (the GRU's defaults changed), a change in a column whose cells pinned TF 1's
    defaults on both rows is the release's own; the same change in the plain column, unsaid, is named."""
    tf1 = records.pinned_args({"reset_after": False, "recurrent_activation": "hard_sigmoid", "implementation": 1})
    recs = []
    for env, tf, speed in (("tf1.15.5", "1.15.5", 100.0), ("tf2.0.4", "2.0.4", 200.0)):
        for workload, pinned in (("gru-2x32", ""), ("gru-2x32-tf1args", tf1)):
            recs.append(_record("atlas-tf", env, f"{workload}/none-c1", tensorflow=tf, keras="2.2.4-tf",
                                python="3.7.17", numpy="1.18.5", samples_per_sec=speed, workload=workload,
                                layer_args=pinned))
    changes = [{"id": f"c{i}", "line": "keras2", "column": f"{w} none-c1", "kind": "faster",
                "before": "atlas-tf/tf1.15.5", "after": "atlas-tf/tf2.0.4", "detail": f"{w} none-c1: samples/s x2.00",
                "size": 2.0} for i, w in enumerate(("gru-2x32", "gru-2x32-tf1args"))]
    _, found = _audit(_atlas(tmp_path / "atlas", recs, changes))
    named = [f["where"] for f in found if f["check"] == "like-for-like" and "defaults" in f["what"]]
    assert len(named) == 1 and "c0" in named[0], found


def test_a_facts_file_without_a_source_is_refused_with_its_name(tmp_path):
    recs, changes, evidence = _clean()
    data = _atlas(tmp_path / "atlas", recs, changes, evidence)
    facts = tmp_path / "facts.yaml"
    facts.write_text("- id: x\n  kind: removed\n  package: tensorflow\n  release: '2.4.0'\n")
    proc = harness("atlas", "audit", "--data", str(data), "--facts", str(facts))
    assert proc.returncode == 2 and str(facts) in proc.stderr, proc.stdout + proc.stderr


# The committed atlas passes this audit (and owes no cell of matrices/atlas): tests/test_publications.py,
# which holds every committed publication to its record in one `harness audit`.


def test_a_tf_2_10_lookup_gives_both_roads_past_2_16_and_names_every_pin():
    """From Keras 2 pins to TensorFlow 2.16 or later there are two roads, and the lookup names both:
    tf-keras with TF_USE_LEGACY_KERAS=1 (the Keras 2 line's rows), or a plain upgrade to Keras 3 (the
    Keras 3 line's row at the same TensorFlow). A pin that chooses no row (NumPy) is named, not dropped;
    a column that is not ok is named; no stack is listed twice."""
    proc = harness("atlas", "lookup", "tensorflow==2.10.1", "numpy==1.23.5", "--json",
                   "--data", str(ROOT / "docs" / "atlas" / "atlas.json"))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    answer = json.loads(proc.stdout)
    assert [r["road"] for r in answer["roads"]] == ["tf-keras", "Keras 3"]
    assert "TF_USE_LEGACY_KERAS=1" in answer["roads"][0]["how"]
    keras3 = answer["roads"][1]["rows"]["stack"]
    assert keras3["tensorflow"] == answer["target"]["stack"]["tensorflow"] and keras3["keras"].startswith("3.")
    assert answer["not_looked_up"] == ["numpy"]
    stacks = [json.dumps(r["stack"], sort_keys=True) for r in answer["nearest"]]
    assert len(stacks) == len(set(stacks))
    said = harness("atlas", "lookup", "tensorflow==2.10.1", "--data", str(ROOT / "docs" / "atlas" / "atlas.json"))
    assert "unsupported" in said.stdout and "road 'Keras 3'" in said.stdout, said.stdout


def _published(tmp_path, recs, changes=(), evidence=None):
    """The planted atlas published as `atlas publish --data` writes it (its page made by the page's
    own rules), and that publication's audit."""
    data = _atlas(tmp_path / "atlas", recs, list(changes), evidence)
    done = harness("atlas", "publish", "--data", str(data), "--out", str(tmp_path / "atlas"))
    assert done.returncode == 0, done.stdout + done.stderr
    return data, tmp_path / "atlas.md"


def test_a_median_of_two_runs_and_days_out_of_order_are_said_and_a_page_that_hides_them_is_named(tmp_path):
    """Two rows of one line whose days run backwards (2.4.4 resolved as of a day before 2.3.4's),
    and an entry that rests on two runs. Published, the page states both runs and names the two
    rows; a page that shows the two runs' midpoint as a median with its range, or leaves the days
    unsaid, is named with the page, the row and the column."""
    recs, changes, evidence = _clean()
    for r in recs:
        r["cutoff"] = "2021-02-01T00:00:00Z" if r["environment"] == "tf2.3.4" else "2021-01-04T00:00:00Z"
    recs[0]["val_accuracy"] = 0.70
    recs.append(dict(recs[0], cell=recs[0]["cell"].replace("/r0", "/r1"), repeat=1, val_accuracy=0.90))
    data, page = _published(tmp_path, recs, changes, evidence)
    code, found = _audit(data)
    assert (code, found) == (0, []), found
    text = page.read_text()
    assert "ok 0.70, 0.90" in text, "both runs, no median of two"
    line = next(s for s in text.splitlines() if "TF 2.3.4" in s and "TF 2.4.4" in s)
    assert "2021-02-01" in line and "2021-01-04" in line

    page.write_text(text.replace("ok 0.70, 0.90", "ok 0.80 <small>[0.70-0.90]</small>").replace(line, ""))
    code, found = _audit(data)
    checks = {f["check"]: f for f in found}
    assert code == 1 and set(checks) == {"few runs", "cut-offs"}, found
    assert "TF 2.3.4" in checks["few runs"]["where"] and "convnet-2x32 none-c1" in checks["few runs"]["where"]
    assert "2 run(s)" in checks["few runs"]["what"]
    assert "atlas-tf2/tf2.3.4 -> atlas-tf2/tf2.4.4" in checks["cut-offs"]["where"]
    assert str(page) in checks["cut-offs"]["where"]
