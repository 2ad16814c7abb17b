"""Warm cells in containers: a launcher container per environment and slot, a forked cell at a time.

A fresh Docker cell pays a new container, a new interpreter and the framework's import. A warm
one forks from ``workloads/forkserver.py`` running in a *launcher container*: made from the same
image with the same hardening, no network, the same user, the same read-only workloads, caches
and devices, and the same variables a fresh cell's container gets (a launcher is keyed by all
of them, and by its slot: its cores or its GPUs, which are the container's).

Why one launcher container per slot, serving one cell at a time: a container's mounts,
devices, cgroup and PID namespace are fixed when it starts. With only one cell in it at once,
the container *is* that cell's, as a fresh one would be:

- **its folder**: the launcher's ``/out`` is a staging folder of the host; the cell's files are
  copied in before it forks and moved into the cell's folder when it ends, so the cell sees at
  ``/out`` exactly what a fresh cell sees, and nothing of another cell's;
- **its processes**: the cell's subreaper ends what it leaves running, and after each cell the
  launcher ends every process of the container but its own (what a fresh container's end would
  kill), and empties ``/tmp`` of what the cell added;
- **its memory and OOM kills**: the container's memory limit is the one a fresh cell's container
  gets; the engine's OOM flag turning on during the cell is that cell's OOM kill, and a container
  whose flag is on is retired, so the next cell's flag starts clean;
- **timeouts and kills**: the host's lifecycle gives the cell up through its launcher (the
  subreaper's SIGTERM ends all below it); a launcher that does not answer is killed with its
  container.

What cannot be kept forked runs fresh and its result says why (``DockerEngine.fresh_because``):
a script (its own ``__main__``), a matrix memory limit (the container's limit would be shared
with the launcher's own memory), a chain's producer files (mounted read-only into a container of
the cell's own). The host's lifecycle alone writes the result, as for every cell.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from harness.engines.base import BACKSTOP_GRACE, read_reaped
from harness.engines.containers import LABEL, OUT_MOUNT, WORKLOADS_MOUNT, owner_labels
from harness.host import beside
from harness.host.supervise import RawOutcome, waiting_on, watch
from harness.launch.cellenv import hardening
from harness.launch.cellgroup import leftovers
from harness.launch.confinement import container
from harness.launch.warmserver import READY_SECONDS, ServerBase, WarmChild
from harness.status.outcome import signal_name
from harness.workloads.protocol import (
    ENV_LAUNCH,
    EVENTS_FILE,
    LEFTOVER_GRACE,
    REAPED_FILE,
    SPEC_FILE,
    STDERR_FILE,
    STDOUT_FILE,
)

LAUNCH_MOUNT = "/launch"   # the launcher's socket and preload file (a private host folder)
SCRATCH = ("/tmp",)        # what a cell may leave in the container: emptied after each cell


class ContainerServer(ServerBase):
    """One warm launcher in a container of its own (see the module's docstring), with the face
    the Launcher knows (launch.ServerBase): settled / ready / refused / kept, spawn, start_cell,
    alive, close."""

    def __init__(self, image: str, env: dict[str, str], preload: dict, workloads: Path, log: Path,
                 cpus=(), name: str = "", where: dict | None = None, *, engine):
        from docker.types import DeviceRequest  # optional dependency: the docker SDK, only with --engine docker
        where = where or {}
        super().__init__({**preload, "tenant": True, "scratch": list(SCRATCH)}, log)
        self.stage = Path(tempfile.mkdtemp(prefix="harness-stage-"))
        kwargs: dict = {}
        if cpus:
            kwargs["cpuset_cpus"] = ",".join(str(c) for c in sorted(cpus))
        if where.get("gpus"):
            kwargs["device_requests"] = [DeviceRequest(device_ids=list(where["gpus"]), capabilities=[["gpu"]])]
        if where.get("memory"):
            kwargs["mem_limit"] = kwargs["memswap_limit"] = where["memory"]
        volumes = {str(workloads): {"bind": WORKLOADS_MOUNT, "mode": "ro"},
                   str(self.folder): {"bind": LAUNCH_MOUNT, "mode": "rw"},
                   str(self.stage): {"bind": OUT_MOUNT, "mode": "rw"}, **(where.get("volumes") or {})}
        self.volumes = volumes  # what its cells may write besides /tmp (their exit.confinement)
        self.lifeline: socket.socket | None = None
        self.retired = False
        self.busy = threading.Lock()  # one cell at a time: the container is that cell's
        try:
            self.container = engine.client.containers.run(
                image, ["python3", "-m", "workloads.forkserver", f"{LAUNCH_MOUNT}/s", f"{LAUNCH_MOUNT}/preload.json",
                        WORKLOADS_MOUNT],
                detach=True, init=True, network_mode="none", environment=env,
                user=f"{os.getuid()}:{os.getgid()}", working_dir="/tmp", volumes=volumes,
                labels={LABEL: "1", f"{LABEL}.launcher": name, **owner_labels()}, **hardening(), **kwargs)
        except Exception:
            self._remove_folders()
            raise
        self.activity = beside.begin(beside.LAUNCHER_IMPORT, name, tuple(cpus or ()))

    def wait_ready(self) -> None:
        """Read the launcher's first line from the container's output: ready, or why not. A
        launcher still importing after READY_SECONDS is killed with its container."""
        timer = threading.Timer(READY_SECONDS, self.retire)
        timer.daemon = True
        timer.start()
        line = b""
        try:
            for chunk in self.container.logs(stdout=True, stderr=False, stream=True, follow=True):
                line += chunk
                if b"\n" in line or self._closed:
                    break
            if b"\n" in line:
                message = json.loads(line.split(b"\n", 1)[0])
                self.kept = list(message.get("kept") or [])
                if message.get("ready"):
                    self.lifeline = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    self.lifeline.connect(self.socket)
                    self.lifeline.sendall(b'{"lifeline": true}\n')
                    self.ready = True
                else:
                    self.refused = message.get("refused") or "the warm launcher said no"
            else:
                self.refused = self.did_not_start("the warm launcher's container ended before it was ready",
                                                  self._stderr())
        except Exception as exc:  # noqa: BLE001 - the engine, the socket: the cells start fresh
            self.refused = f"the warm launcher's container did not start ({exc})"
        finally:
            timer.cancel()
            beside.end(self.activity)
            self.settled.set()

    def start_cell(self, workdir: Path, cpus, memory: int | None, backstop: float | None,
                   tmpdir: str | None = None, cgroup: str | None = None, home: str | None = None) -> WarmChild:
        """Fork the cell whose files are in the staging folder (``stage_in``): inside the container
        its folder is ``/out`` and it runs from ``/tmp``, as a fresh container cell does, with a
        home of its own there (the launcher's cells share its /tmp, not their homes; `home`, a
        host folder, means nothing inside the container)."""
        inside_home = f"/tmp/home-{uuid.uuid4().hex[:12]}"
        return self.spawn({"spec": f"{OUT_MOUNT}/{SPEC_FILE}", "outdir": OUT_MOUNT, "cwd": "/tmp",
                           "stdout": f"{OUT_MOUNT}/{STDOUT_FILE}", "stderr": f"{OUT_MOUNT}/{STDERR_FILE}",
                           "cpus": sorted(cpus) if cpus else None, "memory": None,
                           "backstop": int(backstop) if backstop else None,
                           "env": {ENV_LAUNCH: "warm", "HOME": inside_home},
                           "cgroup": None, "reaped": f"{OUT_MOUNT}/{REAPED_FILE}", "grace": LEFTOVER_GRACE})

    def _stderr(self) -> bytes:
        try:
            return self.container.logs(stdout=False, stderr=True)
        except Exception:  # noqa: BLE001 - gone: nothing to quote
            return b""

    def state(self) -> dict:
        """The container's state as the engine reports it ({} when it cannot be read)."""
        try:
            self.container.reload()
            return dict(self.container.attrs.get("State") or {})
        except Exception:  # noqa: BLE001 - gone: nothing to read
            return {}

    def alive(self) -> bool:
        return self.ready and not self.retired and bool(self.state().get("Running"))

    def retire(self) -> None:
        """Kill the container (and so everything in it); the launcher then starts another."""
        self.retired = True
        try:
            self.container.kill()
        except Exception:  # noqa: BLE001 - already ended
            pass

    def close(self) -> None:
        """Close the lifeline (the launcher ends its cells and exits), keep its log, remove it."""
        self._closed = True
        beside.end(self.activity)
        if self.lifeline is not None:
            self.lifeline.close()
        try:
            self.container.wait(timeout=10)
        except Exception:  # noqa: BLE001 - it did not end in time: removed by force below
            pass
        try:
            with open(self.log_path, "ab") as log:
                log.write(self._stderr())
        except OSError:  # a log is a courtesy
            pass
        try:
            self.container.remove(force=True)
        except Exception:  # noqa: BLE001 - already removed
            pass
        self.settled.wait(timeout=5)
        self._remove_folders()

    def _remove_folders(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.stage, ignore_errors=True)


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def stage_in(workdir: Path, stage: Path) -> None:
    """The cell's folder as the lifecycle made it (its spec), copied into the empty staging folder."""
    _empty(stage)
    for entry in workdir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, stage / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, stage / entry.name, follow_symlinks=False)


def stage_out(stage: Path, workdir: Path) -> None:
    """Everything the cell wrote, moved into its folder (the lifecycle reads it there), and the
    staging folder left empty for the next cell."""
    for entry in stage.iterdir():
        target = workdir / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        shutil.move(str(entry), str(target))


def run_forked(server: ContainerServer, image: str, cell, workdir: Path, ctx, warmth,
               memory: int | None) -> RawOutcome | None:
    """Run one cell forked in `server`'s container and supervise it as a fresh container cell is
    supervised; None when the launcher did not answer (the caller starts the cell fresh and
    `warmth.notes` says why). The exit status reads as a container's would (128 + a signal)."""
    if not server.busy.acquire(blocking=False):  # a launcher is keyed by its slot: never two cells at once
        warmth.notes.append("launched fresh: its slot's warm launcher was serving another cell")
        return None
    try:
        return _forked(server, image, cell, workdir, ctx, warmth, memory)
    finally:
        server.busy.release()


def _forked(server: ContainerServer, image: str, cell, workdir: Path, ctx, warmth,
            memory: int | None) -> RawOutcome | None:
    stage_in(workdir, server.stage)
    oom_before = bool(server.state().get("OOMKilled"))
    try:
        proc = server.start_cell(workdir, ctx.slot.cpus, None,
                                 cell.limits.wall + BACKSTOP_GRACE if cell.limits.wall else None)
    except OSError as exc:
        warmth.notes.append(f"launched fresh: the warm launcher did not answer ({exc})")
        server.retire()
        _empty(server.stage)
        return None

    def kill() -> None:
        """Give the cell up: its launcher's SIGTERM to its subreaper ends all below it; a launcher
        that does not manage in time is killed with its container."""
        proc.give_up()
        try:
            proc.wait(timeout=LEFTOVER_GRACE + 5)
        except subprocess.TimeoutExpired:
            server.retire()

    try:
        code, timed_out, seconds = watch(proc.poll, kill, server.stage / EVENTS_FILE, cell.limits.wall,
                                         cell.limits.progress, cancel=ctx.cancel, pause=waiting_on(proc))
    except BaseException:
        kill()
        raise
    finally:
        proc.close()
        stage_out(server.stage, workdir)
    if code is not None and code < 0:
        code = 128 - code  # as the container's init reports a signal
    state = server.state()
    oom = bool(state.get("OOMKilled")) and not oom_before
    if oom or not state.get("Running"):
        server.retire()  # a flag that is on cannot tell the next cell's OOM kill; a dead launcher serves none
    sig = signal_name(code - 128) if code is not None and code > 128 and not timed_out else None
    return RawOutcome(exit_code=code, signal=sig, oom_killed=oom and code != 0, timed_out=timed_out,
                      seconds=seconds + warmth.waited,
                      detail={"container_oom_flag": oom, "image": image, "memory_limit": memory,
                              **warmth.detail(True), "confinement": container(server.volumes, OUT_MOUNT),
                              "leftovers": leftovers(read_reaped(workdir), proc.swept, None, by="launcher sweep",
                                                     how="subreaper in the launcher's container, then the "
                                                         "launcher's sweep of the container"),
                              "memory": {"unavailable": "the container is shared with its launcher; the "
                                                        "engine's OOM flag is recorded instead"}})
