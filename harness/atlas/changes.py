"""What moved between neighbouring releases on a line, and where two devices part from one.

Each column is read down its line (`rows.lines`) with the watch's own statistics
(`harness.watch.changes`): `status_changes` for breaks, mends and changed failure families
(a release whose repeats disagree is flaky, never a break), `find_shifts` for the accuracy and
the speed of the one-device cells, whose repeats (each from its own seed: the matrices'
``reseed``) are the noise a shift must exceed. Besides those, what the atlas exists for:
**a wrapper that parts from one device** -- a two-device cell whose accuracy lies outside the
same row's one-device range (widened by `FLOOR`), seed 000's "half the accuracy on two GPUs" --
and a wrapper that appears or goes (`unsupported` on one side only).

Speed shifts are claimed only past `SPEED_EFFECT`, and one row slower (or faster) than both its
neighbours is a blip, not two changes: the atlas's cells run two at a time on a shared host, rows
at different moments, so such differences are the host's, not the release's. A speed change the
atlas keeps is confirmed by `explain`, whose bisect runs both releases' cells in one session.

Each change carries its evidence: the rows on both sides, the failure family, and the command
that narrows it further (`harness bisect` to the release or the night, `harness diverge` for a
value, `harness repro` for a bundle); `evidence` entries filled in from runs of those are links.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re

from harness import status as st
from harness.atlas.facts import defaults_crossed, load_facts, pinned_alike
from harness.atlas.records import layer_args
from harness.atlas.rows import Row, lines, moved_besides, twins
from harness.claims import Change
from harness.watch import changes as ch

FLOOR = 0.02          # the least accuracy difference claimed between devices, however narrow the spread
SPEED_EFFECT = 0.25   # the least relative speed shift claimed between releases on this host
OTHER_WAY = {"broke": "slower", "mended": "faster"}  # what a speed bisect's direction says of the newer release
OTHER_WAY_SAID = "run side by side, the other way"  # how a refuted speed change names the direction found
# An `unsupported` that names the host's limit (CPU devices standing for GPUs, no GPU at all), not the
# release's: the wrapper or layer exists in that stack, this host cannot run it
HOST_LIMITS = ("virtual CPU devices", "no GPU", "need an NVIDIA GPU")
BLIP = 1.25           # a slow-down and a speed-up at the next row that multiply to within this: one busy row
UNRESOLVED = "unresolved"   # an evidence entry's standing: side by side past the threshold, too noisy to judge


def side_by_side(record: dict) -> tuple[float, float, float, float] | None:
    """A speed bisect's own side-by-side answer: the newer end's median samples/s over the older's,
    both medians, and the bisect's threshold (its ``--speed-drop``, as a fraction); None where the
    record holds no such pair (another kind of record, an end not measured, no threshold said).
    Both ends ran in one session, so this ratio is the one figure of the record the host's moments
    did not bend -- the figure a refutation must agree with."""
    versions, tested = record.get("versions") or [], record.get("tested") or {}
    found = re.search(r"--speed-drop (\d+(?:\.\d+)?)", record.get("command") or "")
    if len(versions) < 2 or not found:
        return None
    ends = [((tested.get(v) or {}).get("evidence") or {}).get("samples_per_sec") or {}
            for v in (versions[0], versions[-1])]
    old, new = (e.get("median") for e in ends)
    if not old or not new:
        return None
    return new / old, old, new, float(found.group(1)) / 100


def past_threshold(kind: str, ratio: float, drop: float) -> bool:
    """Whether a side-by-side ratio says what a `kind` speed change claims, past the bisect's own
    threshold: a slow-down by more than `drop`, a speed-up by more than its inverse."""
    return ratio <= 1 - drop if kind == "slower" else ratio >= 1 / (1 - drop)


# An atlas change is a `claims.Change` whose `where` holds its line and its column (the column's
# workload and parallelism, "gru-2x32 none-c1"), and for a speed shift its standing, `confirmed`:
# a speed shift between rows measured at different moments is a candidate (False) until a bisect
# runs both releases in one session and finds it (True: `explain.attach`); None: not a speed shift.
# Its kinds: broke | mended | family-changed | flaky | accuracy | faster | slower | devices
# | devices-seed (some seeds part on two devices, the median does not) | wrapper
# | numpy (a variant row against its twin: before the NumPy 1 row, after the NumPy 2 one).
# `before` is the row key (matrix/environment) on the old side, None for a finding within one row;
# `after` the row key of the first release with the new behaviour (or the row itself); `detail` the
# one sentence a reader reads; `evidence` entries are {"what", "command"}, {"what", "text"} or
# {"what", "link"}. Its id is made with it (`change_id`, from what never moves once it is found).


def change_id(line: str, column: str, kind: str, after: str) -> str:
    """Stable: the same change found again (another publication, more rows) has the same id."""
    return hashlib.sha256("\0".join((line, column, kind, after)).encode()).hexdigest()[:12]


def at(line: str, column: str, kind: str, before: str | None, after: str, detail: str, size: float | None = None, *,
       low: float | None = None, high: float | None = None, confidence: float | None = None, runs: int | None = None,
       evidence: list | None = None, confirmed: bool | None = None) -> Change:
    """The atlas's change in `column` of `line`, between the rows `before` and `after`."""
    return Change(kind, before, after, detail, size=size, low=low, high=high, confidence=confidence, runs=runs,
                  evidence=list(evidence or []), where={"line": line, "column": column, "confirmed": confirmed},
                  id=change_id(line, column, kind, after))


def to_dict(change: Change) -> dict:
    """The change as changes.json, the lookup's answer and an evidence file hold it, key for key."""
    where = change.where
    return {"id": change.id, "line": where["line"], "column": where["column"], "kind": change.kind,
            "before": change.before, "after": change.after, "detail": change.detail, "size": change.size,
            "evidence": copy.deepcopy(change.evidence), "confirmed": where.get("confirmed")}


def from_dict(d: dict) -> Change:
    """A published change read back (its id made again from what it is); a field it lacks is empty."""
    return at(d.get("line") or "", d.get("column") or "", d.get("kind") or "", d.get("before"), d.get("after") or "",
              d.get("detail") or "", d.get("size"), evidence=d.get("evidence") or [], confirmed=d.get("confirmed"))


def standing(change: Change) -> str | None:
    """A speed shift's standing: a `candidate` until `explain` runs both releases side by side,
    then `confirmed` or `refuted` -- or `unresolved`, where the side-by-side medians moved as
    claimed past the bisect's threshold while its ranges overlapped (neither proves it nor
    refutes it); None for every other kind."""
    confirmed = change.where.get("confirmed")
    if confirmed is None:
        return None
    if confirmed:
        return "confirmed"
    if any(e.get("standing") == UNRESOLVED for e in change.evidence):
        return UNRESOLVED   # side by side it moved as claimed, and the bisect's ranges overlapped
    return "refuted" if any(e.get("link") for e in change.evidence) else "candidate"


def find(rows: list[Row], *, seed: int = 0, facts: list[dict] | None = None) -> list[Change]:
    """Every change along every line, then the rows' own device findings; each change between
    rows says what else moved between them (`_not_alone`; `facts` default: the harness's own)."""
    out: list[Change] = []
    for line, members in lines(rows).items():
        keyed = {r.label + " | " + r.key: r for r in members}
        for col in _columns(members):
            out += _status(line, col, members, keyed)
            out += _wrapper(line, col, members)
            if col.endswith("-c1"):
                out += _shifts(line, col, members, keyed, seed)
    for row in rows:
        out += _devices(row)
    out += _boundary(rows)
    _not_alone(out, rows, _own_facts() if facts is None else facts)
    return out


@functools.cache
def _own_facts() -> list[dict]:
    """The harness's own facts file, read once however many times a command finds the changes."""
    return load_facts()


def _not_alone(found: list[Change], table: list[Row], facts: list[dict]) -> None:
    """Neighbouring rows differ by more than the release a change is published as when another
    package moved with it (NumPy, a backend: each stack is resolved as of its own release's day)
    or the release's notes changed the model's defaults (the same code builds another model).
    Such a change says so in its own sentence: the packages with both versions, the defaults by
    name, from `facts.yaml`. The boundary's changes are NumPy's move itself and say it already."""
    by_key = {r.key: r for r in table}
    for c in found:
        before, after = by_key.get(c.before or ""), by_key.get(c.after)
        if before is None or after is None or c.kind == "numpy":
            continue
        old, new = dict(before.pins), dict(after.pins)
        line, column = c.where["line"], c.where["column"]
        said = [f"{k} moved too ({a or '-'} -> {b or '-'})" for k, a, b in moved_besides(line, old, new)]
        model = column.split("-")[0]
        for f in defaults_crossed(facts, {k: (old.get(k), new.get(k)) for k in old}, model,
                                  (_pinned(before, column), _pinned(after, column))):
            said.append(f"another model: {f['package']} {f['release']} changed the {model.upper()}'s defaults "
                        f"({', '.join(f.get('names', ()))})" + _with_them_pinned(c, before, after, f))
        if said:
            c.detail += " -- not this release alone: " + "; ".join(said)


def _with_them_pinned(c: Change, before: Row, after: Row, fact: dict) -> str:
    """What the same layers with the changed defaults pinned on both rows measured, where a column
    of the same model and parallelism pinned them (a matrix's `layer_args`): the release's own part
    of the change, beside it."""
    column = c.where["column"]
    names, parallel = fact.get("names", ()), column.split(" ", 1)[-1]
    for col, entry in after.entries.items():
        other = before.entries.get(col)
        if col == column or other is None or col.split(" ", 1)[-1] != parallel or \
                entry.records[0]["model"] != other.records[0]["model"] or \
                not col.startswith(column.split(" ", 1)[0]):
            continue
        if not pinned_alike(names, _pinned(before, col), _pinned(after, col)):
            continue
        held = f"; with them pinned on both ({col.split(' ', 1)[0]}): {other.status} -> {entry.status}"
        a, b = other.spread("samples_per_sec"), entry.spread("samples_per_sec")
        if c.kind in ("faster", "slower") and a and b:
            held += f", samples/s x{b[0] / a[0]:.2f} (candidate: rows run apart)"
        return held
    return ""


def _pinned(row: Row, column: str) -> dict:
    """The layer arguments the row's cells of that column pinned ({} when none, or no such cells)."""
    entry = row.entries.get(column)
    return layer_args(entry.records[0]) if entry and entry.records else {}


def _boundary(table: list[Row]) -> list[Change]:
    """Each variant row (NumPy 1 kept) against its twin on the plain line (the same TensorFlow,
    Keras and backend): a column whose status differs, or whose one-device accuracy ranges do not
    meet (widened by FLOOR). `before` is the variant's row, `after` the twin: the move to NumPy 2."""
    found = []
    for row in table:
        if row.line == row.base_line:
            continue
        twin = next((t for t in table if twins(row, t)), None)
        if twin is None:
            continue
        for col, entry in row.entries.items():
            other = twin.entries.get(col)
            if other is None:
                continue
            if entry.status != other.status:
                why = f" ({other.family})" if other.family else ""
                found.append(at(row.line, col, "numpy", row.key, twin.key,
                                f"{col}: {entry.status} with NumPy {row.stack.get('numpy')}, {other.status} with "
                                f"NumPy {twin.stack.get('numpy')}{why}"))
                continue
            a, b = entry.spread("val_accuracy"), other.spread("val_accuracy")
            if a and b and (a[2] + FLOOR < b[1] or b[2] + FLOOR < a[1]):
                found.append(at(row.line, col, "numpy", row.key, twin.key,
                                f"{col}: validation accuracy {a[0]:.3f} with NumPy {row.stack.get('numpy')}, "
                                f"{b[0]:.3f} with NumPy {twin.stack.get('numpy')}", size=round(b[0] - a[0], 4)))
    return found


def grouped(found: list[Change]) -> list[list[Change]]:
    """Changes that are one event seen in several columns -- the same kind between the same rows
    with the same words past the column (one failure family hitting three workloads) -- together,
    in the order first found: one line on the page, one bisect."""
    groups: dict[tuple, list[Change]] = {}
    for c in found:
        words = c.detail.split(": ", 1)[1] if ": " in c.detail else c.detail
        if c.kind in ("slower", "faster", "accuracy", "devices", "devices-seed"):
            words = c.detail  # each column's own size (a two-device finding: its own cells)
        groups.setdefault((c.where["line"], c.kind, c.before, c.after, words), []).append(c)
    return list(groups.values())


def _columns(members: list[Row]) -> list[str]:
    return list(dict.fromkeys(c for r in members for c in r.entries))


def _label(row: Row) -> str:
    return row.label + " | " + row.key


def _status(line: str, col: str, members: list[Row], keyed: dict) -> list[Change]:
    outcomes = [ch.Outcome(_label(r), r.entries[col].statuses, r.entries[col].family)
                for r in members if col in r.entries]
    found = []
    for sc in ch.status_changes(outcomes):
        before = keyed[sc.before].key if sc.before in keyed else None
        after = keyed[sc.after]
        change = at(line, col, sc.kind, before, after.key, f"{col}: {sc.detail}")
        change.evidence += _status_evidence(after, col, sc.kind)
        found.append(change)
    return found


def _status_evidence(row: Row, col: str, kind: str) -> list[dict]:
    entry = row.entries[col]
    cell = entry.records[0]["cell"]
    matrix, _ = entry.origin  # the matrix that ran this record
    out = []
    if entry.family:
        out.append({"what": "failure family", "text": entry.family})
    if kind in ("broke", "family-changed", "flaky"):
        out.append({"what": "a repro bundle", "command": f"python -m harness repro {matrix} '{cell}'"})
    return out


def host_limited(family: str) -> bool:
    """Whether an `unsupported` answer is the host's (`HOST_LIMITS`), not the release's."""
    return any(limit in (family or "") for limit in HOST_LIMITS)


def _wrapper(line: str, col: str, members: list[Row]) -> list[Change]:
    """A wrapper (or layer) the stack gains or loses: `unsupported` for the release's reason on one
    side only. One the host cannot run (multi_gpu_model on CPU devices) is there all the same: its
    removal at a later release (TF 2.4's) is a change of that release."""
    found, previous = [], None
    for row in members:
        entry = row.entries.get(col)
        if entry is None or entry.status == st.UNAVAILABLE:
            continue
        lacks = entry.status == st.UNSUPPORTED and not host_limited(entry.family)
        if previous is not None and lacks != previous[1]:
            detail = (f"{col}: no longer available ({entry.family})" if lacks
                      else f"{col}: available from this release (was: {previous[0].entries[col].family})")
            found.append(at(line, col, "wrapper", previous[0].key, row.key, detail))
        previous = (row, lacks)
    return found


def _shifts(line: str, col: str, members: list[Row], keyed: dict, seed: int) -> list[Change]:
    found: list[Change] = []
    for metric, kinds, effect in (("val_accuracy", ("accuracy", "accuracy"), 0.05),
                                  ("samples_per_sec", ("slower", "faster"), SPEED_EFFECT)):
        points = [ch.Point(_label(r), tuple(r.entries[col].values(metric))) for r in members
                  if col in r.entries and r.entries[col].values(metric)]
        for shift in ch.find_shifts(points, min_effect=effect, seed=seed):
            kind = kinds[0] if shift.ratio < 1 else kinds[1]
            word = "accuracy" if metric == "val_accuracy" else "samples/s"
            detail = (f"{col}: {word} x{shift.ratio:.2f} [{shift.low:.2f}-{shift.high:.2f}] "
                      f"(confidence {shift.confidence:.0%})")
            found.append(at(line, col, kind, keyed[shift.before].key, keyed[shift.after].key, detail,
                            size=round(shift.ratio, 4), low=shift.low, high=shift.high, confidence=shift.confidence,
                            runs=shift.runs, confirmed=False if metric != "val_accuracy" else None))
    return _without_blips(found, [r.key for r in members])


def _without_blips(found: list[Change], order: list[str]) -> list[Change]:
    """Speed shifts that undo each other at the next row (x0.5 then x2): one row measured while the
    host was busy, not two releases -- dropped, both. An accuracy shift is never a blip."""
    speed = [c for c in found if c.kind in ("slower", "faster")]
    blips = set()
    for a, b in zip(speed, speed[1:], strict=False):
        adjacent = order.index(b.after) == order.index(a.after) + 1
        if adjacent and a.kind != b.kind and 1 / BLIP <= (a.size or 1) * (b.size or 1) <= BLIP:
            blips |= {id(a), id(b)}
    return [c for c in found if id(c) not in blips]


def _devices(row: Row) -> list[Change]:
    """Two-device cells whose accuracy lies outside the row's one-device range (widened by
    FLOOR): `devices` when their median does, `devices-seed` when only some seeds do while the
    same seeds train within it on one device (the wrapper makes the training seed-sensitive, its
    median does not move); and two-device cells that trained on fewer devices than asked."""
    found = []
    for col, entry in row.entries.items():
        if col.endswith("-c1") or entry.status != st.OK:
            continue
        single = row.entries.get(f"{col.split(' ')[0]} none-c1")
        one, two = (single.spread("val_accuracy") if single else None), entry.spread("val_accuracy")
        if one and two:
            low, high = one[1] - FLOOR, one[2] + FLOOR
            outside = [r for r in entry.passed("val_accuracy") if not low <= float(r["val_accuracy"]) <= high]
            seeds, alone_seeds = len(entry.values("val_accuracy")), len(single.values("val_accuracy"))
            one_range = f"{one[1]:.3f}-{one[2]:.3f} ({alone_seeds} seeds)"
            if not low <= two[0] <= high:
                on_two = f"{two[0]:.3f}" if seeds == 1 else f"{two[0]:.3f} ({two[1]:.3f}-{two[2]:.3f}, {seeds} seeds)"
                found.append(at(row.line, col, "devices", None, row.key,
                                f"{col}: validation accuracy {on_two} on two devices, {one_range} on one",
                                size=round(two[0] - one[0], 4), runs=seeds + alone_seeds))
            elif outside:
                worst = max(outside, key=lambda r: abs(float(r["val_accuracy"]) - one[0]))
                alone = _same_seed(single, worst)
                found.append(at(
                    row.line, col, "devices-seed", None, row.key,
                    f"{col}: seed {worst['training_seed']} trains to {float(worst['val_accuracy']):.3f} on two "
                    "devices" + (f", {float(alone['val_accuracy']):.3f} on one" if alone else "")
                    + f"; {seeds - len(outside)} of its {seeds} seeds on two devices within one device's {one_range}",
                    size=round(float(worst["val_accuracy"]) - one[0], 4), runs=seeds + alone_seeds))
        trained = entry.devices_trained
        asked = int(entry.records[0]["devices"] or 1)
        if trained is not None and trained < asked:
            found.append(at(row.line, col, "devices", None, row.key,
                            f"{col}: trained on {trained} of the {asked} devices asked"))
    return found


def _same_seed(entry, record: dict) -> dict | None:
    """The record of `entry` trained from the same seed as `record`, if it trained."""
    return next((r for r in entry.passed("val_accuracy") if r["training_seed"] == record["training_seed"]), None)


def device_pair(row: Row, col: str) -> tuple[str, str]:
    """The cells a two-device finding compares, from the seed that parts most from one device:
    that two-device cell, and the one-device cell of the same seed (else the first repeat) --
    `diverge` follows them layer by layer. Only findings on cells that trained have a pair."""
    single, entry = row.entries[f"{col.split(' ')[0]} none-c1"], row.entries[col]
    centre = single.spread("val_accuracy")[0]
    worst = max(entry.passed("val_accuracy"), key=lambda r: abs(float(r["val_accuracy"]) - centre))
    alone = _same_seed(single, worst) or min(single.records, key=lambda r: int(r["repeat"] or 0))
    return alone["cell"], worst["cell"]
