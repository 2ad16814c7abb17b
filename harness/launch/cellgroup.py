"""A cell's processes as one set: counted, measured and ended with the cell.

Two parts, used together on the process engines (venv, local):

- **the subreaper** (workloads/reaper.py) sits between the harness and the cell on every
  engine (inside the container on Docker): orphans of the cell become its children, whatever
  session they moved to, and when the cell's main process ends it ends them (SIGTERM, a grace,
  SIGKILL) and writes what it ended to the cell folder (REAPED_FILE). It needs nothing of the
  host but Linux.
- **a cgroup v2 per cell**, where this process's own cgroup v2 (found from /proc/self/cgroup
  and /proc/mounts) is one it may make folders in. A cgroup holds every descendant, even one
  whose parent chain is broken, and can kill them all at once (cgroup.kill): the harness uses
  it for a cell it gives up (timeout, hang, Ctrl-C), to check that nothing is left after the
  subreaper, to end a killed run's leftovers at the next start, and -- where the memory
  controller is enabled for it -- for the cell's peak memory and OOM kills. Where no cgroup can
  be made the reason is recorded, and the memory figures say `unavailable` with it.

A cgroup with processes in it cannot give controllers to its children (cgroup v2's "no internal
processes" rule), so where the memory controller is delegated to the harness's cgroup but not yet
enabled below it, the harness does what systemd asks of a delegated tree's owner: it moves itself
into a leaf of its own (`harness-main-...`) and enables `memory` for its cells -- only when it is
alone in its cgroup, so it never moves another program's process (run it alone in a delegated
cgroup, e.g. `systemd-run --user --scope -p Delegate=yes harness run ...`, to get the figures).

`HARNESS_CGROUP=off` turns the cgroup off (the subreaper still runs).
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import threading
import time
from pathlib import Path

from harness.host.processes import process_start
from harness.workloads.protocol import LEFTOVER_GRACE, REAPED_FILE  # noqa: F401 - engines read them here

CGROUP_VARIABLE = "HARNESS_CGROUP"
PREFIX = "harness-cell-"
MAIN_PREFIX = "harness-main-"  # the leaf the harness moves into to give its cells controllers
_NAME = re.compile(rf"^(?:{PREFIX}|{MAIN_PREFIX})(\d+)-(\d+)-\d+$")  # pid, its start time, a counter
_counter = itertools.count()
_lock = threading.Lock()
_base: tuple[Path | None, str | None] | None = None
_memory_note: str | None = None  # why the memory controller could not be enabled below _base


def _unescape(field: str) -> str:
    """A path as /proc/mounts writes it (space, tab, newline and backslash as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def own_cgroup() -> tuple[Path | None, str | None]:
    """This process's cgroup v2 folder, or None and why not (said in every result)."""
    if os.environ.get(CGROUP_VARIABLE, "").lower() in ("off", "0", "no"):
        return None, f"turned off ({CGROUP_VARIABLE}=off)"
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read this process's cgroups ({exc.strerror})"
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    if rel is None:
        return None, "this host has no cgroup v2 hierarchy for this process (cgroup v1 only)"
    for mount in mounts:
        parts = mount.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            folder = Path(_unescape(parts[1])) / rel.lstrip("/")
            if (folder / "cgroup.procs").is_file():
                if not os.access(folder, os.W_OK):
                    return None, f"the cgroup v2 folder {folder} is not writable by this user (not delegated)"
                return folder, None
    return None, f"this process's cgroup v2 ({rel}) is not mounted where it can be seen"


def base() -> tuple[Path | None, str | None]:
    """own_cgroup(), once per process; the first call also ends what killed runs left and gives
    the cells the memory controller where it may (delegate_memory)."""
    global _base, _memory_note
    with _lock:
        if _base is None:
            _base = own_cgroup()
            if _base[0] is not None:
                clean_stale(_base[0])
                _memory_note = delegate_memory(_base[0])
        return _base


def delegate_memory(folder: Path) -> str | None:
    """Enable the memory controller for the cell cgroups made below `folder`, this process's own
    cgroup. A cgroup holding processes cannot enable a controller for its children, so this
    process first moves into a leaf of its own -- only when it is alone in `folder`. Returns why it
    could not, or None (enabled, already enabled, or not offered here: memory() says which)."""
    me = os.getpid()
    try:
        if "memory" in (folder / "cgroup.subtree_control").read_text().split():
            return None
        if "memory" not in (folder / "cgroup.controllers").read_text().split():
            return None
        others = [pid for pid in (folder / "cgroup.procs").read_text().split() if int(pid) != me]
    except OSError as exc:
        return f"cannot read {folder} ({exc.strerror})"
    if others:
        return (f"{len(others)} other process(es) share the harness's cgroup {folder}, and a cgroup with "
                "processes cannot enable the memory controller for its children: run the harness alone "
                "in a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes) for the figures")
    leaf = folder / _name(MAIN_PREFIX)
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(me))
        (folder / "cgroup.subtree_control").write_text("+memory")
    except OSError as exc:
        try:  # back where it was (nothing was enabled), and the leaf gone
            (folder / "cgroup.procs").write_text(str(me))
        except OSError:
            pass
        CellGroup(leaf).remove()
        return f"cannot enable the memory controller below {folder} ({exc.strerror})"
    return None


def _name(prefix: str) -> str:
    """A folder name clean_stale can tell the owner of: this process's pid and start time, and a
    counter (one process makes many cell cgroups)."""
    me = os.getpid()
    return f"{prefix}{me}-{process_start(me) or 0}-{next(_counter)}"


def clean_stale(folder: Path) -> int:
    """End and remove the cell cgroups of harness processes that are gone (killed with -9:
    their subreapers died with them, their cells' daemons did not), and the leaves those
    harnesses moved into (delegate_memory). Returns how many."""
    removed = 0
    for child in folder.glob("*"):  # _NAME picks ours
        found = _NAME.match(child.name)
        if not found or process_start(int(found.group(1))) == int(found.group(2)):
            continue  # not ours, or its harness is alive
        group = CellGroup(child)
        group.kill()
        removed += group.remove()
    return removed


def _describe(pid: int) -> dict:
    out = {"pid": pid, "name": None, "argv": None}
    try:
        out["name"] = Path(f"/proc/{pid}/comm").read_text(errors="replace").strip()
        out["argv"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()[:200]
    except OSError:
        pass
    return out


class CellGroup:
    """One cell's cgroup (or none, with the reason)."""

    def __init__(self, path: Path | None, why_not: str | None = None):
        self.path = path
        self.why_not = why_not
        self._fd: int | None = None

    @classmethod
    def make(cls) -> CellGroup:
        folder, why = base()
        if folder is None:
            return cls(None, why)
        path = folder / _name(PREFIX)
        try:
            path.mkdir()
            group = cls(path)
            group._fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            if path.is_dir():
                cls(path).remove()
            return cls(None, f"cannot make a cgroup under {folder} ({exc.strerror})")
        return group

    @property
    def procs_file(self) -> str | None:
        return str(self.path / "cgroup.procs") if self.path else None

    def join(self) -> None:
        """In the cell's first process, before exec (preexec_fn): move it into the cgroup, so
        all it starts is born there. Async-signal-safe: one write on an open descriptor."""
        if self._fd is not None:
            try:
                os.write(self._fd, b"0")
            except OSError:
                pass  # the host checks `holds` and says so

    def confirm(self, pid: int) -> None:
        """After the cell's first process started: if `join` did not move it (a cgroup this
        user may make but not enter), there is no cgroup for this cell, and the reason says so."""
        if self.path is not None and not self.holds(pid) and Path(f"/proc/{pid}").exists():
            where = self.path
            self.remove()
            self.path, self.why_not = None, f"the cell could not be moved into {where}"

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def holds(self, pid: int) -> bool:
        return pid in self.pids()

    def kill(self) -> list[dict]:
        """SIGKILL every process in the cgroup at once (cgroup.kill; one by one on kernels before
        5.14), and wait until it is empty. Returns what was there."""
        found = [_describe(pid) for pid in self.pids()]
        if not found:
            return []
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        return found

    def memory(self) -> dict:
        """The cell's peak memory and OOM kills, from the cgroup; `unavailable` with the reason."""
        if self.path is None:
            return {"unavailable": f"no cgroup for the cell: {self.why_not}"}
        peak, events = self.path / "memory.peak", self.path / "memory.events"
        if not events.is_file():
            why = f"; {_memory_note}" if _memory_note else _v1_memory()
            return {"unavailable": "the memory controller is not enabled for this cgroup "
                                   f"({self.path.parent}/cgroup.subtree_control lacks it{why})"}
        out: dict = {"source": "cgroup v2"}
        try:
            counts = dict(line.split() for line in events.read_text().splitlines() if line.strip())
            out["oom_kills"] = int(counts.get("oom_kill", 0))
            out["peak_bytes"] = int(peak.read_text()) if peak.is_file() else None
            if not peak.is_file():
                out["peak_unavailable"] = "memory.peak needs Linux 5.19"
        except (OSError, ValueError) as exc:
            return {"unavailable": f"cannot read {events}: {exc}"}
        return out

    def remove(self) -> int:
        """Remove the (empty) cgroup folder; 1 when removed."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.path is None:
            return 0
        for _ in range(50):
            try:
                self.path.rmdir()
                return 1
            except FileNotFoundError:
                return 0
            except OSError:  # busy for a moment after its last process ended
                time.sleep(0.02)
        return 0


def _v1_memory() -> str:
    try:
        if any(":memory:" in line for line in Path("/proc/self/cgroup").read_text().splitlines()):
            return "; this host binds the memory controller to a cgroup v1 hierarchy"
    except OSError:
        pass
    return ""


def leftovers(reaped: dict | None, after: list[dict], group: CellGroup | None, *, how: str,
              by: str = "cgroup") -> dict:
    """result.json's exit.leftovers: what the cell left running when its main process ended, and
    how each was ended. `reaped`: the subreaper's report (None if it wrote none: it was given up
    or killed); `after`: what the cgroup (or, `by`, a container launcher's sweep) still held after
    it (killed at once)."""
    reaped = reaped or {}
    processes = list(reaped.get("processes") or []) + [{**p, "signal": "SIGKILL", "by": by} for p in after]
    names = sorted({p.get("name") or "?" for p in processes})
    out = {"count": len(processes), "names": names, "processes": processes,
           "grace_seconds": reaped.get("grace_seconds", LEFTOVER_GRACE), "how": how}
    if group is not None:
        out["cgroup"] = str(group.path) if group.path else f"unavailable: {group.why_not}"
    if not reaped:
        out["subreaper"] = "no report: the cell was given up (its processes were killed at once)"
    if reaped.get("survivors"):
        out["survivors"] = reaped["survivors"]
    if processes:
        by_kill = sum(1 for p in processes if p.get("signal") == "SIGKILL")
        out["note"] = (f"the cell left {len(processes)} process(es) running ({', '.join(names)}); "
                       f"all ended with it ({len(processes) - by_kill} by SIGTERM, {by_kill} by SIGKILL)")
    return out
