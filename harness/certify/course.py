"""The certificate's course: the pairs (one device against N), each side's ordinary run (its status
and its metrics), diverge's layer-by-layer comparison of the pair, the controls that name an
expected difference, one record, its writers.

Why both an ordinary run and diverge: the ordinary run is what a user meets -- a crash, a hang, an
accuracy above 1 or a NaN loss on N devices -- and it says so with the status words and the
signature; diverge is the evidence of *where* the two sides part (the first layer whose outputs
differ, the first gradient, the epoch the loss curves part, a gradient scale), above a floor the
one-device side measured on itself. Exit 0: every pair is equivalent or differs as expected, no
metric out of range; 1: otherwise; 2: the input cannot be used."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from harness import exits, status
from harness.cells import Cell
from harness.certify import CANNOT, DIFFERS, EQUIVALENT, EXPECTED, KNOWN, OUT_OF_RANGE, SCHEMA, writers
from harness.errors import UserError
from harness.terminal import shown


@dataclass(frozen=True)
class Control:
    """`workload`'s expected difference `key` is shown by `control` (the same model without that
    part, or with it frozen) agreeing on one and N devices. `workload` and `control` may instead
    name two environments: the same workload on the control stack (the same packages with float32
    matrix products at full precision, say)."""
    workload: str
    control: str
    key: str

    @classmethod
    def parse(cls, text: str) -> Control:
        head, sep, key = text.rpartition(":")
        workload, eq, control = head.partition("=")
        if not (sep and eq and workload and control and key in KNOWN):
            raise UserError(f"--control {text!r}: expected WORKLOAD=CONTROL:KEY, KEY one of {', '.join(KNOWN)} "
                            "(e.g. bn=bn-frozen:batchnorm)")
        return cls(workload, control, key)


def pairs(cells: list[Cell]) -> list[tuple[Cell, Cell]]:
    """(a one-device cell, a multi-device cell) of the same stack, workload, global batch and repeat:
    every one-device cell against every multi-device one -- on a host with one GPU, the GPU's side
    against N virtual CPU devices as well as one CPU device against N."""
    def key(c: Cell) -> tuple:
        return c.environment.name, c.workload.name, c.batch_size, c.repeat
    ones = [c for c in cells if c.parallelism.devices == 1 and c.parallelism.wrapper == "none"]
    return [(one, many) for one in ones for many in cells if many.parallelism.devices > 1 and key(many) == key(one)]


def out_of_range(result) -> list[str]:
    """The metrics a run reported that no training can produce: an accuracy outside [0, 1], a loss
    that is not a finite number."""
    found = []
    for name, value in sorted((result.metrics or {}).items()):
        if not isinstance(value, (int, float)):
            continue
        if "acc" in name and not 0.0 <= value <= 1.0:
            found.append(f"{name} {value}")
        elif "loss" in name and not math.isfinite(value):
            found.append(f"{name} {value}")
    return found


def _compared(m, one: Cell, many: Cell, out: Path, results: Path, engine, console) -> tuple[dict | None, str]:
    from harness import api  # deferred: diverge loads the runner

    try:
        found, folder = api.diverge(m, one.id, many.id, out=out / "diverge", results=results, engine=engine,
                                    console=console)
    except UserError as exc:
        return None, str(exc)
    return {**found, "folder": str(folder)}, ""


def _part(found: dict) -> dict:
    """Where the two sides part, from diverge's record: the layer, the gradient, the epoch, the scale."""
    fw, bw, tr = found["forward"], found["backward"], found["training"]
    return {"summary": found["summary"], "forward": fw.get("first"), "backward": bw.get("first"),
            "scale": bw.get("scale"), "training": tr.get("first"), "folder": found.get("folder"),
            "zeroed": found.get("randomness", {})}


def run(m, *, only=None, controls: list[Control] = (), results: Path = Path("results"), out: Path = Path("certify"),
        engine: str = "auto", console: Console | None = None) -> tuple[dict, int]:
    """The certificate of every pair the selection holds; the record (also written under `out`)."""
    from harness import api  # deferred: the runner, when cells run
    from harness.api.operations import quiet, selected

    console = console or quiet()
    started = time.monotonic()
    cells = selected(m, only)
    found_pairs = pairs(cells)
    if not found_pairs:
        raise UserError(f"no pair to certify in {m.path}: the selection needs a one-device cell (wrapper none, 1 "
                        "device) and a multi-device cell of the same stack, workload and batch size")
    by_name = {c.workload: c for c in controls}
    names = {cell.workload.name for cell in m.cells} | {cell.environment.name for cell in m.cells}
    for c in controls:
        for name in (c.workload, c.control):
            if name not in names:
                raise UserError(f"--control {c.workload}={c.control}:{c.key}: {m.path} has no workload or "
                                f"environment {name!r}")
    record = {"schema": SCHEMA, "matrix": str(m.path), "pairs": [], "controls": [vars(c) for c in controls]}
    with api.engine(engine, console=console) as opened:
        wanted = [c.id for pair in found_pairs for c in pair]
        ran = api.run(m, results=results, engine=opened, only=wanted, console=console).by_cell
        for one, many in found_pairs:
            entry = {"stack": one.environment.name, "workload": one.workload.name, "batch_size": one.batch_size,
                     "one_kind": one.parallelism.device_kind,
                     "wrapper": many.parallelism.wrapper, "devices": many.parallelism.devices,
                     "device_kind": many.parallelism.device_kind, "one": one.id, "many": many.id}
            r1, rn = ran.get(one.id), ran.get(many.id)
            entry["ranges"] = {side: out_of_range(r) for side, r in (("one", r1), ("many", rn)) if r is not None}
            if r1 is None or r1.status != status.OK:
                entry.update(verdict=CANNOT, why=f"the one-device side: {r1.status if r1 else 'no result'}"
                             + (f" ({r1.failure_text})" if r1 is not None and r1.failure_text else ""))
            elif rn is None or rn.status != status.OK:
                entry.update(verdict=rn.status if rn else CANNOT,
                             why=(rn.failure_text if rn else "no result") or (rn.reason if rn else ""))
            else:
                console.rule(f"certify: {one.id} against {many.id}")
                found, problem = _compared(m, one, many, out, results, opened, console)
                if found is None:
                    entry.update(verdict=CANNOT, why=problem)
                elif not found["diverges"]:
                    entry.update(verdict=EQUIVALENT, why=found["summary"], where=_part(found))
                else:
                    entry.update(verdict=DIFFERS, why=found["summary"], where=_part(found))
                    ctrl = by_name.get(one.workload.name) or by_name.get(one.environment.name)
                    if ctrl:
                        entry["control"] = _control(m, ctrl, one, many, out, results, opened, console)
                        if entry["control"]["agrees"]:
                            entry.update(verdict=EXPECTED, expected=KNOWN[ctrl.key])
            if entry["ranges"].get("many") or entry["ranges"].get("one"):
                entry["finding"] = f"{OUT_OF_RANGE}: " + "; ".join(
                    f"{side} {', '.join(v)}" for side, v in entry["ranges"].items() if v)
            record["pairs"].append(entry)
    record["seconds"] = round(time.monotonic() - started, 1)
    written = writers.write(record, out)
    for line in writers.lines(record):
        console.print(shown(line), highlight=False)
    for path in written:
        console.print(f"written: {shown(str(path))}", highlight=False)
    fine = all(p["verdict"] in (EQUIVALENT, EXPECTED) and "finding" not in p for p in record["pairs"])
    return record, exits.OK if fine else exits.CHANGED


def _control(m, ctrl: Control, one: Cell, many: Cell, out: Path, results: Path, engine, console) -> dict:
    """The control pair -- the same stack, wrapper and batch, the control workload -- compared as the
    pair was: it agrees when diverge finds nothing above the floor."""
    by_env = ctrl.workload == one.environment.name   # an environment and its control environment

    def twin(cell: Cell) -> Cell | None:
        env, work = (ctrl.control, cell.workload.name) if by_env else (cell.environment.name, ctrl.control)
        return next((c for c in m.cells if c.environment.name == env and c.workload.name == work
                     and c.parallelism == cell.parallelism and c.batch_size == cell.batch_size
                     and c.repeat == cell.repeat), None)
    c1, cn = twin(one), twin(many)
    if c1 is None or cn is None:
        return {"workload": ctrl.control, "agrees": False,
                "why": f"{m.path} has no {ctrl.control} cell beside {one.id} and {many.id}"}
    found, problem = _compared(m, c1, cn, out, results, engine, console)
    if found is None:
        return {"workload": ctrl.control, "agrees": False, "why": problem}
    return {"workload": ctrl.control, "agrees": not found["diverges"], "why": found["summary"], "one": c1.id,
            "many": cn.id, "folder": found["folder"]}
