"""What a cell run left behind, read once into one typed object.

The cell's process writes its evidence into its folder (events.jsonl,
workload.json, stdout.log, stderr.log); the engine hands back what it saw
from outside (`RawOutcome`); the host adds what it measured (GPU utilisation,
when the process was spawned). Classifying the outcome and assembling
result.json both read this one object, so the files are read exactly once and
the two cannot see different things.

Open for more: a feature that brings new evidence adds an optional field
here (default None) and reads it in `record.assemble`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.files.paths import read_json
from harness.host.supervise import RawOutcome
from harness.workloads.protocol import EVENTS_FILE, STDERR_FILE, STDOUT_FILE, WORKLOAD_FILE

TAIL_CHARS = 4000


def read_events(path: Path) -> list[dict]:
    """The event log's records; a line cut by a crash (or not an object) is skipped."""
    events = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash
        if isinstance(event, dict):
            events.append(event)
    return events


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@dataclass
class Evidence:
    """Everything known about one run of a cell, for the verdict and the result."""

    events: list[dict] = field(default_factory=list)
    workload: dict | None = None        # workload.json: None when the process died before writing it
    stdout_tail: str = ""
    stderr_tail: str = ""
    raw: RawOutcome | None = None       # None when no process ran (unsupported, unavailable, a Slurm kill)
    utilisation: dict | None = None     # NVML samples of the cell's GPUs over its steady epochs
    spawned: float | None = None        # host clock when the process was started
    runner_seconds: float | None = None  # the host's whole time for the cell
    extra: dict = field(default_factory=dict)  # anything else a feature records; merged into the result

    @classmethod
    def read(cls, folder: Path, raw: RawOutcome | None = None, **known) -> Evidence:
        """Read a cell folder's files once. A workload.json that is not an object is no evidence."""
        workload = read_json(folder / WORKLOAD_FILE)
        return cls(events=read_events(folder / EVENTS_FILE),
                   workload=workload if isinstance(workload, dict) else None,
                   stdout_tail=tail(folder / STDOUT_FILE), stderr_tail=tail(folder / STDERR_FILE),
                   raw=raw, **known)

    @property
    def last_event(self) -> dict | None:
        return self.events[-1] if self.events else None

    @property
    def epochs_seen(self) -> list[dict]:
        return [e for e in self.events if e.get("event") == "epoch"]
