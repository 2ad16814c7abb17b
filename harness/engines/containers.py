"""What every container of the harness shares: its label, its mounts, and who started it
(so a later run can tell a container whose harness died from one that is still in use)."""

from __future__ import annotations

import os

from harness.host.processes import boot_id, process_start

LABEL = "tfkeras-harness"
WORKLOADS_MOUNT = "/opt/harness"
OUT_MOUNT = "/out"


def owner_labels() -> dict[str, str]:
    """Who started a container: this host, this boot, this process and when it started."""
    return {f"{LABEL}.host": os.uname().nodename, f"{LABEL}.boot": boot_id() or "",
            f"{LABEL}.pid": str(os.getpid()), f"{LABEL}.pid-start": str(process_start(os.getpid()))}


def owner_is_dead(labels: dict) -> bool:
    """True only when the labels prove the harness that started the container is gone."""
    if labels.get(f"{LABEL}.host") != os.uname().nodename:
        return False
    pid, start, boot = labels.get(f"{LABEL}.pid", ""), labels.get(f"{LABEL}.pid-start", ""), labels.get(f"{LABEL}.boot")
    if not (pid.isdigit() and 1 < int(pid) < 1 << 22):
        return False  # not a pid this harness wrote: leave it
    if boot is not None and boot != boot_id():
        return bool(boot)  # started before a reboot: no process of that boot is alive
    if not _alive(int(pid)):
        return True
    # alive: the owner only if it started when recorded (labels from before this check: pid alone)
    return start.isdigit() and process_start(int(pid)) != int(start)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead(client) -> int:
    """Remove the harness's containers whose harness is provably dead: started on this host, and
    either before the last reboot or by a process that no longer runs (its pid gone, or reused by a
    process that started at another time). A container of another host, or with labels that do not
    say all this, is not ours to judge. Several harnesses starting at once on one host (the tasks of
    an array, parallel runs) find the same containers: one that another removes meanwhile is gone
    all the same, never a failure of this one."""
    import docker.errors  # optional dependency: the docker SDK, only with --engine docker
    removed = 0
    # sparse: the labels come with the list itself; without it the client inspects each container
    # after listing it, and one removed meanwhile raised NotFound there
    for container in client.containers.list(all=True, sparse=True, filters={"label": LABEL}):
        if not owner_is_dead(container.attrs.get("Labels") or {}):
            continue
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: its removal is already in progress elsewhere
                raise
            continue
        removed += 1
    return removed
