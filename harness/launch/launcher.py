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
the server (``warmserver.WarmChild.poll``). The server's stdin is a pipe from the
harness: when the harness dies, even by ``kill -9``, the server sees
end-of-file, kills every child's group and exits.

The run's schedule of launchers is here too (`Plan`): which launchers a warm run starts, and when
cells wait for one -- the scheduler's side of warm launch, beside the launchers it starts. It sees
every cell the run has still to run, before any has its slot, and counts them by the launcher that
could serve them (`group`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.cells import BUILT_IN_MODELS, Cell
from harness.errors import CellUnsupported
from harness.host.supervise import Cancelled
from harness.launch import allocation, caches, preflight
from harness.launch.warmserver import Server, ServerBase


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
    if model == "script" and not is_trial(cell) and not ships_with_harness(cell):
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


# The harness's own package: a script inside it (the portability grid's writer and reader) is
# written to run forked -- it imports its environment's stack first and sets nothing before it.
HARNESS_PACKAGE = Path(__file__).resolve().parents[1]


def ships_with_harness(cell: Cell) -> bool:
    """Whether the cell's script is one of the harness's own (its folder inside the harness's
    package), which forks from its stack's launcher as a built-in model does; a user's never is."""
    code = cell.workload.code
    if code is None:
        return False
    try:
        Path(code.source).resolve().relative_to(HARNESS_PACKAGE)
    except ValueError:
        return False
    return True


def forks(cell: Cell, why: Callable[[Cell], str | None] = fresh_because) -> bool:
    """Whether a warm run would fork this cell from a launcher (it is neither fresh by nature
    -- `why`, the engine's own reasons -- nor decided on the host without a launch)."""
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


ONLY_CELL = ("it was the only cell of its launcher left to run (a launcher starts for two or more, "
             "so that its import never runs beside a cell it does not serve)")
NO_PLAN = "no schedule said other cells of its environment follow (a launcher starts for two or more)"


class Launcher:
    """The warm servers of one engine, closed with the engine.

    A server starts only when the run's schedule (`plan`, a `Plan`) says at
    least one more cell of the cell's group follows; it imports on the cell's
    own cores while that cell waits, and the cell then forks from it (see
    `Plan` for why this is the cheaper schedule). Without a plan (a Slurm
    task: one cell) no server starts and the cell starts fresh.
    """

    def __init__(self, why: Callable[[Cell], str | None] = fresh_because,
                 make: Callable[..., ServerBase] | None = None) -> None:
        self._servers: dict[str, ServerBase] = {}
        self._lock = threading.Lock()
        self.refusals: dict[str, str] = {}
        self.plan = None              # the run's schedule (Plan), set on a warm run
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
        foresaw its group's cells (Plan.ahead), and its import runs while other cells
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


# -- the run's schedule of launchers: which start, and when cells wait for one -----------------
def group(cell: Cell) -> tuple:
    """The cells that one launcher can serve, as the scheduler sees them before any cell has its
    slot: the environment, the device kind and count (its compile cache is the count's), what it
    imports. One process launcher serves a GPU group on every GPU set (launch.shares_gpus); a
    container launcher is also keyed by the GPUs the cell is given, known only when it gets them."""
    p = cell.parallelism
    return (cell.environment.name, cell.environment.content_hash(), p.device_kind, p.devices,
            tuple(imports(cell)))


class Plan:
    """Which launchers a warm run starts, and when cells wait for one (the scheduler's side).

    - **Only where it pays.** A launcher starts only for a group (``group``) with at least two
      cells still to run: a single cell forked from a launcher pays the same import a fresh cell
      pays, plus the launcher's. `left` counts the cells not yet handed to a slot.
    - **Its import takes a slot.** A launcher imports in the slot of the first cell that needs
      it, pinned to that slot's cores, and that cell waits for it, then forks (its wait counts
      in its time). So the import is scheduled exactly like a cell: it holds cores no measured
      cell runs on, and it holds them for no longer than the fresh cell it replaces would have
      spent importing the same stack. (On a GPU host the slot is the cell's GPUs with their
      share of cores; the GPUs idle for the import as they would for a fresh cell's.)
    - **The rest wait, off the cores.** While a CPU group's launcher imports, the scheduler
      holds its other cells back (`holding`) and gives free slots to other cells. Waiting is
      never the dearer choice: the launcher started before any of them could start fresh, so
      what is left of its import is shorter than a whole fresh import, and a held-back cell
      holds no slot while it waits. (Starting fresh beside it would also put a second import of
      the same stack on the machine.) A GPU group is not held back: a cell given other GPUs
      while its group's launcher imports waits in its slot for that same import (what is left of
      it, never more than its own fresh import), and forks from it onto its own GPUs.
    - **Ahead, on GPUs.** When a GPU cell forks, the launchers of its environment's other GPU
      groups with two or more cells to come start at once (`ahead`), unpinned, while it trains:
      an import touches no GPU, a GPU host's cores outnumber its cells, and the first cell of
      each such group then forks at once instead of holding its GPUs idle through an import. The
      cells an early import ran beside say so in their results (beside.py).
    - A launcher that refuses costs the one import; its cells then start fresh and say why.
    - **Home slots.** Where a launcher is its slot's (a launcher container holds its cores), a
      group's cells go back to that slot when it is free (`homes`): a cell given other cores
      would find no launcher there and start fresh, or import a second one. The scheduler gives
      a free slot first to a cell at home there or with no home; a cell whose home is busy takes
      another slot only when no other cell can use it, so no core idles for a preference.
    """

    def __init__(self, cells: list[Cell], why: Callable[[Cell], str | None] = fresh_because):
        self._why = why  # the engine's reasons a cell starts fresh (Engine.fresh_because)
        self._left = Counter(group(c) for c in cells if forks(c, why))
        self._importing: set[tuple] = set()
        self._settled: set[tuple] = set()
        self._lock = threading.Lock()
        self._homes: dict[str, tuple[tuple, tuple[int, ...]]] = {}  # launcher key -> (group, its cores)
        self.on_settle: Callable[[], None] | None = None
        self._example: dict[tuple, Cell] = {}  # one cell of each group, for a launcher started ahead
        for c in cells:
            if forks(c, why):
                self._example.setdefault(group(c), c)
        self._ahead: set[tuple] = set()

    def begin(self, cell: Cell, runs: bool = True) -> bool:
        """The scheduler hands `cell` a slot (`runs`) or records it without running it. True: it
        is the first cell of a CPU group with others to follow, whose launcher it starts; the
        scheduler calls `settle(cell)` when the cell ends, whatever became of it."""
        if not forks(cell, self._why):
            return False
        g = group(cell)
        with self._lock:
            self._left[g] = max(0, self._left[g] - 1)
            if (runs and cell.parallelism.device_kind != "gpu" and self._left[g] >= 1
                    and g not in self._importing and g not in self._settled):
                self._importing.add(g)
                return True
        return False

    def ahead(self, cell: Cell) -> list[Cell]:
        """One cell of each other GPU group of `cell`'s environment with two or more cells still
        to run, whose launcher may start now, while `cell` trains (each group once)."""
        if not shares_gpus(cell):
            return []
        mine = group(cell)
        with self._lock:
            out = [c for g, c in self._example.items() if g[:2] == mine[:2] and g != mine and shares_gpus(c)
                   and g not in self._ahead and self._left[g] >= 2]
            self._ahead.update(group(c) for c in out)
        return out

    def left(self, cell: Cell) -> int:
        """Cells of the cell's group still to be given a slot (the cell itself not counted)."""
        with self._lock:
            return self._left[group(cell)]

    def holding(self, cell: Cell) -> bool:
        """Whether the scheduler should hold the cell back: its group's launcher is importing."""
        if cell.parallelism.device_kind == "gpu" or not forks(cell, self._why):
            return False
        with self._lock:
            return group(cell) in self._importing

    def home(self, key: str, cell: Cell, cpus) -> None:
        """A launcher that holds its slot (`key`, as the Launcher names it) started on `cpus`."""
        if cell.parallelism.device_kind != "gpu" and cpus:
            with self._lock:
                self._homes[key] = (group(cell), tuple(sorted(cpus)))

    def leave(self, key: str) -> None:
        """That launcher is gone (refused, died, closed)."""
        with self._lock:
            self._homes.pop(key, None)

    def homes(self, cell: Cell) -> list[tuple[int, ...]]:
        """The cores of the launchers that hold a slot and serve the cell's group ([] for a GPU
        cell, or on an engine whose launchers serve any slot)."""
        if cell.parallelism.device_kind == "gpu" or not self._homes:
            return []
        g = group(cell)
        with self._lock:
            return [cpus for owner, cpus in self._homes.values() if owner == g]

    def settle(self, cell: Cell) -> None:
        """The cell's group is done importing (ready, refused, or never started): release it."""
        g = group(cell)
        with self._lock:
            if g not in self._importing:
                return
            self._importing.discard(g)
            self._settled.add(g)
        if self.on_settle:
            self.on_settle()
