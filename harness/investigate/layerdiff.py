"""Where two cells' models part, layer by layer: the comparison `harness diverge` prints.

Pure functions over what each side's cell wrote (workloads/layerwise.py): a `Side` is
its layers.json and layers.npz. Five verdicts, in the order a difference propagates:

1. configurations -- every key whose value differs in what the layer computes, after the
   spellings that mean the same are made one (a dtype policy and its name; ``glorot_uniform``
   and the VarianceScaling it is; an axis as an index or a list, negative or not, counted
   against the layer's input rank: Keras 2.2's ``-1`` and tf.keras's ``[2]`` are one axis of
   a 3-D input), and without the switches that choose only how it is computed (an RNN's
   ``implementation`` and ``unroll``: the same function, another kernel -- any rounding that
   makes shows in the outputs, against the floor);
2. weights' layout -- which layers took the reference's weights one to one, which could
   not (and the shapes), which have none;
3. forward -- each layer's output on the batch: max abs and relative error, and the
   first layer above the floor;
4. backward -- each layer's gradient: relative error, cosine and the ratio of norms, and
   where it departs in the order backpropagation meets the layers (from the loss back);
   a departure that is one common ratio with unchanged directions is called a scale;
5. training -- the first epoch whose loss parts, from the same weights, data in order.

The floor is measured: a third cell ran the reference's own stack again, following the
reference as the other side did but taking each batch's rows in reverse order (the same sums,
added in another order: float rounding, and what training makes of it over epochs), and each
side read its gradients twice with two step sizes. A difference is claimed only above
``FACTOR`` times that scatter and above float32's resolution for the quantity
(``RESOLUTION``): float32 arithmetic in another order (another kernel, another device) moves
one step's results by about 1e-6 of their size, not 1e-3.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.workloads.protocol import DIVERGE_ARRAYS, DIVERGE_LAYERS, OUTPUT_DIR

FACTOR = 10.0
# float32's resolution for each quantity: what reordered float32 arithmetic can move it by.
RESOLUTION = {"forward": 1e-4, "backward": 1e-3, "training": 1e-2}
SAME_DIRECTION = 1 - 1e-4   # a cosine above this: the gradient points the same way
_NOT_CONFIG = ("name", "module", "registered_name", "build_config", "compile_config", "shared_object_id")
_NOT_BEHAVIOUR = ("implementation", "unroll")  # how an RNN computes, not what (the module's docstring)
# Initialisers that are one VarianceScaling under another name (Keras 2 serialises the name's
# VarianceScaling; Keras 3 the name).
_VARIANCE_SCALING = {
    "GlorotUniform": (1.0, "fan_avg", "uniform"), "GlorotNormal": (1.0, "fan_avg", "truncated_normal"),
    "HeUniform": (2.0, "fan_in", "uniform"), "HeNormal": (2.0, "fan_in", "truncated_normal"),
    "LecunUniform": (1.0, "fan_in", "uniform"), "LecunNormal": (1.0, "fan_in", "truncated_normal"),
}


@dataclass
class Side:
    cell: str
    doc: dict
    arrays: dict

    @property
    def layers(self) -> list[dict]:
        return self.doc.get("layers", [])


def load_side(cell_id: str, folder: Path) -> Side:
    out = folder / OUTPUT_DIR
    doc = json.loads((out / DIVERGE_LAYERS).read_text())
    with np.load(out / DIVERGE_ARRAYS, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return Side(cell_id, doc, arrays)


# -- 1. configurations ----------------------------------------------------------------------
def canonical(value):
    """A configuration with one spelling per meaning (see the module's docstring)."""
    if isinstance(value, dict):
        if value.get("class_name") in ("DTypePolicy", "FloatDTypePolicy", "Policy") and "config" in value:
            return (value.get("config") or {}).get("name")
        if value.get("class_name") in _VARIANCE_SCALING:
            scale, mode, dist = _VARIANCE_SCALING[value["class_name"]]
            value = {"class_name": "VarianceScaling", "config": {
                "scale": scale, "mode": mode, "distribution": dist,
                "seed": (value.get("config") or {}).get("seed")}}
        if value.get("class_name") == "VarianceScaling" and isinstance(value.get("config"), dict):
            cfg = dict(value["config"])
            if cfg.get("distribution") == "normal":  # Keras 2.2's name for the truncated normal
                cfg["distribution"] = "truncated_normal"
            value = {**value, "config": cfg}
        return {k: canonical(v) for k, v in value.items() if k not in _NOT_CONFIG and k not in _NOT_BEHAVIOUR}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def one_axis(value, rank: int | None):
    """An axis setting as the sorted list of the non-negative axes it names in an input of `rank`
    dimensions (batch included): -1, [-1], 2 and [2] are one axis of a 3-D input. Without a rank,
    only an index and the list of it are made one; what is not an index or a list of indices
    (None: every axis; an index out of the rank) is left as written, compared as it is."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(a, int) and not isinstance(a, bool) for a in items):
        return value
    if rank:
        if not all(-rank <= a < rank for a in items):
            return value
        items = [a % rank for a in items]
    return sorted(set(items))


def layer_config(layer: dict, rank: int | None = None) -> dict:
    """A layer's configuration as `configurations` compares it: one spelling per meaning, its
    axis counted against its input rank (workloads/layerwise.py records it; `rank` where this
    side's record has none)."""
    config = canonical(layer.get("config") or {})
    if isinstance(config, dict) and "axis" in config:
        config["axis"] = one_axis(config["axis"], layer.get("input_rank") or rank)
    return config


def _differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) & set(b)):
            out.extend(_differences(a[key], b[key], f"{path}.{key}" if path else key))
        return out
    return [] if a == b else [(path, a, b)]


def configurations(ref: Side, other: Side) -> dict:
    diffs, only = [], []
    for mine, theirs in zip(ref.layers, other.layers, strict=False):
        rank = mine.get("input_rank") or theirs.get("input_rank")
        a, b = layer_config(mine, rank), layer_config(theirs, rank)
        for key, va, vb in _differences(a, b):
            diffs.append({"index": mine["index"], "layer": mine["name"], "class": mine["class"],
                          "key": key, "reference": va, "other": vb})
        for side, x, y in (("reference", a, b), ("other", b, a)):
            extra = sorted(set(x) - set(y)) if isinstance(x, dict) and isinstance(y, dict) else []
            if extra:
                only.append({"index": mine["index"], "layer": mine["name"], "side": side, "keys": extra})
    return {"verdict": "differ" if diffs else "same", "differences": diffs, "only_on_one_side": only}


# -- 2. layout ------------------------------------------------------------------------------
def layout(ref: Side, other: Side, configs: dict) -> dict:
    """Layers are named as the reference names them (each side numbers its own: gru_1 on one
    is gru on the other), the other side's name beside it where it differs."""
    rows, unmapped = [], []
    keys_of = {}
    for d in configs["differences"]:
        keys_of.setdefault(d["index"], []).append(d["key"])
    for mine, layer in zip(ref.layers, other.layers, strict=False):
        how = layer.get("mapped") or "no weights"
        if how.startswith("cannot map") and keys_of.get(layer["index"]):
            how += f" (the configurations differ in: {', '.join(keys_of[layer['index']])})"
        if how.startswith("cannot map"):
            unmapped.append(layer["index"])
        rows.append({"index": layer["index"], "layer": mine["name"], "class": mine["class"], "mapped": how,
                     **({"other_layer": layer["name"]} if layer["name"] != mine["name"] else {}),
                     **({"other_class": layer["class"]} if layer["class"] != mine["class"] else {})})
    verdict = "one to one" if not unmapped else f"{len(unmapped)} layer(s) cannot be mapped"
    return {"verdict": verdict, "layers": rows, "unmapped": unmapped}


# -- 3. forward -----------------------------------------------------------------------------
def _max_errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float] | None:
    if a.shape != b.shape:
        return None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        same = bool(np.array_equal(a64, b64, equal_nan=True))
        return (0.0, 0.0) if same else (math.inf, math.inf)
    diff = float(np.max(np.abs(a64 - b64))) if a64.size else 0.0
    scale = float(np.max(np.abs(a64))) if a64.size else 0.0
    return diff, (diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))


def _threshold(floor: float, quantity: str) -> float:
    return max(FACTOR * floor, RESOLUTION[quantity])


def forward(ref: Side, other: Side, floor: Side) -> dict:
    rows, first = [], None
    for layer in ref.layers:
        key = f"out/{layer['index']}"
        if key not in ref.arrays or key not in other.arrays:
            rows.append({"index": layer["index"], "layer": layer["name"], "note": "no single output"})
            continue
        got = _max_errors(ref.arrays[key], other.arrays[key])
        if got is None:
            row = {"index": layer["index"], "layer": layer["name"], "class": layer["class"],
                   "note": f"shapes differ: {list(ref.arrays[key].shape)} and {list(other.arrays[key].shape)}",
                   "relative": math.inf, "threshold": 0.0, "above": True}
        else:
            own = _max_errors(ref.arrays[key], floor.arrays[key]) if key in floor.arrays else None
            fl = own[1] if own else 0.0
            row = {"index": layer["index"], "layer": layer["name"], "class": layer["class"], "max_abs": got[0],
                   "relative": got[1], "floor": fl, "threshold": _threshold(fl, "forward")}
            row["above"] = row["relative"] > row["threshold"]
        rows.append(row)
        if row.get("above") and first is None:
            first = row
    return {"verdict": "diverges" if first else "within the floor", "first": first, "layers": rows}


# -- 4. backward ----------------------------------------------------------------------------
def _gradients(side: Side, index: int, reading: int = 0) -> list[np.ndarray]:
    out, j = [], 0
    while f"g{reading}/{index}/{j}" in side.arrays:
        out.append(side.arrays[f"g{reading}/{index}/{j}"].astype(np.float64).ravel())
        j += 1
    return out


def _compare_vectors(a: list[np.ndarray], b: list[np.ndarray]) -> dict | None:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return None
    if not a:
        return {}
    x, y = np.concatenate(a), np.concatenate(b)
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    rel = float(np.linalg.norm(x - y)) / nx if nx > 0 else (0.0 if ny == 0 else math.inf)
    cosine = float(np.dot(x, y) / (nx * ny)) if nx > 0 and ny > 0 else (1.0 if nx == ny else 0.0)
    return {"relative": rel, "cosine": cosine, "norm_ratio": ny / nx if nx > 0 else None}


def backward(ref: Side, other: Side, floor: Side) -> dict:
    rows = []
    for layer in ref.layers:
        i = layer["index"]
        mine, theirs = _gradients(ref, i), _gradients(other, i)
        if not mine and not theirs:
            continue
        got = _compare_vectors(mine, theirs)
        row = {"index": i, "layer": layer["name"], "class": layer["class"]}
        if got is None:
            row.update(note="the weights differ in shape", relative=math.inf, above=True, threshold=0.0)
            rows.append(row)
            continue
        # the floor: the reference's own stack again, and each side's two readings of its step
        floors = [(_compare_vectors(mine, _gradients(floor, i)) or {}).get("relative", 0.0),
                  (_compare_vectors(mine, _gradients(ref, i, 1)) or {}).get("relative", 0.0),
                  (_compare_vectors(theirs, _gradients(other, i, 1)) or {}).get("relative", 0.0)]
        fl = max([v for v in floors if v is not None and math.isfinite(v)] + [0.0])
        row.update(got, floor=fl, threshold=_threshold(fl, "backward"))
        row["above"] = row["relative"] > row["threshold"]
        rows.append(row)
    departed = [r for r in rows if r.get("above")]
    first = departed[-1] if departed else None  # backpropagation meets the last layer first
    scale = None
    ratios = [r.get("norm_ratio") for r in departed if r.get("norm_ratio")]
    if departed and len(ratios) == len(departed) and all(r.get("cosine", 0) > SAME_DIRECTION for r in departed):
        if max(ratios) - min(ratios) <= 1e-3 * max(ratios):
            scale = float(np.median(ratios))
    return {"verdict": "diverges" if first else "within the floor", "first": first, "scale": scale,
            "departed": [r["index"] for r in departed], "layers": rows}


# -- 5. training ----------------------------------------------------------------------------
def training(ref: Side, other: Side, floor: Side) -> dict:
    a, b, f = (s.doc.get("curve") or [] for s in (ref, other, floor))
    rows, first = [], None
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x.get("loss") is None or y.get("loss") is None:
            continue
        rel = abs(y["loss"] - x["loss"]) / max(abs(x["loss"]), 1e-12)
        fl = abs(f[k]["loss"] - x["loss"]) / max(abs(x["loss"]), 1e-12) if k < len(f) and f[k].get("loss") is not None \
            else 0.0
        row = {"epoch": x["epoch"], "reference": x["loss"], "other": y["loss"], "relative": rel, "floor": fl,
               "threshold": _threshold(fl, "training")}
        row["above"] = rel > row["threshold"]
        rows.append(row)
        if row["above"] and first is None:
            first = row
    notes = [f"the {role} side's training failed: {s.doc['curve_error']}"
             for role, s in (("reference", ref), ("other", other)) if s.doc.get("curve_error")]
    if ref.doc.get("data_sha256") != other.doc.get("data_sha256"):
        notes.append("the two sides' training data differ (their digests): the curves compare models and data")
    return {"verdict": "diverges" if first else "within the floor", "first": first, "epochs": rows, "notes": notes}


# -- all of it ------------------------------------------------------------------------------
def compare(ref: Side, other: Side, floor: Side) -> dict:
    configs = configurations(ref, other)
    out = {"reference": ref.cell, "other": other.cell, "floor": floor.cell,
           "configurations": configs, "layout": layout(ref, other, configs),
           "forward": forward(ref, other, floor), "backward": backward(ref, other, floor),
           "training": training(ref, other, floor),
           "randomness": {"reference": ref.doc.get("zeroed") or [], "other": other.doc.get("zeroed") or [],
                          "notes": [n for n in (ref.doc.get("twin"), other.doc.get("twin")) if n]},
           "rows": len(ref.arrays.get("batch/x", [])), "loss": {"reference": ref.doc.get("loss"),
                                                             "other": other.doc.get("loss")}}
    out["diverges"] = any(out[k]["verdict"] == "diverges" for k in ("forward", "backward", "training")) or \
        configs["verdict"] == "differ" or bool(out["layout"]["unmapped"])
    out["summary"] = summary(out)
    return out


def summary(d: dict) -> str:
    """One line: the earliest place the two sides part, and why it is thought to."""
    parts = []
    fw, bw = d["forward"], d["backward"]
    if d["layout"]["unmapped"]:
        first = d["layout"]["layers"][d["layout"]["unmapped"][0]]
        parts.append(f"weights of {first['layer']} ({first['class']}) cannot be mapped")
    if fw["first"]:
        f = fw["first"]
        parts.append(f"forward parts at layer {f['index']} {f['layer']} ({f.get('class', '?')}), "
                     f"relative error {_num(f.get('relative'))}")
    if bw["scale"] is not None:
        parts.append(f"every departing gradient is {bw['scale']:.3g}x the reference's, same direction (a scale)")
    elif bw["first"]:
        b = bw["first"]
        parts.append(f"gradients depart at {b['layer']} ({b.get('class', '?')}), relative error {_num(b['relative'])}")
    if d["training"]["first"]:
        parts.append(f"loss curves part at epoch {d['training']['first']['epoch']}")
    changed = sorted({f"{c['layer']}.{c['key']}" for c in d["configurations"]["differences"]})
    if changed:
        parts.append("configurations differ: " + ", ".join(changed[:6]) + (" ..." if len(changed) > 6 else ""))
    return "; ".join(parts) if parts else "no divergence above the floor"


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.1e}"
