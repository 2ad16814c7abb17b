"""The atlas's compact data: one record per cell, the only thing of a run the repository keeps.

A result folder holds logs, per-epoch curves and every provenance detail, megabytes per
hundred cells; the atlas keeps, per cell, what its pages and its lookup read: the stack as
it ran (``seen``, else as asked), the status and failure family, the validation accuracy
beside its chance level, the steady samples/s with its spread across epochs, the evidence that
every device asked for trained, and how the cell was obtained (cut-off, engine, host, harness
commit, day). The fields are ``FIELDS`` in this order, documented in
docs/reference/atlas-data.md; ``SCHEMA`` changes whenever a field's meaning does (a reader
refuses a schema it does not know: `read`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from harness.errors import UserError
from harness.files.paths import read_json
from harness.results.result import Result
from harness.results.store import SPEC, read_all

SCHEMA = 3
READS = (2, 3)  # schema 3 added `layer_args` at the end; a schema-2 file reads with it empty
FIELDS = (
    "schema", "matrix", "matrix_file", "environment", "cell", "workload", "model", "wrapper", "devices", "repeat",
    "training_seed", "status", "family",
    "python", "tensorflow", "keras", "keras_api", "backend", "numpy", "jax", "torch",
    "val_accuracy", "chance", "epochs", "samples_per_sec", "samples_per_sec_min", "samples_per_sec_max",
    "devices_trained", "cutoff", "engine", "host", "harness_commit", "day", "layer_args",
)
ARCHES = ("x86_64", "aarch64", "arm64", "ppc64le", "s390x")
NUMBERS = {"devices": int, "repeat": int, "training_seed": int, "epochs": int, "devices_trained": int,
           "val_accuracy": float, "chance": float, "samples_per_sec": float,
           "samples_per_sec_min": float, "samples_per_sec_max": float, "schema": int}


def record(folder: Path, result: Result, matrix: str) -> dict:
    """One cell's record. The stack is what the process saw; a cell decided without launching
    (`unsupported` by the matrix alone, `unavailable`) has none, and gets the versions its
    environment asked for, which `rows` completes from its launched neighbours."""
    spec = read_json(folder / SPEC) or {}
    seen = result.seen or {}
    prov = result.provenance or {}
    workload = spec.get("workload") or {}
    par = result.parallelism or {}
    timing = result.timing or {}
    spread = timing.get("steady_samples_per_sec_spread") or {}
    engagement = result.engagement or {}
    host = prov.get("host") or {}
    cpus = (prov.get("host_resources") or {}).get("cpus")
    accuracy = (result.metrics or {}).get("val_accuracy")
    classes = workload.get("classes")
    epochs = result.epochs
    return {
        "schema": SCHEMA,
        "matrix": matrix,
        "matrix_file": prov.get("matrix") or "",
        "environment": result.environment,
        "cell": result.cell,
        "workload": result.workload,
        "model": workload.get("cell") or workload.get("model") or "",
        "wrapper": par.get("wrapper") or "",
        "devices": par.get("devices") or 1,
        "repeat": result.repeat,
        "training_seed": spec.get("training_seed", spec.get("seed", "")),
        "status": result.status,
        "family": result.failure_text if result.status != "ok" else "",
        "python": seen.get("python") or prov.get("python") or "",
        "tensorflow": seen.get("tensorflow") or "",
        "keras": seen.get("keras") or "",
        "keras_api": seen.get("keras_api") or "",
        "backend": seen.get("backend") or "",
        "numpy": seen.get("numpy") or "",
        "jax": seen.get("jax") or "",
        "torch": seen.get("torch") or "",
        "val_accuracy": round(accuracy, 4) if isinstance(accuracy, (int, float)) else "",
        "chance": round(1.0 / classes, 4) if isinstance(classes, int) and classes > 0 else "",
        "epochs": len(epochs) if isinstance(epochs, list) and epochs else "",
        "samples_per_sec": _rounded(timing.get("steady_samples_per_sec")),
        "samples_per_sec_min": _rounded(spread.get("min")),
        "samples_per_sec_max": _rounded(spread.get("max")),
        "devices_trained": engagement.get("ran_on", "") if isinstance(engagement, dict) else "",
        "cutoff": (prov.get("cutoff") or {}).get("uploaded_before") or "",
        "engine": result.engine or "",
        "host": _host(cpus, host.get("platform") or ""),
        "harness_commit": (prov.get("harness_commit") or "")[:12],
        "day": (result.started or "")[:10],
        "layer_args": pinned_args(workload.get("layer_args")),
    }


def pinned_args(args) -> str:
    """The recurrent layers' arguments a cell's workload pinned, as one canonical JSON text
    (sorted keys; "" when none): the cell built its layers with exactly these (`models.rnn`)."""
    return json.dumps(args, sort_keys=True, separators=(",", ":")) if args else ""


def layer_args(record: dict) -> dict:
    """A record's pinned layer arguments back as a dict ({} when none)."""
    text = record.get("layer_args") or ""
    return json.loads(text) if text else {}


def _host(cpus, platform: str) -> str:
    """The host as a reader compares hosts -- its CPU count, system and architecture ("2 CPUs,
    Linux x86_64") -- never its name or kernel build."""
    arch = next((a for a in ARCHES if a in platform), "")
    what = " ".join(x for x in (platform.split("-")[0], arch) if x)
    return ", ".join(x for x in (f"{cpus} CPUs" if cpus else "", what) if x)


def _rounded(value) -> float | str:
    return round(float(value), 1) if isinstance(value, (int, float)) else ""


REPEAT = re.compile(r"/r\d+$")  # a cell id's repeat: what is left is the cell


def cell_of(record: dict) -> str:
    """The cell a record is a run of: its id without the repeat (a repeat is not another cell)."""
    return REPEAT.sub("", record["cell"])


def collect(results: Path, notes=None) -> list[dict]:
    """Every cell's record below a results folder (one matrix per sub-folder, as `run` writes
    them), in a stable order: matrix, then cell id."""
    out = []
    for folder, result in read_all([results], notes):
        matrix = folder.relative_to(results).parts[0] if folder.is_relative_to(results) else ""
        out.append(record(folder, result, matrix))
    return sorted(out, key=lambda r: (r["matrix"], r["cell"]))


def to_csv(records: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buf.getvalue()


def to_json(records: list[dict], about: dict) -> str:
    """The JSON file: ``{"schema", "fields", "about", "records"}``; `about` says how the data was
    obtained (the page's "How it was obtained" reads it)."""
    head = json.dumps({"schema": SCHEMA, "fields": list(FIELDS), "about": about})[:-1]
    body = ",\n".join(json.dumps(r) for r in records)  # a record a line: a new run's diff reads per cell
    return f'{head}, "records": [\n{body}\n]}}\n'


def read(path: Path) -> tuple[list[dict], dict]:
    """The records and `about` of an atlas JSON file; a file of another schema, or not an atlas
    file at all, is the user's error (exit 2, the file named)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable atlas data file ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("schema") not in READS or not isinstance(data.get("records"), list):
        found = data.get("schema") if isinstance(data, dict) else None
        raise UserError(f"{path}: atlas data of schema {found!r}; this harness reads schema "
                        f"{' or '.join(map(str, READS))}")
    records = [r for r in data["records"] if isinstance(r, dict)]
    return [{k: r.get(k, "") for k in FIELDS} for r in records], data.get("about") or {}


def from_csv(text: str) -> list[dict]:
    """Records back from the CSV (numbers as numbers, blanks as "")."""
    out = []
    for row in csv.DictReader(io.StringIO(text)):
        out.append({k: (NUMBERS[k](row[k]) if k in NUMBERS and row.get(k) not in ("", None) else row.get(k, ""))
                    for k in FIELDS})
    return out
