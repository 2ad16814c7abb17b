"""A warm launcher process and the cells it forks, as the host holds them.

The launcher is ``workloads/forkserver.py``: it imports a stack once and forks a cell on
each request over a private AF_UNIX socket; the cell's exit status comes back over that
connection (``WarmChild``, which the supervisor treats as a Popen). `ServerBase` is what
every launcher shares, wherever it runs; `Server` is one that runs as a process of this
host (a container's is engines/docker_warm.py). Which launcher a cell forks from, and
whether one starts at all, is launcher.py's business.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.host import beside
from harness.launch.cellenv import own_home
from harness.workloads.protocol import ENV_LAUNCH, LEFTOVER_GRACE, REAPED_FILE, SPEC_FILE, STDERR_FILE, STDOUT_FILE

READY_SECONDS = 600.0   # importing TensorFlow on a loaded machine can take minutes


@dataclass
class WarmChild:
    """A forked cell, as the supervisor sees a Popen: pid, poll(), wait(timeout)."""

    pid: int
    conn: socket.socket
    returncode: int | None = None
    swept: list = field(default_factory=list)  # a container's launcher: what it ended after the cell
    _buffer: bytes = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("warm cell", timeout or 0)
            self._read(0.5 if left is None else min(left, 0.5))
        return self.returncode

    def _read(self, timeout: float) -> None:
        if not select.select([self.conn], [], [], timeout)[0]:
            return
        data = self.conn.recv(4096)
        if not data:  # the server died: its children died with it (PR_SET_PDEATHSIG)
            self.returncode = -signal.SIGKILL
            self.conn.close()
            return
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self.returncode = int(message["exit"])
                self.swept = list(message.get("swept") or [])
                self.conn.close()

    def give_up(self) -> None:
        """Give the cell up and still hear how it ended: the server sees our side end (its
        subreaper's SIGTERM ends all below it) and sends the exit as usual."""
        try:
            self.conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        """The host gives the cell up: the server kills its group when this closes."""
        try:
            self.conn.close()
        except OSError:
            pass


SOCKET_PATH_MAX = 100
"""The longest socket path used: Linux keeps 107 bytes of an AF_UNIX address, macOS 103. A
longer one fails to bind, and every cell would launch fresh (correct, but never warm)."""


def socket_folder() -> Path:
    """A new private folder (0700) for a launcher's socket, whose path fits an AF_UNIX address.

    The default temp folder comes first, so TMPDIR is honoured; where it is too deep (a nox
    session's own temp folder, a pytest tmp_path) the next of the standard candidates that fits
    is used -- as multiprocessing chooses its forkserver's folder."""
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]):
        # mkdtemp's name: the prefix and 8 random characters; then "/s"
        if len(os.path.join(base, "harness-warm-" + "x" * 8, "s")) <= SOCKET_PATH_MAX and os.access(base, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="harness-warm-", dir=base))
    raise OSError(f"no temp folder short enough for a socket path of at most {SOCKET_PATH_MAX} bytes "
                  f"(TMPDIR is {tempfile.gettempdir()})")


def last_words(text: str | bytes, limit: int = 300) -> str:
    """The last non-empty line of a launcher's log, for the one line that says why it did not
    start (the whole log stays in the results folder)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if len(lines[-1]) <= limit else lines[-1][:limit - 3] + "..."


class ServerBase:
    """What every warm launcher shares, whatever holds it (a process of this host, `Server`; a
    container, engines/docker_warm.py): the private socket folder it serves on, the state the
    `Launcher` reads (`settled`, `ready`, `refused`, `kept`) and `spawn`. A subclass starts the
    launcher and gives `wait_ready`, `start_cell`, `alive` and `close`."""

    def __init__(self, preload: dict, log: Path):
        self.folder = socket_folder()  # 0700: only we (and a container run as our uid) can connect
        self.socket = str(self.folder / "s")
        (self.folder / "preload.json").write_text(json.dumps(preload))
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log
        self.refused: str | None = None
        self.ready = False
        self.kept: list[str] = []  # fork-aware threads its imports started (workloads/forkserver.py)
        self.settled = threading.Event()
        self._closed = False

    def did_not_start(self, what: str, log_text: str | bytes = b"") -> str:
        """Why the cells start fresh: `what` went wrong, the last line the launcher wrote, and
        where its whole log is."""
        words = last_words(log_text)
        return f"{what}: {words} (log: {self.log_path})" if words else f"{what} (log: {self.log_path})"

    def spawn(self, request: dict) -> WarmChild:
        """Ask the launcher to fork a cell; the answer's first line is the child's pid."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket)
        conn.sendall((json.dumps(request) + "\n").encode())
        buffer = b""
        while b"\n" not in buffer:
            data = conn.recv(4096)
            if not data:
                conn.close()
                raise OSError("the warm launcher closed the connection before forking")
            buffer += data
        line, rest = buffer.split(b"\n", 1)
        return WarmChild(pid=int(json.loads(line)["pid"]), conn=conn, _buffer=rest)


class Server(ServerBase):
    """One warm launcher process: started at once, ready (or refused) after its imports."""

    def __init__(self, python: str, env: dict[str, str], preload: dict, workloads: Path, log: Path,
                 cpus=(), name: str = ""):
        super().__init__(preload, log)
        # its imports (Keras reads ~/.keras/keras.json, and writes one, at import) see a home of its
        # own, empty, gone with the launcher's folder; each cell it forks gets one more (start_cell)
        env = {**env, "HOME": own_home(self.folder)}
        self._log = open(log, "ab")
        pinned = tuple(cpus or ())

        def pin() -> None:  # the import runs on the slot it was given, as a cell would
            if pinned:
                os.sched_setaffinity(0, pinned)

        # the workloads folder (inside the results folder) on the command line says whose server it is
        self.proc = subprocess.Popen([python, "-m", "workloads.forkserver", self.socket,
                                      str(self.folder / "preload.json"), str(workloads)], env=env, cwd=self.folder,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     start_new_session=True, preexec_fn=pin)
        self.activity = beside.begin(beside.LAUNCHER_IMPORT, name, pinned)

    def wait_ready(self) -> None:
        """Read the server's first line (in a background thread): ready, or why not."""
        deadline = time.monotonic() + READY_SECONDS
        line = b""
        try:
            while time.monotonic() < deadline and not self._closed:
                if select.select([self.proc.stdout], [], [], 1.0)[0]:
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    line += chunk
                    if b"\n" in line:
                        message = json.loads(line.split(b"\n", 1)[0])
                        self.ready = bool(message.get("ready"))
                        self.kept = list(message.get("kept") or [])
                        if not self.ready:
                            self.refused = message.get("refused") or "the warm launcher said no"
                        return
                elif self.proc.poll() is not None:
                    break
            try:  # its output closed as it ended: let the exit status arrive
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self.refused = self.did_not_start(f"the warm launcher did not start (exit {code})", self._log_tail())
        except (OSError, ValueError) as exc:
            self.refused = f"the warm launcher did not start ({exc})"
        finally:
            beside.end(self.activity)
            self.settled.set()

    def _log_tail(self, size: int = 8192) -> bytes:
        try:
            self._log.flush()
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - size))
                return log.read()
        except OSError:
            return b""

    def start_cell(self, workdir: Path, cpus, memory: int | None, backstop: float | None,
                   tmpdir: str | None = None, cgroup: str | None = None, home: str | None = None,
                   slot: dict[str, str] | None = None, confine: dict[str, str] | None = None) -> WarmChild:
        """Fork the cell whose spec is in `workdir`: it runs there, writes its logs there, on
        `cpus`, under an address-space limit of `memory`, with `tmpdir` as its temp folder and
        `home` as its home, and ends itself after `backstop` s. `cgroup`: the cgroup.procs file
        the child enters first (cellgroup.py); the child is the cell's subreaper, the cell runs
        below it. `slot`: its SLOT_VARIABLES (its GPUs), set in the fork; `confine`: where it may
        write, if it is confined (confinement.Offer.variables): the cell confines itself after the fork."""
        env = {ENV_LAUNCH: "warm", **({"TMPDIR": tmpdir} if tmpdir else {}), **({"HOME": home} if home else {}),
               **(slot or {}), **(confine or {})}
        return self.spawn({"spec": str(workdir / SPEC_FILE), "outdir": str(workdir), "cwd": str(workdir),
                           "stdout": str(workdir / STDOUT_FILE), "stderr": str(workdir / STDERR_FILE),
                           "cpus": sorted(cpus) if cpus else None, "memory": memory,
                           "backstop": int(backstop) if backstop else None, "env": env,
                           "cgroup": cgroup, "reaped": str(workdir / REAPED_FILE), "grace": LEFTOVER_GRACE})

    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def close(self) -> None:
        """Close the lifeline: the server kills its children and exits."""
        self._closed = True
        beside.end(self.activity)
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.settled.wait(timeout=5)
        self.proc.stdout.close()
        self._log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
