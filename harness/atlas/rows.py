"""The atlas as a table: a row per stack (a matrix's environment), a column per workload and
device count, each entry the repeats of one cell taken together.

A row's versions are what its cells' processes saw; a cell decided without launching has none,
so the row takes them from its launched cells (a row none of whose cells launched keeps the
environment's name). Rows belong to a **line**: the releases a user moves along without changing
how they write Keras -- TensorFlow with its Keras 2 (standalone Keras 2.2 beside TF 1.9-1.12,
tf.keras from 1.13, tf-keras from 2.16), Keras 3 on TensorFlow, Keras 3 on JAX. Neighbours on
a line are what `changes` compares.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from harness import status as st

LINES = {
    "keras2": "TensorFlow with its Keras 2 (standalone Keras, tf.keras, tf-keras)",
    "keras3-tensorflow": "Keras 3 on TensorFlow",
    "keras3-jax": "Keras 3 on JAX",
    "keras3-torch": "Keras 3 on PyTorch",
    "keras3-tensorflow-numpy1": "Keras 3 on TensorFlow, NumPy 1 kept",
    "keras3-jax-numpy1": "Keras 3 on JAX, NumPy 1 kept",
}
# Matrices whose rows are a variant of a line, not its next releases: their rows form a line of
# their own (suffix), each set beside its twin on the plain line (`changes`: the boundary)
VARIANTS = {"atlas-numpy1": "numpy1"}
# Columns in the seeds' order: the recurrent classifiers, the convnet, then the cuDNN layers
MODELS = ("gru", "lstm", "convnet", "cudnn_gru", "cudnn_lstm")
PINS = ("python", "tensorflow", "keras", "keras_api", "backend", "numpy", "jax", "torch")  # what a stack is
STACK_FIELDS = (*PINS, "cutoff", "matrix_file")


@dataclass
class Entry:
    """One cell's repeats: their statuses, accuracies and speeds."""
    records: list = field(default_factory=list)

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(r["status"] for r in self.records)

    @property
    def status(self) -> str:
        """The repeats' status when they agree; "flaky" when some passed and some failed."""
        found = set(self.statuses)
        if len(found) == 1:
            return found.pop()
        ran = found - set(st.NOT_RUN)
        return "flaky" if st.OK in ran and len(ran) > 1 else sorted(ran or found)[0]

    @property
    def family(self) -> str:
        failed = [r["family"] for r in self.records if r["status"] != st.OK and r["family"]]
        return statistics.mode(failed) if failed else ""

    def passed(self, key: str) -> list[dict]:
        """The repeats that passed and gave `key`."""
        return [r for r in self.records if r["status"] == st.OK and r[key] not in ("", None)]

    def values(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.passed(key)]

    def spread(self, key: str) -> tuple[float, float, float] | None:
        """(median, min, max) of the repeats that passed, None when none did."""
        vals = self.values(key)
        return (statistics.median(vals), min(vals), max(vals)) if vals else None

    @property
    def chance(self) -> float | None:
        return next((float(r["chance"]) for r in self.records if r["chance"] not in ("", None)), None)

    @property
    def matrix(self) -> str:
        """The matrix (its name: its results folder) that ran the entry's first record."""
        return self.records[0]["matrix"]

    @property
    def origin(self) -> tuple[str, str]:
        """(matrix file, environment) that ran the entry's first record: what a command that runs
        the cell again names (a row two matrices measured holds entries of either)."""
        r = self.records[0]
        return r.get("matrix_file") or f"{r['matrix']}.yaml", r["environment"]

    @property
    def devices_trained(self) -> int | None:
        got = [int(r["devices_trained"]) for r in self.records if r["devices_trained"] not in ("", None)]
        return min(got) if got else None


@dataclass
class Row:
    matrix: str
    environment: str
    stack: dict
    entries: dict = field(default_factory=dict)   # column -> Entry

    @property
    def key(self) -> str:
        return f"{self.matrix}/{self.environment}"

    @property
    def pins(self) -> tuple:
        """What the stack is -- its versions as its cells saw them -- without where it was measured
        (the matrix, its cut-off): two matrices that measured one stack have the same pins."""
        return tuple((k, self.stack.get(k) or "") for k in PINS)

    @property
    def slug(self) -> str:
        return slug(self.matrix, self.environment)

    @property
    def matrix_file(self) -> str:
        """The matrix file as the run named it (relative to where it ran: the checkout)."""
        return self.stack.get("matrix_file") or f"{self.matrix}.yaml"

    @property
    def origins(self) -> list[tuple[str, str]]:
        """Every (matrix file, environment) that measured the row, its own first."""
        return list(dict.fromkeys([(self.matrix_file, self.environment),
                                   *(e.origin for e in self.entries.values())]))

    @property
    def line(self) -> str:
        keras = self.stack.get("keras") or ""
        base = f"keras3-{self.stack.get('backend') or 'tensorflow'}" if keras.startswith("3.") else "keras2"
        return f"{base}-{VARIANTS[self.matrix]}" if self.matrix in VARIANTS else base

    @property
    def base_line(self) -> str:
        """The line without its variant: where the row's twin is."""
        suffix = VARIANTS.get(self.matrix)
        return self.line.removesuffix(f"-{suffix}") if suffix else self.line

    @property
    def label(self) -> str:
        """How a reader names the stack: "TF 2.16.2 + Keras 3.4.1", "Keras 3.5.0 on JAX 0.4.31"."""
        s = self.stack
        keras = s.get("keras") or "?"
        numpy = f", NumPy {s.get('numpy')}" if self.matrix in VARIANTS else ""
        if self.base_line == "keras3-jax":
            return f"Keras {keras} on JAX {s.get('jax') or '?'}{numpy}"
        if self.base_line == "keras3-torch":
            return f"Keras {keras} on PyTorch {s.get('torch') or '?'}{numpy}"
        tf = s.get("tensorflow") or "?"
        if s.get("keras_api") in ("tf.keras", "tf_keras") or keras.endswith("-tf"):
            return f"TF {tf} ({'tf-keras' if s.get('keras_api') == 'tf_keras' else 'tf.keras'} {keras}){numpy}"
        return f"TF {tf} + Keras {keras}{numpy}" if s.get("keras") else f"TF {tf}{numpy}"

    def order(self) -> tuple:
        """Release order on the row's line: Keras 3 lines by Keras then TensorFlow, the Keras 2
        line by TensorFlow then Keras."""
        tf, keras = _version(self.stack.get("tensorflow")), _version(self.stack.get("keras"))
        return (keras, tf, self.matrix) if self.line.startswith("keras3") else (tf, keras, self.matrix)


def twins(variant: Row, plain: Row) -> bool:
    """Whether `plain` is the variant row's twin (NumPy 1 kept against NumPy 2): on the variant's
    plain line, with the same TensorFlow and Keras."""
    return (plain.line == variant.base_line and plain.stack.get("tensorflow") == variant.stack.get("tensorflow")
            and plain.stack.get("keras") == variant.stack.get("keras"))


def slug(matrix: str, environment: str) -> str:
    """The name of a row's page (``rows/SLUG.md``) and plot."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{matrix}-{environment}")


def parse_version(text) -> Version | None:
    """A release as the records spell it ("2.2.4-tf" for a tf.keras, "2.5.1+cpu"), or None where
    none is named or it is no version."""
    try:
        return Version(str(text).split("+")[0].removesuffix("-tf")) if text not in ("", None) else None
    except (InvalidVersion, ValueError):
        return None


def _version(text) -> Version:
    return parse_version(text) or Version("0")


def released_package(line: str, before: dict, after: dict) -> str | None:
    """The package whose release a change between two rows is: on a Keras 3 line Keras first, else
    TensorFlow first -- the first of the two whose version moved (a tf.keras's own version, "-tf",
    moves with its TensorFlow and is not one). None when neither moved."""
    order = ("keras", "tensorflow") if line.startswith("keras3") else ("tensorflow", "keras")
    moved = [p for p in order if before.get(p) and after.get(p)
             and before[p] != after[p] and not str(after[p]).endswith("-tf")]
    return moved[0] if moved else None


MOVED_WITH = ("python", "tensorflow", "keras", "numpy", "jax", "torch")  # what a change names when it moved


def moved_besides(line: str, before: dict, after: dict) -> list[tuple[str, str, str]]:
    """(package, before, after) for every package that moved between two rows besides the release
    a change between them is published as (`released_package`); a tf.keras or tf-keras moves with
    its TensorFlow and is not named again. What a reader needs to know the change is not that
    release's alone."""
    primary = released_package(line, before, after)
    bundled = after.get("keras_api") in ("tf.keras", "tf_keras")
    return [(k, before.get(k) or "", after.get(k) or "") for k in MOVED_WITH
            if (before.get(k) or "") != (after.get(k) or "") and k != primary and not (k == "keras" and bundled)]


def column(record: dict) -> str:
    """A column: the workload and the parallelism as the cell id spells it ("gru-2x32 make_parallel-c2")."""
    parts = record["cell"].split("/")
    return f"{record['workload']} {parts[2] if len(parts) > 2 else record['wrapper']}"


def build(records: list[dict]) -> list[Row]:
    """The rows, in line order and release order within each line."""
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in records:
        grouped[(r["matrix"], r["environment"])].append(r)
    rows = []
    for (matrix, env), recs in grouped.items():
        launched = [r for r in recs if r["keras"] or r["tensorflow"]]
        stack = {k: _most_common([r[k] for r in (launched or recs)]) for k in STACK_FIELDS}
        row = Row(matrix, env, stack)
        for r in sorted(recs, key=lambda r: (r["workload"], r["devices"], r["cell"])):
            row.entries.setdefault(column(r), Entry()).records.append(r)
        rows.append(row)
    rows = _one_per_stack(rows)
    line_order = list(LINES)
    return sorted(rows, key=lambda r: (line_order.index(r.line) if r.line in line_order else 99, r.order()))


def _one_per_stack(found: list[Row]) -> list[Row]:
    """A stack that two matrices measured is one row to a reader: the smaller matrix's records join
    the row of the matrix that measured most of it (its own page and key stay where a reader found
    them when a variant's columns are added), as more columns or more repeats (each record keeps its
    own matrix and cell id, so a repro command still names the matrix that ran it). A row none of
    whose cells launched has no versions, and is never taken for another."""
    first: dict[tuple, Row] = {}
    out = []
    for row in sorted(found, key=lambda r: (-sum(len(e.records) for e in r.entries.values()), r.key)):
        kept = first.get(row.pins) if (row.stack.get("tensorflow") or row.stack.get("keras")) else None
        if kept is None:
            first[row.pins] = row
            out.append(row)
            continue
        for col, entry in row.entries.items():
            kept.entries.setdefault(col, Entry()).records.extend(entry.records)
    return out


def _most_common(values: list) -> str:
    present = [v for v in values if v not in ("", None)]
    return str(statistics.mode(present)) if present else ""


def columns(rows: list[Row]) -> list[str]:
    """Every column: workloads in the seeds' order (`MODELS`), one device before two."""
    seen: dict[str, tuple] = {}
    for row in rows:
        for name, entry in row.entries.items():
            r = entry.records[0]
            kind = MODELS.index(r["model"]) if r["model"] in MODELS else len(MODELS)
            seen.setdefault(name, (kind, r["workload"], int(r["devices"] or 1), r["wrapper"] != "none", name))
    return sorted(seen, key=lambda c: seen[c])


def lines(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        out[row.line].append(row)
    return dict(out)


def out_of_order(rows: list[Row]) -> list[tuple[str, Row, Row]]:
    """(line, row, next row) wherever a line's next release is resolved as of an earlier day than
    the release before it. Each row is resolved as of its release's day (its cut-off), so a line in
    release order need not be in day order: a patch of an older minor can come out after the next
    minor, and its contemporaries are then newer than the next row's. A change between such
    neighbours may be the contemporaries' as much as the release's; the page says which they are."""
    out = []
    for line, found in lines(sorted(rows, key=Row.order)).items():
        for a, b in zip(found, found[1:], strict=False):
            day_a, day_b = (a.stack.get("cutoff") or "")[:10], (b.stack.get("cutoff") or "")[:10]
            if day_a and day_b and day_b < day_a:
                out.append((line, a, b))
    return out
