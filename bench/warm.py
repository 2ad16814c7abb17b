"""Benchmark: the fixed cost of a cell, fresh against warm, in one invocation.

    python bench/warm.py [MATRIX ...] [--engine venv|local|docker[,ENGINE...]] [--only GLOB ...] [--jobs N]
                         [--gpus IDS] [--python X.Y=PATH ...] [--rounds R] [--repeats N] [--standby on|off|on,off]
                         [--record FILE]

Environments are prepared first (`harness build`, not timed). Then the matrix
runs into temporary results folders: one warm run first (it starts the
caches: its fixed costs are printed apart), then `--rounds` times a `--fresh`
run (every cell in a new interpreter, no caches: the clean-room behaviour)
followed by a warm run (forked from warm launchers, caches warm). Fresh and
warm alternate so that a load that drifts over time hits both alike; each
cell's figures are medians over the rounds. `--repeats N` replaces the
matrix's repeats: in a real matrix many cells share an environment, and the
first cell of each warm launcher starts fresh while the launcher imports.

Printed per cell: its wall (the cell process's life, on the host's clock)
and its fixed cost (wall minus steady epoch seconds x epochs) in each run,
the fresh / warm ratio of the walls, the first epoch (where compilation
lands) of each, how it launched and whether compilation hit a cache; then
each run's wall against the steady-work bound (sum over cells of steady
epoch seconds x epochs x devices, divided by the GPUs -- or, without GPUs,
by the cells the run let side by side), how many cells stood by and how many
of them prepared their steps ahead (workloads/ahead.py, with any program the
compile cache lacked), and whether fresh and warm cells agree (status,
accuracy). Ratios are taken within this one invocation.

Then, per stack (environment) and for the whole run, the warm / fresh ratio
of the wall (a stack's: the sum of its cells' walls; the run's: the
command's) and of the steady samples/s (a stack's: the geometric mean over
its ok cells, the same cells in every run), one ratio per round (the fresh
and warm runs of that round, minutes apart at most), with min / median / max
over the rounds; beside each, the run-to-run spread of the fresh runs and of
the warm runs ((max - min) / median over the rounds). Last, a one-line
verdict per matrix against the acceptance of warm launch:

- **wall**: the warm run is not more than 3 % slower than the fresh one
  (median over rounds of the run's warm / fresh wall <= 1.03);
- **steady**: in every stack, warm and fresh steady samples/s differ by no
  more than their own run-to-run spread (|median warm / median fresh - 1| <=
  the larger of the two spreads). Needs `--rounds 2` or more: with one round
  there is no spread, and the verdict says "not judged".

Several matrices may be given: each is measured in turn, and the verdicts are
printed together at the end. Each run's wall time goes to stderr as it ends
(`[3/9] matrices/smoke.yaml, venv, fresh-1: 84.2 s`), so a long bench shows
where it is.

Several engines (`--engine venv,docker`) are measured in the same invocation,
interleaved: each engine's warm-up run, then in every round each engine's
fresh and warm runs in turn. Each engine gets its tables and verdict, and then
the warm fixed cost of the others against the first engine's, cell by cell:
the difference of the per-cell medians, with its median [min-max] over the
cells (the acceptance of warm containers: a warm Docker cell's fixed cost
within 0.5 s of a warm venv cell's).

`--standby on,off` makes each engine two arms, standing by on and off
(HARNESS_STANDBY), interleaved the same way: every round runs each arm's fresh
and warm runs in turn. Each arm gets its tables and verdict, and then the A/B
itself: per round, the warm run with standing by on against the warm run with
it off, minutes apart, per stack the steady samples/s ratio, judged against
the larger of the two arms' run-to-run spreads ("no bend shown", or "BENDS").

`--record FILE` writes what the tables say as JSON (``harness-bench-warm/1``): per matrix and
arm the cells and their statuses, each run's wall against its steady-work bound, per stack the
ratios per round with the spreads and the verdict, and the verdict lines; with the machine (CPU
model, GPUs) and the command. Pages quote a record through ``bench/figures.py``, never the
printed tables.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _common import harness, results, run_records


def fixed_cost(r: dict) -> float | None:
    """The seconds a cell held its slot beyond its steady work: its process's life, or, for a
    cell that prepared beside another and was handed its GPUs when that one ended
    (`timing.standby`), the time from the hand-over (`timing.held_seconds`)."""
    t = r.get("timing") or {}
    held = t.get("held_seconds") if t.get("held_seconds") is not None else t.get("total_seconds")
    if held is None or t.get("steady_epoch_seconds") is None:
        return None
    return held - t["steady_epoch_seconds"] * r["epochs_asked"]


def bound(rs: list[dict], divisor: int) -> float:
    work = sum((r["timing"].get("steady_epoch_seconds") or 0) * r["epochs_asked"] * r["parallelism"]["devices"]
               for r in rs if r["status"] == "ok")
    return work / max(1, divisor)


def divisor(record: dict) -> tuple[int, str]:
    gpus = len(((record.get("resources") or {}).get("gpus")) or [])
    return (gpus, "GPUs") if gpus else (record.get("jobs") or 1, "cells side by side")


def standbys(text: str) -> list[str]:
    """`--standby`'s arms, in the order each round runs them."""
    arms = [x.strip().lower() for x in text.split(",") if x.strip()]
    if not arms or any(x not in ("on", "off") for x in arms) or len(set(arms)) != len(arms):
        raise argparse.ArgumentTypeError(f"{text!r}: on, off, or on,off")
    return arms


def fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("matrices", nargs="*", default=["matrices/smoke.yaml"], metavar="MATRIX")
    p.add_argument("--engine", default="venv", help="an engine, or several separated by commas (interleaved)")
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--jobs")
    p.add_argument("--gpus")
    p.add_argument("--python", action="append", default=[])
    p.add_argument("--rounds", type=int, default=1,
                   help="fresh and warm runs alternate this many times; per cell the median (a loaded machine)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the runs' results folders here (default: a temporary folder, removed)")
    p.add_argument("--repeats", type=int,
                   help="run each cell this many times (the matrix's `repeats:` replaced): cells of one "
                        "environment share a warm launcher, as in a real matrix")
    p.add_argument("--standby", default="on", type=standbys, metavar="on|off|on,off",
                   help="off: no warm cell prepares beside another on its GPUs (the A/B of what standing by "
                        "costs the cell it prepares beside; the harness's HARNESS_STANDBY=off); on,off: both "
                        "arms interleaved in every round, and the warm runs of the two compared round by round")
    p.add_argument("--record", metavar="FILE", help="write what the tables say as JSON (harness-bench-warm/1)")
    a = p.parse_args()
    common = []
    for item in a.python:
        common += ["--python", item]
    select = [x for g in a.only for x in ("--only", g)]
    extra = (["--jobs", a.jobs] if a.jobs else []) + (["--gpus", a.gpus] if a.gpus else [])
    verdicts, measured = [], []
    for matrix in a.matrices:
        a.matrix = a.label = matrix
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(a.keep).resolve() / Path(matrix).stem if a.keep else Path(tmp)
            if a.repeats:
                data = yaml.safe_load(Path(matrix).read_text())
                data["repeats"] = a.repeats
                copy = Path(matrix).with_name(f".bench-{Path(matrix).stem}-r{a.repeats}.yaml")
                copy.write_text(yaml.safe_dump(data, sort_keys=False))
                a.matrix = str(copy)
            try:
                lines, data = run_all(a, tmp, common, select, extra)
                verdicts.extend(lines)
                measured.append(data)
            finally:
                if a.repeats:
                    Path(a.matrix).unlink(missing_ok=True)
        print()
    print("verdicts (warm run <= 3 % slower than fresh; steady samples/s within the run-to-run spread):")
    for line in verdicts:
        print(line)
    if a.record:
        write_record(Path(a.record), measured)


def machine() -> dict:
    """The CPU model (/proc/cpuinfo's first "model name", else the platform's word), the cores this
    process may use and the GPUs `nvidia-smi -L` lists, so a record says what it was measured on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = []
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        gpus = [line.split(" (UUID")[0] for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)), "gpus": gpus, "system": platform.system()}


def write_record(path: Path, measured: list[dict]) -> None:
    record = {"schema": "harness-bench-warm/1", "command": ["python", "bench/warm.py", *sys.argv[1:]],
              "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": machine(), "matrices": measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded: {path}")


def accuracy(fresh: list[dict], warm: list[dict]) -> str:
    """'bitwise' when every run's validation accuracy is the same; else the spread between fresh
    runs beside the largest gap between a warm run and the fresh ones (a stack that is not
    deterministic, e.g. a GPU whose compiler autotunes, differs between fresh runs too)."""
    values = [x["metrics"].get("val_accuracy") for x in fresh + warm]
    if len(set(values)) == 1:
        return "bitwise"
    f = [x["metrics"].get("val_accuracy") for x in fresh if x["metrics"].get("val_accuracy") is not None]
    w = [x["metrics"].get("val_accuracy") for x in warm if x["metrics"].get("val_accuracy") is not None]
    if not f or not w:
        return "not comparable"
    gap = max(abs(v - u) for v in w for u in f)
    among = f"fresh spread {max(f) - min(f):.4f}" if len(f) > 1 else "one fresh run"
    return f"differs: warm vs fresh {gap:.4f}, {among}"


# a cell's phase marks in order: (label, key of timing.phases)
PHASES = (("imports", "imports"), ("devices", "devices"), ("data and model", "data_and_model"),
          ("model.compile", "compiled"))


def startup(t: dict) -> dict[str, float]:
    """A cell's start-up parts, each the difference of two phase marks (seconds from the
    workload's start). A cell that stood by (`timing.standby`) prepared while another cell
    trained on its GPUs: of its start-up only what came after its hand-over is its own -- none
    where it waited after model.compile (as cells do now), else the model.compile part less the
    wait that fell in it (results written before)."""
    marks = t.get("phases") or {}
    out, last = {"interpreter start": t.get("interpreter_start_seconds") or 0.0}, 0.0
    for label, key in PHASES:
        if marks.get(key) is not None:
            out[label], last = marks[key] - last, marks[key]
    standby = t.get("standby")
    if not standby:
        return out
    own = out.get("model.compile")
    if own is None or (standby.get("prepared_seconds") or 0.0) >= (marks.get("compiled") or 0.0):
        return {}
    return {"model.compile": own - (standby.get("waited_seconds") or 0.0)}


def phases(rs: list[dict]) -> dict[str, float | None]:
    """Medians of a cell's parts: its start-up (`startup`), the first epoch, the steady epochs,
    validation and the teardown; for cells that stood by, apart, what they prepared ahead."""
    parts: dict[str, list[float]] = {}
    for r in rs:
        t = r.get("timing") or {}
        if r["status"] != "ok" or not t.get("phases"):
            continue
        for label, part in startup(t).items():
            parts.setdefault(label, []).append(part)
        parts.setdefault("first epoch", []).append(t.get("first_epoch_seconds") or 0.0)
        parts.setdefault("steady epochs", []).append((t.get("steady_epoch_seconds") or 0.0) *
                                                     max(0, r["epochs_asked"] - 1))
        # an epoch's seconds beyond its training (validation, callbacks): paid once per epoch,
        # outside both the first epoch's and the steady epochs' training seconds above
        parts.setdefault("validation", []).append(sum(max(0.0, (e.get("epoch_seconds") or 0.0) - (e.get("seconds")
                                                                                                 or 0.0))
                                                      for e in r.get("epochs") or []))
        parts.setdefault("teardown", []).append(t.get("teardown_seconds") or 0.0)
        parts.setdefault("total (held)", []).append(t.get("held_seconds") or t.get("total_seconds") or 0.0)
        if t.get("standby"):
            parts.setdefault("prepared ahead (cells that stood by)", []).append(t["standby"]["prepared_seconds"])
        if (t.get("programs_ahead") or {}).get("programs"):
            parts.setdefault("of it, steps traced and compiled ahead", []).append(t["programs_ahead"]["seconds"])
    order = [label for label, _ in (("interpreter start", None), *PHASES)]
    return {k: _median(parts[k]) for k in sorted(parts, key=lambda k: order.index(k) if k in order else len(order))}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def run_all(a, tmp: Path, common: list[str], select: list[str], extra: list[str]) -> list[str]:
    engines = [e.strip() for e in a.engine.split(",") if e.strip()]
    for engine in engines:
        # the build's GPU self-check on the bench's GPUs only (`build` takes no --gpus)
        harness("build", a.matrix, "--engine", engine, *common, *select, "--results", str(tmp / engine / "build"),
                env={"CUDA_VISIBLE_DEVICES": a.gpus} if a.gpus else None)
    # an arm is an engine with standing by on or off (HARNESS_STANDBY, which the harness reads per
    # run): every arm's runs are interleaved with every other's, round by round
    arms = {(engine if len(a.standby) == 1 else f"{engine}, standby {s}"): (engine, s)
            for engine in engines for s in a.standby}
    order = [(arm, "warm-up", []) for arm in arms] + [
        (arm, f"{kind}-{k}", flags) for k in range(1, a.rounds + 1) for arm in arms
        for kind, flags in (("fresh", ["--fresh"]), ("warm", []))]
    runs: dict[str, dict] = {arm: {} for arm in arms}
    for done, (arm, label, flags) in enumerate(order, 1):  # fresh and warm (and arms) alternate: a
        engine, standby = arms[arm]                       # drifting load hits all alike
        folder = tmp / arm.replace(", ", "-").replace(" ", "-") / label
        wall = harness("run", a.matrix, "--engine", engine, *common, *select, *extra, *flags,
                       "--results", str(folder), env={"HARNESS_STANDBY": standby})
        print(f"[{done}/{len(order)}] {a.label}, {arm}, {label}: {wall:.1f} s", file=sys.stderr, flush=True)
        record = run_records(folder)[-1]
        runs[arm][label] = (wall, {r["cell"]: r for r in results(folder)}, record)
    data = {"matrix": a.label, "rounds": a.rounds, "arms": {}}
    verdicts = []
    for arm in arms:
        line, data["arms"][arm] = report(a, arm, runs[arm])
        data["arms"][arm].update(engine=arms[arm][0], standby=arms[arm][1])
        verdicts.append(line)
    first = [next(arm for arm, (e, _) in arms.items() if e == engine) for engine in engines]   # each engine's first arm
    for arm in first[1:]:
        line, data.setdefault("engines", {})[arm] = against(a, first[0], runs[first[0]], arm, runs[arm])
        verdicts.append(line)
    for engine in engines if len(a.standby) > 1 else ():
        on, off = (next(arm for arm, (e, s) in arms.items() if e == engine and s == want) for want in ("on", "off"))
        line, data.setdefault("ab", {})[engine] = standby_ab(a, on, runs[on], off, runs[off])
        verdicts.append(line)
    data["verdicts"] = verdicts
    return verdicts, data


def standby_ab(a, on: str, on_runs: dict, off: str, off_runs: dict) -> str:
    """The A/B of standing by: per round, the warm run with it on against the warm run with it off
    (minutes apart), per stack the steady samples/s ratio; judged against the larger run-to-run
    spread of the two arms' warm runs, as warm is judged against fresh."""
    rounds = range(1, a.rounds + 1)
    w_on = [per_stack(on_runs[f"warm-{k}"][1]) for k in rounds]
    w_off = [per_stack(off_runs[f"warm-{k}"][1]) for k in rounds]
    wall = [on_runs[f"warm-{k}"][0] / off_runs[f"warm-{k}"][0] for k in rounds]
    print(f"\nstanding by on / off, warm runs of the same round ({a.rounds} round(s)): per stack the steady "
          "samples/s ratio per round, median [min-max]; spread = (max - min) / median of one arm's warm runs")
    print("| stack | steady on/off | spread on | spread off | within spread |")
    print("|---|---|---|---|---|")
    judged, within, stacks = 0, 0, []
    for env in sorted(set().union(*w_on, *w_off)):
        s_on = [s.get(env, (None, None))[1] for s in w_on]
        s_off = [s.get(env, (None, None))[1] for s in w_off]
        ratio = [x / y if x and y else None for x, y in zip(s_on, s_off, strict=True)]
        ok, verdict = within_spread(s_on, s_off)
        judged, within = judged + (ok is not None), within + bool(ok)
        print(f"| {env} | {mmm(ratio)} | {pct(spread(s_on))} | {pct(spread(s_off))} | {verdict} |")
        stacks.append({"stack": env, "steady_on_off": ratio, "spread_on": spread(s_on), "spread_off": spread(s_off),
                       "within": ok, "within_words": verdict})
    steady_word = ("not judged (needs --rounds 2 or more)" if not judged else
                   f"{'no bend shown' if within == judged else 'BENDS'} ({within} of {judged} stacks within "
                   "their spread)")
    line = (f"{a.label} ({on} against {off}, {a.rounds} round(s)): warm run wall on/off {mmm(wall)}; "
            f"steady samples/s: {steady_word}")
    print("\nverdict: " + line)
    return line, {"wall_on_off": wall, "stacks": stacks, "steady_words": steady_word, "verdict": line}


ENGINE_LIMIT = 0.5  # seconds: a warm cell's fixed cost on another engine against the first's


def against(a, base: str, base_runs: dict, other: str, other_runs: dict) -> str:
    """Warm fixed cost per cell on `other` minus on `base` (medians over the rounds), same run."""
    def per_cell(runs: dict) -> dict[str, float]:
        out = {}
        warm = [runs[f"warm-{k}"][1] for k in range(1, a.rounds + 1)]
        for cell in warm[0]:
            value = _median([fixed_cost(r[cell]) for r in warm if cell in r and r[cell]["status"] == "ok"])
            if value is not None:
                out[cell] = value
        return out
    b, o = per_cell(base_runs), per_cell(other_runs)
    diffs = [o[c] - b[c] for c in sorted(set(b) & set(o))]
    if not diffs:
        return f"{a.label}: warm fixed cost {other} - {base}: no cell ok on both", {"base": base, "cells": 0}
    median = statistics.median(diffs)
    word = "met" if median <= ENGINE_LIMIT else "NOT met"
    line = (f"{a.label}: warm fixed cost per cell, {other} - {base}: median {median:+.2f} s "
            f"[{min(diffs):+.2f} to {max(diffs):+.2f}] over {len(diffs)} cells ({other} median "
            f"{statistics.median(o.values()):.2f} s, {base} {statistics.median(b.values()):.2f} s): "
            f"{word} (<= {ENGINE_LIMIT:.1f} s)")
    print("\n" + line)
    both = sorted(set(b) & set(o))
    return line, {"base": base, "cells": len(diffs), "differences": dict(zip(both, diffs, strict=True)),
                  "said": {"median": f"{median:+.2f} s", "range": f"[{min(diffs):+.2f} to {max(diffs):+.2f}]"},
                  "met": median <= ENGINE_LIMIT, "verdict": line}


def report(a, engine: str, runs: dict) -> str:
    """One engine's tables and its verdict (the per-cell table, the runs against the bound, the
    ratios per round)."""
    fresh = [runs[f"fresh-{k}"][1] for k in range(1, a.rounds + 1)]
    warm = [runs[f"warm-{k}"][1] for k in range(1, a.rounds + 1)]
    first = runs["warm-up"][1]
    print(f"\n{a.matrix} ({engine}), {a.rounds} round(s) of fresh then warm after a warm-up run; "
          "per cell the median over rounds, seconds; fixed = wall - steady epoch x epochs")
    print("| cell | status | fresh wall | warm wall | fresh/warm | fixed fresh | fixed warm (warm-up run) | "
          "fixed warm | epoch 1 fresh | epoch 1 warm | warm launches | compile cache | same accuracy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, fixed_f, fixed_w, same_accuracy = [], [], [], {}
    for cell in sorted(fresh[0]):
        fs, ws = [r[cell] for r in fresh if cell in r], [r[cell] for r in warm if cell in r]
        f = fs[0]
        tf, tw = _median([x["timing"].get("total_seconds") for x in fs]), \
            _median([x["timing"].get("total_seconds") for x in ws])
        ratio = tf / tw if tf and tw else None
        if ratio and f["status"] == "ok":
            ratios.append(ratio)
        ff, fw = _median([fixed_cost(x) for x in fs]), _median([fixed_cost(x) for x in ws])
        if ff is not None and fw is not None:
            fixed_f.append(ff)
            fixed_w.append(fw)
        caches = sorted({((x.get("warmth") or {}).get("compile_cache") or {}).get("hit", "none offered")
                         for x in ws})
        same = accuracy(fs, ws + ([up] if (up := first.get(cell)) else []))
        same_accuracy[cell] = same
        statuses = {x["status"] for x in fs + ws}
        status = f["status"] if len(statuses) == 1 else f"{sorted(statuses)} (DIFFERS)"
        launches = sum(1 for x in ws if (x.get("warmth") or {}).get("launch") == "warm")
        print(f"| {cell} | {status} | {fmt(tf)} | {fmt(tw)} | {fmt(ratio)} | {fmt(ff)} | "
              f"{fmt(fixed_cost(up) if up else None)} | {fmt(fw)} | "
              f"{fmt(_median([x['timing'].get('first_epoch_seconds') for x in fs]))} | "
              f"{fmt(_median([x['timing'].get('first_epoch_seconds') for x in ws]))} | {launches}/{len(ws)} "
              f"| {', '.join(caches)} | {same} |")
    if ratios:
        print(f"\nfresh / warm cell wall: median {statistics.median(ratios):.2f}x "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] over {len(ratios)} ok cells")
    if fixed_f:
        print(f"fixed cost per cell: fresh median {statistics.median(fixed_f):.2f} s, "
              f"warm median {statistics.median(fixed_w):.2f} s [{min(fixed_w):.2f}-{max(fixed_w):.2f}]")
    warm_cells = [r for rs in warm for r in rs.values()]
    print("where a warm cell's time goes, medians over its ok cells (s): " +
          ", ".join(f"{k} {fmt(v)}" for k, v in phases(warm_cells).items()))
    batches = sorted({r.get("batch_size") for r in warm_cells if r.get("batch_size")})
    for batch in batches if len(batches) > 1 else ():   # a fixed cost that depends on the batch shows here
        print(f"  batch {batch}: " + ", ".join(f"{k} {fmt(v)}" for k, v in
                                             phases([r for r in warm_cells if r.get("batch_size") == batch]).items()))
    measured_runs = []
    for label, (wall, rs, record) in runs.items():
        n, what = divisor(record)
        b = bound(list(rs.values()), n)
        ratio = f"{record['wall_seconds'] / b:.2f}x the bound" if b else "no steady work"
        busy = sum(1 for r in rs.values() if (r.get("warmth") or {}).get("beside"))
        stood = sum(1 for r in rs.values() if (r.get("timing") or {}).get("standby"))
        ahead = [r["timing"]["programs_ahead"] for r in rs.values()
                 if ((r.get("timing") or {}).get("programs_ahead") or {}).get("programs")]
        missed = sum(a.get("cache_misses") or 0 for a in ahead)
        occ = record.get("gpu_occupancy") or {}
        busy_gpus = f"; {occ['mean_busy_gpus']} of {occ['gpus']} GPUs busy on average" if occ else ""
        print(f"run {label:>7}: command {wall:.1f} s, cells' run {record['wall_seconds']:.1f} s; steady-work bound "
              f"{b:.1f} s ({n} {what}): {ratio}; {busy} of {len(rs)} cell(s) ran beside the harness's own work; "
              f"{stood} stood by for their GPUs, {len(ahead)} prepared their steps ahead"
              f"{f' ({missed} program(s) not in the compile cache)' if missed else ''}{busy_gpus}")
        measured_runs.append({"run": label, "command_seconds": wall, "cells_seconds": record["wall_seconds"],
                              "bound_seconds": b, "bound_of": f"{n} {what}",
                              "of_bound": record["wall_seconds"] / b if b else None,
                              "beside": busy, "stood_by": stood, "ahead": len(ahead), "gpu_occupancy": occ or None})
    line, data = acceptance(a, engine, runs)
    statuses = {cell: sorted({r[cell]["status"] for r in fresh + warm if cell in r}) for cell in sorted(fresh[0])}
    return line, {"cells": {c: s[0] if len(s) == 1 else s for c, s in statuses.items()}, "runs": measured_runs,
                  "accuracy": same_accuracy, **data}


# -- the acceptance: ratios per round, spreads between runs, one verdict --------------------------
WALL_LIMIT = 1.03   # a warm run at most 3 % slower than fresh


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def spread(values: list[float]) -> float | None:
    """Run-to-run spread: (max - min) / median over the rounds; None with fewer than two."""
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.median(values):
        return None
    return (max(values) - min(values)) / statistics.median(values)


def per_stack(rs: dict) -> dict[str, tuple[float | None, float | None]]:
    """A run's figures per stack: (sum of its cells' walls, geometric mean of their steady samples/s),
    over the cells that are ok."""
    stacks: dict[str, list[dict]] = {}
    for r in rs.values():
        if r["status"] == "ok":
            stacks.setdefault(r["environment"], []).append(r)
    return {env: (sum(x["timing"].get("total_seconds") or 0.0 for x in cells),
                  geomean([x["timing"].get("steady_samples_per_sec") for x in cells]))
            for env, cells in stacks.items()}


def within_spread(mine: list[float | None], theirs: list[float | None]) -> tuple[bool | None, str]:
    """Whether the medians of two kinds of run differ by no more than the larger of their run-to-run
    spreads (None where either has fewer than two rounds), and the table's words for it: one rule
    for warm against fresh and for standing by on against off."""
    s_mine, s_theirs = spread(mine), spread(theirs)
    m_mine, m_theirs = _median(mine), _median(theirs)
    if s_mine is None or s_theirs is None or not m_mine or not m_theirs:
        return None, "not judged (one round)"
    ok = abs(m_mine / m_theirs - 1) <= max(s_mine, s_theirs)
    return ok, f"{'yes' if ok else 'NO'} ({m_mine / m_theirs - 1:+.1%} vs {max(s_mine, s_theirs):.1%})"


def mmm(values: list[float | None], digits: int = 3) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return (f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"
            if len(values) > 1 else f"{values[0]:.{digits}f}")


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def acceptance(a, engine: str, runs: dict) -> str:
    """The table of ratios and spreads, and the matrix's one-line verdict."""
    rounds = range(1, a.rounds + 1)
    fresh = [runs[f"fresh-{k}"] for k in rounds]
    warm = [runs[f"warm-{k}"] for k in rounds]
    print(f"\nwarm / fresh per round (median [min-max] over {a.rounds} round(s)); spread = (max - min) / median "
          "of one kind's runs over the rounds")
    print("| stack | wall warm/fresh | wall spread fresh | wall spread warm | steady samples/s warm/fresh | "
          "steady spread fresh | steady spread warm | steady within spread |")
    print("|---|---|---|---|---|---|---|---|")
    run_ratio = [w[0] / f[0] for f, w in zip(fresh, warm, strict=True)]
    print(f"| (the run, command wall) | {mmm(run_ratio)} | {pct(spread([f[0] for f in fresh]))} | "
          f"{pct(spread([w[0] for w in warm]))} | | | | |")
    f_stacks, w_stacks = [per_stack(f[1]) for f in fresh], [per_stack(w[1]) for w in warm]
    judged, within, stacks = 0, 0, []
    for env in sorted(set().union(*f_stacks, *w_stacks)):
        fw = [s.get(env, (None, None)) for s in f_stacks]
        ww = [s.get(env, (None, None)) for s in w_stacks]
        wall = [w[0] / f[0] if f[0] and w[0] else None for f, w in zip(fw, ww, strict=True)]
        steady = [w[1] / f[1] if f[1] and w[1] else None for f, w in zip(fw, ww, strict=True)]
        sf, sw = spread([f[1] for f in fw]), spread([w[1] for w in ww])
        ok, verdict = within_spread([w[1] for w in ww], [f[1] for f in fw])
        judged, within = judged + (ok is not None), within + bool(ok)
        print(f"| {env} | {mmm(wall)} | {pct(spread([f[0] for f in fw]))} | {pct(spread([w[0] for w in ww]))} | "
              f"{mmm(steady)} | {pct(sf)} | {pct(sw)} | {verdict} |")
        stacks.append({"stack": env, "wall_warm_fresh": wall, "steady_warm_fresh": steady, "steady_spread_fresh": sf,
                       "steady_spread_warm": sw, "within": ok, "within_words": verdict,
                       "said": {"wall": mmm(wall), "steady": mmm(steady), "spread_fresh": pct(sf),
                                "spread_warm": pct(sw)}})   # as the table printed them
    median_ratio = statistics.median(run_ratio)
    wall_word = "met" if median_ratio <= WALL_LIMIT else "NOT met"
    steady_word = ("not judged (needs --rounds 2 or more)" if not judged else
                   f"{'met' if within == judged else 'NOT met'} ({within} of {judged} stacks within their spread)")
    line = (f"{a.label} ({engine}, {a.rounds} round(s)): wall warm/fresh {mmm(run_ratio)} "
            f"(fresh spread {pct(spread([f[0] for f in fresh]))}, warm {pct(spread([w[0] for w in warm]))}): "
            f"{wall_word} (<= {WALL_LIMIT:.2f}); steady samples/s: {steady_word}")
    print("\nverdict: " + line)
    return line, {"run_wall_warm_fresh": run_ratio, "stacks": stacks, "wall_words": wall_word,
                  "steady_words": steady_word, "verdict": line}


if __name__ == "__main__":
    main()
