"""What every engine offers: obtain an environment, run one cell in it."""

from __future__ import annotations

import ctypes
import json
import os
import posixpath
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from harness.cells import Cell, Environment, size_bytes
from harness.environments.recipes import lock_without_forced, venv_script
from harness.errors import CellUnsupported
from harness.files.paths import cache_dir  # noqa: F401 - re-exported: engines and the self-check read it here
from harness.host import beside
from harness.host.resources import Slot
from harness.host.supervise import RawOutcome, waiting_on, watch
from harness.launch.allocation import shares_memory
from harness.launch.cellenv import (  # noqa: F401 - re-exported
    CELL_ENV,
    HOME_NOTE,
    INHERITED,
    INHERITED_PREFIXES,
    LAUNCHER_HOME_NOTE,
    cell_variables,
    inherited,
    own_home,
)
from harness.launch.cellgroup import CellGroup, leftovers
from harness.launch.confinement import NOT_ASKED, Offer, writable
from harness.launch.launcher import SLOT_VARIABLES, Launcher, fresh_because, warm_settings
from harness.launch.standby import Standby
from harness.launch.standby import allowed as standby_allowed
from harness.launch.warmserver import Server
from harness.status.outcome import signal_name
from harness.workloads.protocol import (
    ENV_STACK_BYTECODE,
    EVENTS_FILE,
    LEFTOVER_GRACE,
    REAPED_FILE,
    SPEC_FILE,
    STDERR_FILE,
    STDOUT_FILE,
)

# Seconds the in-environment `timeout` waits past the wall limit: the harness
# enforces the limit itself; this backstop ends the cell if the harness died.
BACKSTOP_GRACE = 10


def cell_argv(python: str, spec: str, outdir: str, wall: float) -> list[str]:
    """The one command line that runs a cell, whatever the engine.

    The subreaper (workloads/reaper.py) comes first: every process the cell leaves running
    ends with it, and its report says which (cellgroup.py). ``timeout`` (coreutils, in every
    image and on every Linux host) ends the cell a little after its wall limit even when the
    harness was killed. A SIGTERM to the subreaper (a dying harness's PR_SET_PDEATHSIG, or the
    harness giving the cell up) kills the cell and all below it.
    """
    backstop = ["timeout", "-k", "10", str(int(wall) + BACKSTOP_GRACE)] if wall else []
    reaper = [python, "-m", "workloads.reaper", posixpath.join(outdir, REAPED_FILE), str(LEFTOVER_GRACE), "--"]
    return [*reaper, *backstop, python, "-m", "workloads", spec, outdir]


def read_reaped(workdir: Path) -> dict | None:
    """The subreaper's report in a cell folder, or None where it wrote none (it was given up)."""
    try:
        data = json.loads((workdir / REAPED_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Prepared:
    """An environment ready to run cells, and how it was obtained.

    ``handle`` names it for its engine, always as text: the virtualenv's folder
    (venv), the interpreter's path (local), the image id (docker). Only the
    engine that made it reads it.
    """

    environment: Environment
    provenance: dict
    handle: str = ""
    reused: bool = False

    def __post_init__(self) -> None:
        self.handle = str(self.handle)


@dataclass
class RunContext:
    """What the lifecycle gives an engine besides the cell: its slot, a stop flag, and what
    the results store needs of the cell's process -- where to report its process group (so a
    later run can end it), the variables that say whose cell it is, and the name its temp
    folder starts with (so a dead run's clean-up finds it). Handed down, so an engine never
    reaches into the store."""

    slot: Slot = field(default_factory=Slot)
    cancel: threading.Event | None = None
    on_start: Callable[[int], None] | None = None
    variables: dict[str, str] = field(default_factory=dict)  # store.OWNER_VARIABLE: whose cell it is
    scratch_prefix: str | None = None  # store.scratch_prefix of the cell's folder
    standby: Standby | None = None     # the slot is still another cell's until this says go (standby.py)
    release: Callable[[], None] | None = None  # the cell is done with its slot (its end event): pass it on


class Engine(ABC):
    name: str
    # Warm cells (issue: the fixed cost of a cell): compile and data caches, the host's own
    # `unsupported` verdicts and, for process engines, a warm launch. `--fresh` turns it all off.
    warm: bool = True
    # Where its cells may write (confinement.py): reduce confines its candidates; any other cell
    # writes wherever its user can. A container is its cells' confinement whatever this says.
    confine: Offer = NOT_ASKED
    # Whether what a cell runs in confines it already (a container: a read-only root, writes only in its
    # cell folder and its own /tmp): reduce then asks for no confinement of its own.
    confines_cells = False
    # Whether an environment prepared here serves the cell wherever it runs (an image, a virtualenv in
    # the shared cache): a Slurm submission prepares each one before its tasks start. An environment
    # that is the running machine's own interpreter can only be checked there, by the node.
    prepares_for_other_hosts = True
    replay_words = "a virtualenv from the exact pins"   # how a bundle's run.sh remakes the environment
    recipe_words = "the exact pip lock"                 # what a bundle's environment/ holds

    @abstractmethod
    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        """Build or reuse the environment; raise EnvironmentUnavailable if it cannot be had."""

    @abstractmethod
    def run(self, prepared: Prepared, cell: Cell, workdir: Path, workloads_root: Path,
            ctx: RunContext | None = None) -> RawOutcome:
        """Run ``python -m workloads spec.json OUTDIR`` for one cell; never raise for a cell's failure."""

    def exec(self, prepared: Prepared, argv: list[str], workloads_root: Path, timeout: float,
             gpus: list[str] = ()) -> tuple[int | None, str, str]:
        """Run the environment's ``python ARGV`` with the workloads importable, seeing only the
        GPUs `gpus` (indices; none: no GPU); (exit code or None on timeout, stdout, stderr).
        Used for the GPU self-check."""
        raise NotImplementedError(f"the {self.name} engine cannot run commands")

    @abstractmethod
    def write_replay(self, cell: Cell, prov: dict, env_dir: Path) -> str:
        """Write how this environment is remade into `env_dir`; return run.sh's text (recipes.py)."""

    @abstractmethod
    def shell(self, cell: Cell, prepared: Prepared, bundle: Path) -> tuple[list[str], dict]:
        """argv and environment for an interactive shell in the cell's environment."""

    def stands_by(self, cell: Cell) -> bool:
        """Whether this cell may prepare on a running cell's GPUs and wait for them (standby.py):
        only engines that run it so say yes."""
        return False

    def fresh_because(self, cell: Cell) -> str | None:
        """Why this cell starts fresh on this engine even on a warm run (launch.fresh_because,
        plus what the engine adds); None when it may fork from a launcher."""
        return fresh_because(cell)

    _launcher = None

    def launcher(self):
        """The engine's warm launchers (launch/launcher.py), made on first use, closed with the engine."""
        if self._launcher is None:
            self._launcher = Launcher(why=self.fresh_because, make=self.make_server())
        return self._launcher

    def make_server(self):
        """How this engine starts one warm launcher: launch.Server (a process of this host)."""
        return Server

    def close(self) -> None:
        """Release what the engine holds (launchers, containers, clients)."""
        if self._launcher is not None:
            self._launcher.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


try:  # loaded here, not in the forked child, where loading a library could deadlock
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _LIBC = None


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the harness thread that started us dies."""
    if _LIBC is not None:
        _LIBC.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


class ProcessEngine(Engine):
    """Engines whose cells are processes of this host (venv, local).

    One supervision path for both, in the shape of nox's ProcessEnv: the
    subclass says which interpreter and which PYTHONPATH; this class builds
    the command and environment, pins the cell to its CPU cores, ties its
    life to the harness (a SIGTERM when the harness dies, the ``timeout``
    backstop), and watches it.
    """

    def interpreter(self, prepared: Prepared) -> str:
        return str(prepared.handle)

    def stands_by(self, cell: Cell) -> bool:
        """On a warm run, a GPU cell of a stack that leaves its GPUs' memory to others
        (allocation.shares_memory) prepares while another cell ends on its GPUs -- unless the
        harness's environment turns standing by off (standby.SWITCH)."""
        return (self.warm and cell.parallelism.device_kind == "gpu" and shares_memory(cell)
                and standby_allowed())

    def pythonpath(self, workloads_root: Path) -> str:
        """Only the workloads: the environment holds everything else the cell may import."""
        return str(workloads_root)

    # Whether the environments are the harness's own (kept in its cache, never the user's): then
    # the stack's import writes its bytecode there for every later process (compat.stack_bytecode).
    own_environments = False

    def environ(self, cell: Cell, slot: Slot, workloads_root: Path) -> dict[str, str]:
        env = inherited()
        env.update(cell_variables(cell, slot))  # Keras switches are never in INHERITED: only the cell's own
        env["PYTHONPATH"] = self.pythonpath(workloads_root)
        env.update(self._bytecode())
        return env

    def _bytecode(self) -> dict[str, str]:
        return {ENV_STACK_BYTECODE: "1"} if self.own_environments else {}

    def write_replay(self, cell: Cell, prov: dict, env_dir: Path) -> str:
        lock = Path(prov["venv"]) / "requirements.lock" if prov.get("venv") else None
        if lock and lock.exists():
            (env_dir / "requirements.lock").write_text(lock_without_forced(lock.read_text(), cell.environment.force))
        return venv_script(cell, has_lock=bool(lock and lock.exists()))

    def shell(self, cell: Cell, prepared: Prepared, bundle: Path) -> tuple[list[str], dict]:
        env = cell.environment.variables(inherit={**os.environ, **CELL_ENV})
        bindir = str(Path(self.interpreter(prepared)).parent)
        env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(bundle.resolve()))
        return ["bash"], env

    def exec(self, prepared: Prepared, argv: list[str], workloads_root: Path, timeout: float,
             gpus: list[str] = ()) -> tuple[int | None, str, str]:
        """Run the environment's ``python ARGV`` with the workloads importable (the self-check),
        on the GPUs `gpus` only; exit code None when it ran past ``timeout``."""
        env = inherited()
        env.update(CELL_ENV, PYTHONPATH=self.pythonpath(workloads_root.resolve()), **self._bytecode())
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        with tempfile.TemporaryDirectory(prefix="harness-check-") as scratch:
            env["HOME"] = own_home(scratch)  # the check sees what a cell sees: not the user's home
            try:
                proc = subprocess.run([self.interpreter(prepared), *argv], capture_output=True, text=True,
                                      env=env, timeout=timeout, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as exc:
                return None, _text(exc.stdout), _text(exc.stderr)
        return proc.returncode, proc.stdout, proc.stderr

    def _launch_ahead(self, prepared: Prepared, cell: Cell, ctx: RunContext, workloads_root: Path) -> None:
        """Start the launchers of this environment's next GPU groups now (launcher.Plan.ahead),
        with the variables their cells will get. Their GPUs are not known yet, and a shared
        launcher is keyed without them (launch.shares_gpus); the GPU model that keys their
        compile caches is this cell's. A wrong guess costs an import, never a cell: a cell whose
        variables differ finds no launcher of its key and starts one, as before."""
        plan = self.launcher().plan
        for other in plan.ahead(cell) if plan is not None and ctx.slot.gpus else []:
            gpus = ctx.slot.gpus
            slot = Slot(gpus=tuple(gpus[i % len(gpus)] for i in range(other.parallelism.devices)), cpus=ctx.slot.cpus)
            try:
                warmth = warm_settings(self, other, slot)
            except CellUnsupported:
                continue
            env = self.environ(other, slot, workloads_root)
            env.update(warmth.variables)
            env.update(ctx.variables)
            self.launcher().ahead(self.interpreter(prepared), other, env, workloads_root)

    def run(self, prepared: Prepared, cell: Cell, workdir: Path, workloads_root: Path,
            ctx: RunContext | None = None) -> RawOutcome:
        ctx = ctx or RunContext()
        workdir, workloads_root = workdir.resolve(), workloads_root.resolve()  # the cell runs in workdir
        warmth = warm_settings(self, cell, ctx.slot)  # the host's verdict, the caches (launch/launcher.py)
        env = self.environ(cell, ctx.slot, workloads_root)
        env.update(warmth.variables)
        env.update(ctx.variables)
        server = self.launcher().for_cell(self.interpreter(prepared), cell, env, workloads_root, warmth,
                                          cpus=ctx.slot.cpus, cancel=ctx.cancel) if self.warm else None
        if server is not None:
            self._launch_ahead(prepared, cell, ctx, workloads_root)
        one = _HostCell(cell, workdir, ctx, warmth, env, self.confine)
        try:
            with open(workdir / STDOUT_FILE, "wb") as out, open(workdir / STDERR_FILE, "wb") as err:
                one.start(self.interpreter(prepared), server, out, err)
                one.watch()
        finally:
            one.clean_up()
        return one.outcome()


class _HostCell:
    """One cell as a process of this host, from its start to its outcome: born in its cell group
    (cellgroup.py), pinned to its slot's cores and memory limit, tied to the harness's life, with
    a temp folder and a home of its own, and -- on a warm run -- forked from its stack's launcher
    rather than started fresh. `ProcessEngine.run` says the order; this holds what each step
    leaves for the next."""

    def __init__(self, cell: Cell, workdir: Path, ctx: RunContext, warmth, env: dict, confine: Offer):
        self.cell, self.workdir, self.ctx, self.warmth, self.env = cell, workdir, ctx, warmth, env
        self.confine = confine
        self.limit = size_bytes(cell.limits.memory) if cell.limits.memory else None
        self.cpus = ctx.slot.cpus
        self.group = CellGroup.make()  # every process of the cell is born in it, where the host allows one
        # a cell standing by may wait up to another cell's wall before its own begins: its backstops allow both
        self.wall = cell.limits.wall * (2 if ctx.standby is not None else 1)
        # The cell's own temp folder, gone with it: what a framework leaves in the temp folder
        # (TF's autograph writes a file per converted function) would otherwise pile up there
        # over a matrix. Set after the launcher is chosen: it is not part of a launcher's key. A
        # harness killed with -9 cannot remove it: the next run does (store.clean_partials).
        env["TMPDIR"] = self.scratch = tempfile.mkdtemp(prefix=ctx.scratch_prefix)  # named for its clean-up
        env["HOME"] = self.home = own_home(self.scratch)  # likewise its home: never the user's (cellenv.HOME_NOTE)
        self.folders = writable(workdir, self.scratch, warmth.caches)  # where it may write, if it is confined
        self.confined = confine.variables(self.folders)
        env.update(self.confined)
        self.server = None
        self.proc = None
        self.preparing = None
        self.released_at: list[float] = []
        self.after: list[dict] = []
        self.memory: dict = {}
        self.code, self.timed_out, self.seconds = None, False, 0.0

    def _preexec(self) -> None:
        """In the fresh child, before it runs the cell."""
        self.group.join()
        _die_with_parent()
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
        if self.limit:
            resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))

    def start(self, python: str, server, out, err) -> None:
        """Fork the cell from the warm launcher `server`, or start it fresh where there is none or
        it does not answer (the cell then says it started fresh, and why)."""
        if server is not None:  # forked from the stack's warm launcher: the same cell, started warm
            try:
                self.proc = server.start_cell(self.workdir, self.cpus, self.limit,
                                              self.wall + BACKSTOP_GRACE if self.wall else None,
                                              tmpdir=self.scratch, cgroup=self.group.procs_file, home=self.home,
                                              slot={k: self.env[k] for k in SLOT_VARIABLES if k in self.env},
                                              confine=self.confined)
                self.server = server
            except OSError as exc:  # the launcher went away: the cell starts fresh, and says so
                self.warmth.notes.append(f"launched fresh: the warm launcher did not answer ({exc})")
        if self.proc is None:
            argv = cell_argv(python, str(self.workdir / SPEC_FILE), str(self.workdir), self.wall)
            self.proc = subprocess.Popen(argv, cwd=self.workdir, env=self.env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=self._preexec)
            self.group.confirm(self.proc.pid)
        if self.ctx.on_start:
            self.ctx.on_start(self.proc.pid)
        standby = self.ctx.standby
        if standby is not None and not standby.went.is_set():  # preparing beside the cell on its GPUs
            self.preparing = beside.begin(beside.NEXT_CELL, self.cell.id, self.cpus)
            standby.when_went(partial(beside.end, self.preparing))

    def _released(self) -> None:
        """The workload's end event: its training and its record are done; only its exit
        (the framework's teardown) is left, which needs no GPU to itself."""
        self.released_at.append(time.time())
        if self.ctx.release is not None:
            self.ctx.release()

    def kill(self) -> None:
        """Give the cell up: its cgroup at once where it has one; its subreaper's SIGTERM kills
        all below it; its process group last, if the subreaper is stuck."""
        self.group.kill()
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def watch(self) -> None:
        """Until the cell ends, runs past its limits or is cancelled; then end what it left."""
        standby = self.ctx.standby
        try:  # polled at 20 Hz (a stat): the end event passes the slot on within the teardown (0.2-0.35 s)
            self.code, self.timed_out, self.seconds = watch(
                self.proc.poll, self.kill, self.workdir / EVENTS_FILE, self.cell.limits.wall,
                self.cell.limits.progress, cancel=self.ctx.cancel, pause=waiting_on(self.proc),
                went=standby.went if standby is not None else None, done=self._released, interval=0.05)
        except BaseException:
            self.kill()
            self.proc.wait()
            raise
        finally:
            if self.server is not None:
                self.proc.close()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the subreaper's own group: nothing of the cell's
        except ProcessLookupError:
            pass
        self.after = self.group.kill()  # what the subreaper could not end (normally nothing)
        self.memory = self.group.memory()

    def clean_up(self) -> None:
        """Whatever happened: the cell group, the temp folder, a preparing cell's mark."""
        self.group.kill()
        self.group.remove()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.preparing is not None:  # a cell that ended before its hand-over prepared until then
            beside.end(self.preparing)

    def outcome(self) -> RawOutcome:
        code, standby, warm = self.code, self.ctx.standby, self.server is not None
        # `timeout` dies of the signal that killed its child, so a SIGSEGV still reads as one
        sig = signal_name(-code) if code is not None and code < 0 else None
        # the host's OOM killer, seen by the cgroup: as Docker's rule, a kill that ended the cell
        oom = bool(self.memory.get("oom_kills")) and code != 0
        released = self.released_at[0] if self.released_at and not self.timed_out else None
        return RawOutcome(exit_code=code, signal=sig, oom_killed=oom, timed_out=self.timed_out,
                          seconds=self.seconds + self.warmth.waited,
                          went_at=standby.went_at if standby is not None else None, released_at=released,
                          detail={"pid": self.proc.pid, "memory_limit_bytes": self.limit,
                                  "variables": sorted(self.env), **self.warmth.detail(warm),
                                  "home": HOME_NOTE + ("; " + LAUNCHER_HOME_NOTE if warm else ""),
                                  "confinement": self.confine.record(self.folders),
                                  "leftovers": leftovers(read_reaped(self.workdir), self.after, self.group,
                                                         how="subreaper" + (" in a cgroup" if self.group.path else "")),
                                  "memory": self.memory})


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


