"""Which process is which on this machine: a process id means one process only within one boot and
from one start time on, so an owner is named by the three (boot id, pid, start time) wherever the
harness records one -- the results store's owners, its leftover containers, its cells' groups."""

from __future__ import annotations

from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot of this machine: process ids and start times mean something only within one."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 on (the command name, field 2, may hold spaces and ')')."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat): with
    the boot id, what tells this process from a later one given the same number."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None
