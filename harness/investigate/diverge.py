"""`harness diverge`: why two cells train differently, layer by layer.

`repro` reruns one cell, `bisect` finds the release where a cell changes; `diverge`
takes two cells -- two stacks, two backends, 1 and N devices, any engine -- and says
where their models part. It runs three derived cells through the ordinary Runner
(so engines, warm launchers, resume and the results store are `run`'s own):

* the **reference**: cell A in its environment, building its model (a built-in one or
  the user's factory), fixing a batch and writing its layers (workloads/layerwise.py);
* the **other side**: cell B in its environment, handed the reference's files through
  a chain (harness/chains.py: the `needs:` machinery), mapping the reference's weights
  onto its own layers and measuring the same things;
* the **floor**: cell A's stack again, following the reference as B did but taking each
  batch's rows in reverse order (the same sums, added in another order): what the
  reference's own stack scatters -- float rounding, and what training makes of it -- so a
  difference is claimed only above it.

The comparison itself is harness/investigate/layerdiff.py; what is written is a JSON record, an
HTML page with a per-layer plot (`page`), and a table in the terminal. Derived cells
keep their own folder under the output (never among a run's results), so a second
comparison with the same reference reuses it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness import chains, status
from harness.cells import BUILT_IN_MODELS, Cell
from harness.errors import UserError
from harness.files.paths import inside
from harness.investigate import layerdiff
from harness.names import file_name
from harness.report.divergence import PAGE, RECORD, write_page
from harness.results.result import Result
from harness.run.runner import Runner
from harness.run.selection import select
from harness.terminal import shown
from harness.workloads.protocol import DIVERGE_REFERENCE

DEFAULT_OUT = "diverge"
MODELS = (*BUILT_IN_MODELS, "user")  # what diverge compares: models the harness builds (not a script)
ROLES = ("reference", "floor", "other")


@dataclasses.dataclass
class Plan:
    reference: Cell
    floor: Cell
    other: Cell

    @property
    def cells(self) -> list[Cell]:
        out: list[Cell] = []
        for c in (self.reference, self.floor, self.other):
            if c.id not in {o.id for o in out}:
                out.append(c)
        return out


def _side(cell: Cell, role: str, rows: int | None, epochs: int | None, reference: Cell | None = None) -> Cell:
    """`cell` as one side of a divergence: its workload asks for the layer-by-layer run
    (`diverge:` in its spec) and, for a follower, needs the reference's files."""
    if cell.workload.model not in MODELS:
        raise UserError(f"{cell.id}: diverge compares models the harness builds -- a built-in workload or your "
                        f"factory (model: user); this cell's workload is '{cell.workload.model}'"
                        + (" (a script builds its model itself)" if cell.workload.model == "script" else ""))
    how = {"role": "reference" if reference is None else "follow", "rows": rows, "epochs": epochs,
           **({"reorder": True} if role == "floor" else {})}  # the floor: each batch's rows in another order
    suffix = {"reference": "ref", "floor": "floor", "other": "other"}[role]
    params = {**cell.workload.params, "diverge": how}
    params.pop("needs", None)  # the side's only input is the reference
    params.pop("after", None)
    name = f"{cell.workload.name}.diverge-{suffix}"
    workload = dataclasses.replace(cell.workload, name=name, params=params)
    side = dataclasses.replace(cell, workload=workload, needs=(), feeds=(), expect=None)
    if reference is not None:
        side = dataclasses.replace(side, needs=({"cell": reference.id, "as": DIVERGE_REFERENCE,
                                                  "spec_sha256": chains.spec_sha256(reference)},))
    return side


def plan(a: Cell, b: Cell, rows: int | None = None, epochs: int | None = None) -> Plan:
    ref = _side(a, "reference", rows, epochs)
    return Plan(reference=ref, floor=_side(a, "floor", rows, epochs, ref), other=_side(b, "other", rows, epochs, ref))


def one_cell(pattern: str, cells: list[Cell], what: str, matrix: Path) -> Cell:
    """The one cell of the matrix `pattern` names (an id, a prefix or a glob). A whole id names its
    cell even where it begins another's (``.../r1`` and ``.../r10``)."""
    exact = [c for c in cells if c.id == pattern]
    found = exact or select(cells, [pattern])
    if not found:
        raise UserError(f"{what} {pattern!r} matches no cell of {matrix} (python -m harness list {matrix} shows "
                        "the ids)")
    if len(found) > 1:
        named = ", ".join(c.id for c in found[:4]) + (" ..." if len(found) > 4 else "")
        raise UserError(f"{what} {pattern!r} matches {len(found)} cells of {matrix} ({named}): name one")
    return found[0]


def folder_of(out: Path, matrix_name: str, a: Cell, b: Cell) -> Path:
    return inside(out, out / file_name(matrix_name) / file_name(a.id, b.id))


def run(m, a: Cell, b: Cell, engine, out: Path, console: Console, *, rows: int | None = None,
        epochs: int | None = None, rerun: bool = False) -> tuple[dict, Path]:
    """Run the three sides (reusing finished ones), compare them, write the record and the page.
    A side that could not be measured is a UserError naming it, its status and its reason."""
    p = plan(a, b, rows, epochs)
    cells_root = out / "cells"
    started = time.monotonic()
    runner = Runner(dataclasses.replace(m, cells=p.cells), engine, cells_root, console,
                    rerun=frozenset({"all"}) if rerun else frozenset())
    results = {r.cell: r for r in runner.complete(p.cells)}
    seconds = time.monotonic() - started
    run_dir = cells_root / m.name
    sides = {}
    for role, cell, asked in (("reference", p.reference, a), ("other", p.other, b), ("floor", p.floor, a)):
        _usable(results.get(cell.id), role, asked, run_dir / cell.id)
        sides[role] = layerdiff.load_side(asked.id, run_dir / cell.id)
        problem = sides[role].doc.get("problem")
        if problem:
            raise UserError(f"{a.id} and {b.id} cannot be compared layer by layer: {problem}")
    found = layerdiff.compare(sides["reference"], sides["other"], sides["floor"])
    found["matrix"] = str(m.path)
    found["stacks"] = {role: _stack(results.get(c.id)) for role, c in
                       (("reference", p.reference), ("other", p.other))}
    found["cells_seconds"] = {role: _seconds(results.get(c.id)) for role, c in
                              (("reference", p.reference), ("floor", p.floor), ("other", p.other))}
    found["seconds"] = round(seconds, 2)
    folder = folder_of(out, m.name, a, b)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RECORD).write_text(json.dumps(found, indent=2, sort_keys=True, default=str) + "\n")
    write_page(found, folder)
    return found, folder


def _usable(result: Result | None, role: str, asked: Cell, folder: Path) -> None:
    if result is None:
        raise UserError(f"the {role} side ({asked.id}) left no result (interrupted?); run the command again")
    if result.status != status.OK or not (folder / "artifacts").is_dir():
        why = result.failure_text or "no layers written"
        raise UserError(f"the {role} side ({asked.id}) ended {result.status}: {why}; its folder: {folder}")


def _stack(result: Result | None) -> dict:
    seen = (result.seen if result else None) or {}
    return {k: seen.get(k) for k in ("python", "tensorflow", "keras", "backend", "jax", "torch", "numpy", "devices")
            if seen.get(k) is not None}


def _seconds(result: Result | None) -> float | None:
    timing = (result.get("timing") or {}) if result else {}
    return timing.get("total_seconds") or timing.get("wall_seconds")


# -- the terminal --------------------------------------------------------------------------
def show(found: dict, folder: Path, console: Console) -> None:
    console.rule(f"{shown(found['reference'])}  vs  {shown(found['other'])}")
    for role in ("reference", "other"):
        stack = found["stacks"].get(role) or {}
        console.print(f"{role:>9}: " + shown(", ".join(f"{k} {v}" for k, v in stack.items() if k != "devices")),
                      highlight=False)
    table = Table(show_edge=False, header_style="bold")
    for col in ("#", "layer", "class", "weights", "output err", "gradient err", "cosine", "norm x",
                "config"):
        table.add_column(col, no_wrap=col not in ("layer", "config"), min_width=8 if col == "layer" else None,
                         overflow="fold")
    fw = {r["index"]: r for r in found["forward"]["layers"]}
    bw = {r["index"]: r for r in found["backward"]["layers"]}
    keys: dict[int, list[str]] = {}
    for d in found["configurations"]["differences"]:
        keys.setdefault(d["index"], []).append(d["key"])
    first_fw = (found["forward"]["first"] or {}).get("index")
    for row in found["layout"]["layers"]:
        i = row["index"]
        f, g = fw.get(i, {}), bw.get(i, {})
        style = "bold red" if i == first_fw else ("red" if f.get("above") or g.get("above") else None)
        mapped = "ok" if row["mapped"] == "one to one" else ("-" if row["mapped"] == "no weights" else "NOT MAPPED")
        table.add_row(str(i), shown(row["layer"]), shown(row["class"]), mapped, _cell(f), _cell(g),
                      _fmt(g.get("cosine"), ".5f"), _fmt(g.get("norm_ratio"), ".4g"),
                      shown(", ".join(keys.get(i, []))[:60]), style=style)
    console.print(table)
    console.print("[dim]errors are relative (outputs: max |a-b| / max |a|; gradients: by norm); ! = above the "
                  "threshold (10 x the measured floor, at least float32's resolution)[/]", highlight=False)
    for name in ("configurations", "layout", "forward", "backward", "training"):
        console.print(f"[bold]{name:>14}[/]: {shown(_verdict_line(name, found))}", highlight=False)
    for note in found["randomness"]["notes"] + found["training"]["notes"]:
        console.print(f"[yellow]note[/]: {shown(note)}", highlight=False)
    console.print(f"[bold]{'diverges' if found['diverges'] else 'the same'}[/]: {shown(found['summary'])}",
                  highlight=False)
    cs = found["cells_seconds"]
    console.print(f"record: {shown(folder / RECORD)}   page: {shown(folder / PAGE)}   ({found['seconds']:.0f} s; "
                  f"the sides' own: " + ", ".join(f"{k} {v:.1f} s" for k, v in cs.items() if v) + ")",
                  highlight=False)


def _cell(row: dict) -> str:
    if "relative" not in row:
        return shown(row.get("note", "-"))
    text = layerdiff._num(row["relative"])
    return f"{text} !" if row.get("above") else text


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _verdict_line(name: str, found: dict) -> str:
    part = found[name]
    if name == "configurations":
        n = len(part["differences"])
        return "same values in every key both sides have" if not n else f"{n} value(s) differ: " + ", ".join(
            f"{d['layer']}.{d['key']} {d['reference']!r} -> {d['other']!r}" for d in part["differences"][:4]) + \
            (" ..." if n > 4 else "")
    if name == "layout":
        bad = [r for r in part["layers"] if r["mapped"].startswith("cannot")]
        return part["verdict"] + "".join(f"; {r['layer']}: {r['mapped']}" for r in bad[:3])
    first = part.get("first")
    if name == "training":
        if not part["epochs"]:
            return "no epochs to compare"
        return (f"parts at epoch {first['epoch']} (loss {first['reference']:.4g} -> {first['other']:.4g})" if first
                else f"within the floor for {len(part['epochs'])} epoch(s)")
    if not first:
        return "within the floor at every layer"
    text = (f"first at layer {first['index']} {first['layer']}: relative error {layerdiff._num(first['relative'])} "
            f"(floor {layerdiff._num(first.get('floor'))}, threshold {layerdiff._num(first['threshold'])})")
    if name == "backward" and part.get("scale") is not None:
        text += f"; a uniform scale of {part['scale']:.4g}x (cosines ~1) on every departing layer"
    return text
