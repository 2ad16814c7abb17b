"""How a process engine starts a cell: warm (forked from a server that has
already imported the stack) or fresh (a new interpreter, as always).

The server is ``workloads/forkserver.py`` (asv's ``launch_method =
forkserver``). One server per key: the interpreter, every variable the cell
process reads at import (XLA flags, Keras switches, caches: a server freezes
its environment at start, so cells that differ in any of them never share
one), what it imports and the virtual device count. Which GPUs a cell has is
read only when its stack starts a device, in the fork: each fork is handed
them (`SLOT_VARIABLES`), so one server serves every GPU set. A server that
finds its imports unsafe to fork (a thread started, a device runtime
touched) refuses; its key is remembered and those cells start fresh.

A warm child is supervised like a fresh process: it leads its own session,
the harness kills its process group, and its exit status comes back from
the server (``WarmChild.poll``). The server's stdin is a pipe from the
harness: when the harness dies, even by ``kill -9``, the server sees
end-of-file, kills every child's group and exits.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.cells import BUILT_IN_MODELS, Cell
from harness.errors import CellUnsupported
from harness.host import beside
from harness.host.supervise import Cancelled
from harness.launch.cellenv import own_home
from harness.workloads.protocol import ENV_LAUNCH, LEFTOVER_GRACE, REAPED_FILE, SPEC_FILE, STDERR_FILE, STDOUT_FILE

READY_SECONDS = 600.0   # importing TensorFlow on a loaded machine can take minutes


@dataclass
class Warmth:
    """How warm one cell starts: the cache variables it gets, the start-up settings beside them
    (allocation.py), notes on what it did not get, and the seconds it waited for its launcher
    (they count in its time)."""

    caches: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    waited: float = 0.0
    wait_ended: float | None = None   # host clock: when a wait for its launcher ended

    @property
    def variables(self) -> dict:
        """Every variable a warm run adds to the cell's environment."""
        return {**self.caches, **self.settings}

    def detail(self, forked: bool) -> dict:
        """What the result's `exit` records: the launch ("warm": forked from a launcher that had
        imported the stack; "fresh": a new interpreter) and the caches offered."""
        out = {"launch": "warm" if forked else "fresh", "caches": sorted(self.caches),
               "settings": dict(self.settings), "launcher_wait_seconds": round(self.waited, 3)}
        if self.notes:
            out["launch_notes"] = list(self.notes)
        if self.wait_ended is not None:
            out["launcher_wait_ended"] = self.wait_ended
        return out


def warm_settings(engine, cell: Cell, slot) -> Warmth:
    """A cell's warmth on this engine: nothing with `--fresh`; else the host's own verdict first
    (a cell `unsupported` for a reason its pins settle raises CellUnsupported and is never
    started: preflight.py), then the caches it gets (caches.py) and how it takes GPU memory
    (allocation.py)."""
    if not engine.warm:
        return Warmth()
    from harness.launch import allocation, caches, preflight
    why = preflight.unsupported(cell)
    if why:
        raise CellUnsupported(why)
    variables, notes = caches.variables(cell, slot)
    return Warmth(variables, allocation.variables(cell, slot), notes)


# Workloads that import nothing before they fire (a planted fault, an idle cell): a bare server.
BARE_WORKLOADS = ("fault", "idle")
# Workloads whose process imports the stack the harness knows before anything else: the harness's
# own models, and a user's model factory (its module is imported after the fork, in the cell).
FORKABLE = (*BUILT_IN_MODELS, "user")


def fresh_because(cell: Cell) -> str | None:
    """Why this cell must start in a new interpreter even on a warm run; None when it may fork."""
    model = cell.workload.model
    if model in BARE_WORKLOADS:
        return None
    if model == "script" and not is_trial(cell):
        return "a script is its own interpreter's __main__: it starts fresh"
    if model not in FORKABLE and model != "script":  # a trial script imports its environment's stack
        return "a workload the harness does not know the imports of starts fresh"
    if cell.limits.memory:
        # RLIMIT_AS counts address space: a preloaded stack's would count against the cell
        # before it began, and an import that fails under the limit would not fail
        return "a memory limit on a process engine is an address-space limit: the cell starts fresh"
    return None


def is_trial(cell: Cell) -> bool:
    """A candidate of `harness reduce` (its workload's `trial`): one of the many variants of one
    script tried in turn. It forks from its stack's launcher, a script too (run as __main__ in
    the forked child), and a launcher starts for it even alone in its run: more follow. Only the
    reduction's answer is then checked fresh, as every other script cell runs."""
    return bool(cell.workload.params.get("trial"))


def forks(cell: Cell, why: Callable[[Cell], str | None] = fresh_because) -> bool:
    """Whether a warm run would fork this cell from a launcher (it is neither fresh by nature
    -- `why`, the engine's own reasons -- nor decided on the host without a launch)."""
    from harness.launch import preflight
    return why(cell) is None and not preflight.unsupported(cell)


# What a cell's slot sets that its stack reads only when a device starts, never at import: a
# launcher shared by the slots of a GPU group is started without them, and each fork sets them.
SLOT_VARIABLES = ("CUDA_VISIBLE_DEVICES",)


def shares_gpus(cell: Cell, where=None) -> bool:
    """Whether one process launcher serves the cell's group on every GPU set. Its imports touch
    no device (the server checks), and a GPU stack reads which GPUs it has when it starts one, in
    the fork: so the GPUs need not key a launcher -- one import serves GPU 0 and GPU 1, where a
    launcher per set would make the first cell on each set wait for an import of its own. A
    container launcher (`where`: its devices) holds its GPUs and keeps its key."""
    return cell.parallelism.device_kind == "gpu" and where is None


def imports(cell: Cell) -> list[str]:
    """What the cell's stack imports before it builds anything (the server preloads these)."""
    if cell.workload.model in BARE_WORKLOADS:
        return []
    return stack_imports(cell.environment)


def stack_imports(env) -> list[str]:
    """What an environment's stack imports before its cells build anything: the launcher preloads
    it, and an image imports it once at build, so its bytecode is in the image (engines/docker.py)."""
    if env.api == "keras3":
        backend = env.backend or "tensorflow"
        return ["numpy", backend, "keras"]
    if not env.tensorflow:
        return []  # a bare Python (the planted faults): nothing to import
    if env.api == "standalone":
        return ["numpy", "tensorflow", "keras"]
    if env.api == "tf_keras":
        return ["numpy", "tensorflow", "tf_keras", "tensorflow.keras"]
    return ["numpy", "tensorflow", "tensorflow.keras"]


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


ONLY_CELL = ("it was the only cell of its launcher left to run (a launcher starts for two or more, "
             "so that its import never runs beside a cell it does not serve)")
NO_PLAN = "no schedule said other cells of its environment follow (a launcher starts for two or more)"


class Launcher:
    """The warm servers of one engine, closed with the engine.

    A server starts only when the run's schedule (`plan`, a `warmplan.Plan`) says at
    least one more cell of the cell's group follows; it imports on the cell's
    own cores while that cell waits, and the cell then forks from it (see
    `warmplan.Plan` for why this is the cheaper schedule). Without a plan (a Slurm
    task: one cell) no server starts and the cell starts fresh.
    """

    def __init__(self, why: Callable[[Cell], str | None] = fresh_because,
                 make: Callable[..., ServerBase] | None = None) -> None:
        self._servers: dict[str, ServerBase] = {}
        self._lock = threading.Lock()
        self.refusals: dict[str, str] = {}
        self.plan = None              # the run's schedule (warmplan.Plan), set on a warm run
        self.why = why                # the engine's reasons a cell starts fresh
        self.make = make or Server    # how the engine starts one server (a process; a container)

    def server(self, python: str, cell: Cell, env: dict[str, str], workloads: Path, log: Path,
               cpus=(), where=None, cancel: threading.Event | None = None) -> ServerBase | str:
        """The ready server for this cell's key (started on `cpus` if there is none and others
        follow, and waited for), or why the cell starts fresh. `where`: what else keys a server
        on this engine (a container's devices), handed to `make`. A run interrupted while the
        cell waits (`cancel`) ends the wait: ``Cancelled``, the cell leaves no folder -- an import
        under load can outlast the run's patience for its workers."""
        server = self._started(python, cell, env, workloads, log, cpus, where)
        if isinstance(server, str):
            return server
        while not server.settled.wait(0.25):
            if cancel is not None and cancel.is_set():
                raise Cancelled
        if not server.ready:
            return server.refused or "refused"
        return server

    def ahead(self, python: str, cell: Cell, env: dict[str, str], workloads: Path) -> None:
        """Start the server `cell` will fork from now, and do not wait for it: the scheduler
        foresaw its group's cells (warmplan.Plan.ahead), and its import runs while other cells
        train instead of while the first of them waits on its GPUs."""
        self._started(python, cell, env, workloads, _log(workloads, cell))

    def _started(self, python: str, cell: Cell, env: dict[str, str], workloads: Path, log: Path,
                 cpus=(), where=None) -> ServerBase | str:
        """The server for this cell's key, started (not waited for) if there is none, or why
        the cell starts fresh."""
        preload = {"api": cell.environment.api, "backend": cell.environment.backend,
                   "device_kind": cell.parallelism.device_kind, "device_count": cell.parallelism.devices,
                   "imports": imports(cell)}
        if shares_gpus(cell, where):  # one launcher for every GPU set of its group
            env = {k: v for k, v in env.items() if k not in SLOT_VARIABLES}
        key = json.dumps([python, sorted(env.items()), preload, str(workloads), where], default=str)
        with self._lock:
            if key in self.refusals:
                return self.refusals[key]
            server = self._servers.get(key)
            if server is not None and server.settled.is_set() and not server.alive():
                del self._servers[key]
                if self.plan is not None:
                    self.plan.leave(key)
                threading.Thread(target=server.close, daemon=True).start()
                if server.refused:
                    self.refusals[key] = server.refused
                    return server.refused
                server = None  # it died: start another
            if server is None:
                if self.plan is None:
                    return NO_PLAN
                if self.plan.left(cell) < 1 and not is_trial(cell):
                    return ONLY_CELL
                try:
                    server = self.make(python, env, preload, workloads, log, cpus=cpus, name=cell.environment.name,
                                       **({"where": where} if where is not None else {}))
                except Exception as exc:  # noqa: BLE001 - an OS or engine error: the cell starts fresh
                    self.refusals[key] = f"the warm launcher could not be started ({exc})"
                    return self.refusals[key]
                threading.Thread(target=server.wait_ready, daemon=True, name="warm launcher").start()
                self._servers[key] = server
                if where is not None:  # the launcher holds its slot: its group's cells come back to it
                    self.plan.home(key, cell, cpus)
        return server

    def for_cell(self, python: str, cell: Cell, env: dict[str, str], workloads: Path,
                 warmth: Warmth, cpus=(), where=None, cancel: threading.Event | None = None) -> ServerBase | None:
        """The server to fork this cell from, or None (start it fresh; `warmth.notes` says why).
        `cpus`: the cell's cores, where a server it starts imports; `cancel`: the run's
        interruption, which ends a wait for the server's import."""
        why = self.why(cell)
        if why:
            warmth.notes.append(f"launched fresh: {why}")
            return None
        log = _log(workloads, cell)
        began = time.monotonic()
        try:
            server = self.server(python, cell, env, workloads, log, cpus, where, cancel)
        finally:
            if self.plan is not None:
                self.plan.settle(cell)  # its group's import is over: held-back cells may start
        warmth.waited = time.monotonic() - began  # a cell that waited for its launcher's imports paid them
        warmth.wait_ended = time.time()
        if isinstance(server, str):
            warmth.notes.append(f"launched fresh: {server}")
            return None
        if server.kept:
            warmth.notes.append(f"forked with threads that prepare for a fork: {', '.join(server.kept)}")
        return server

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()


def _log(workloads: Path, cell: Cell) -> Path:
    """Where the launchers of a cell's environment write: beside the run's workloads folder."""
    return workloads.parent.parent / ".launch" / f"{cell.environment.name}.log"
