"""A cell's life, in one place, below every executor.

    stage the workloads -> prepare the environment (or learn it cannot be had)
    -> run the cell in a partial folder (or record it unsupported / unavailable)
    -> read the evidence once (`Evidence`) -> classify (`outcome.classify`)
    -> assemble the `Result` -> judge the expectation -> save result.json
    -> commit the folder to the store

The local runner (`runner.Runner`), a Slurm node's task
(`executors.slurm.task`) and the Slurm verdict for a task Slurm killed
(`executors.slurm.verdicts`) all go through `Lifecycle`, so a result is
written one way whoever runs the cell: `Lifecycle.finish` is the only code
path that saves a result.json of a new run, and `Lifecycle.rejudge` the only
one that rewrites a stored one (a changed `expect:`). Executors decide when
and where; this module decides what a cell's run produces.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from harness import WORKLOADS, chains, status, usercode
from harness.cells import Cell, Environment
from harness.engines import selfcheck
from harness.engines.base import Engine, Prepared, RunContext
from harness.environments import ledger
from harness.errors import CellUnsupported, EnvironmentUnavailable, EnvironmentUnsupported, UserError
from harness.host import resources
from harness.host.resources import Slot
from harness.launch.standby import Standby
from harness.results import record
from harness.results.evidence import Evidence
from harness.results.result import Result, load_folder
from harness.results.store import OWNER_VARIABLE, SPEC, ResultStore, scratch_prefix, write_json
from harness.status import outcome


def stage_workloads(run_dir: Path, codes=()) -> tuple[Path, str]:
    """Copy the workloads package next to the results, keyed by its content.

    Cells import it from there (mounted read-only in containers), so the code
    a result came from stays on disk beside it, and editing a workload never
    forces an image rebuild.
    """
    digest = record.sha256_of_tree(WORKLOADS)
    root = run_dir / ".workloads" / digest[:12]
    if not (root / "workloads" / "__init__.py").exists():
        # Several runs (or cluster tasks) may stage at once: each copies beside the final name
        # under a name of its own and renames; the first rename wins and the others' copies go.
        # A staged tree is never removed: another run's cells may be importing from it.
        tmp = root.with_name(f"{root.name}.tmp-{socket.gethostname()}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(WORKLOADS, tmp / "workloads", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        try:
            tmp.rename(root)
        except OSError:  # another run staged the same content first
            shutil.rmtree(tmp, ignore_errors=True)
    usercode.stage(root, codes)  # the user's code travels in the same tree (harness/usercode.py)
    return root, digest


def prepare(engine: Engine, env: Environment, run_dir: Path, workloads_root: Path | None,
            gpus: list | None = None) -> Prepared:
    """Build or reuse an environment, and self-check a GPU one before a cell spends time on it, on
    the run's GPUs (`gpus`, resources.Gpu; None: those a run takes by default, selfcheck.check).
    Raises EnvironmentUnsupported (a GPU stack on a host without one) or EnvironmentUnavailable."""
    if env.device == "gpu" and not resources.nvml_gpus():
        raise EnvironmentUnsupported("a GPU environment, and this host has no NVIDIA GPU (nvidia-smi lists none)")
    log_path = run_dir / ".build" / f"{env.name}-{env.content_hash()}.log"
    prepared = engine.prepare(env, log_path)
    if selfcheck.needed(env) and workloads_root is not None:  # CUDA / cuDNN present and working
        selfcheck.check(engine, prepared, workloads_root, log_path, reuse=True, gpus=gpus)
    return prepared


def judge(cell: Cell, result: Result, peer=None) -> dict | None:
    """Compare a control cell with the answer its matrix says it must give (`peer(cell_id)`:
    another stored result, for value expectations across environments)."""
    return status.judge(cell.expect, result, peer)


class Lifecycle:
    """Runs and records the cells of one run folder.

    `engine_name`, `matrix_label` and `matrix_sha256` go into every result;
    `provenance` is what the host adds to each (its resources); `monitor`
    (a GpuMonitor) gives the utilisation of a cell's GPUs over its steady epochs.
    """

    def __init__(self, store: ResultStore, engine_name: str, matrix_label: str, matrix_sha256: str, *,
                 provenance: dict | None = None, monitor=None):
        self.store = store
        self.engine_name = engine_name
        self.matrix_label, self.matrix_sha256 = matrix_label, matrix_sha256
        self.provenance = dict(provenance or {})
        self.monitor = monitor
        self.gpus: list | None = None  # the run's GPUs (the runner's inventory): the self-check's
        self.workloads_root: Path | None = None
        self.workloads_digest: str | None = None

    def stage(self, codes=()) -> Path:
        """Stage the workloads once for this run (before any cell starts), and the user's code
        folders `codes` (usercode.Code) beside them."""
        if self.workloads_root is None:
            self.workloads_root, self.workloads_digest = stage_workloads(self.store.run_dir, codes)
        else:
            usercode.stage(self.workloads_root, codes)
        return self.workloads_root

    def prepare(self, engine: Engine, env: Environment) -> Prepared:
        return prepare(engine, env, self.store.run_dir, self.workloads_root, self.gpus)

    # -- the ways a cell's life ends -----------------------------------------------------
    def run(self, engine: Engine, prepared: Prepared, cell: Cell, *, slot: Slot | None = None,
            cancel: threading.Event | None = None, standby: Standby | None = None,
            release: Callable[[], None] | None = None) -> Result:
        """Run a claimed cell in its slot and record what happened. Ctrl-C leaves no folder behind:
        an interrupted cell is not a result. An exception of the harness's own code around the cell
        is recorded as the cell's `error`, marked as the harness's (`harness_fault`). With
        `standby` the slot is still another cell's: this one prepares and waits for it (standby.py);
        `release` passes the slot on as soon as the cell is done with it (its end event)."""
        slot = slot or Slot()
        workloads_root = self.stage()
        started, clock = record.now(), time.monotonic()
        work = self.store.begin(cell)
        spawn = time.time()
        try:
            write_json(work / SPEC, cell.spec())
            if standby is not None:
                standby.attach(work)
            try:
                chains.hand_over(cell, self.store.run_dir, work)  # a producer's files, read-only
            except chains.Broken as exc:
                error = {"kind": "needs", "type": None, "message": str(exc), "signature": f"unavailable: {exc}",
                         "exit_code": None, "signal": None}
                return self.finish(cell, work, started, outcome.Verdict(status.UNAVAILABLE, error=error,
                                                                        reason=str(exc)),
                                   Evidence(), prepared.provenance, slot)
            # what the store needs of the cell's process, handed down so the engine never climbs into it
            ctx = RunContext(slot=slot, cancel=cancel, on_start=partial(self.store.note_process, work),
                             variables={OWNER_VARIABLE: self.store.run_id} if self.store.run_id else {},
                             scratch_prefix=scratch_prefix(work), standby=standby, release=release)
            raw = engine.run(prepared, cell, work, workloads_root, ctx)
        except CellUnsupported as exc:
            return self.finish(cell, work, started, outcome.Verdict(status.UNSUPPORTED, reason=str(exc)),
                               Evidence(), prepared.provenance, slot)
        except EnvironmentUnavailable as exc:  # found only at launch (a GPU runtime the engine lacks)
            shutil.rmtree(work, ignore_errors=True)
            return self.unavailable(cell, exc)
        except BaseException as exc:
            shutil.rmtree(work, ignore_errors=True)  # never leave half a result
            if not is_harness_fault(exc):
                raise  # Ctrl-C (supervise.Cancelled), a user's error: the run ends, the cell is not a result
            return self.harness_fault(cell, exc, prepared.provenance)
        evidence = Evidence.read(work, raw, spawned=spawn)
        evidence.utilisation = self._utilisation(slot, evidence)
        verdict = outcome.classify(raw, evidence.workload, evidence.last_event, evidence.stderr_tail,
                                   asked=cell.parallelism.devices, utilisation=evidence.utilisation)
        evidence.runner_seconds = time.monotonic() - clock
        return self.finish(cell, work, started, verdict, evidence, prepared.provenance, slot)

    def unsupported(self, cell: Cell, reason: str) -> Result:
        work = self._begin(cell)
        return self.finish(cell, work, record.now(), outcome.Verdict(status.UNSUPPORTED, reason=reason), Evidence())

    def unavailable(self, cell: Cell, exc: EnvironmentUnavailable) -> Result:
        started = record.now()
        work = self._begin(cell)
        (work / "build.log").write_text(exc.log_tail)
        error = {"kind": status.UNAVAILABLE, "type": None, "message": exc.reason,
                 "signature": outcome.signature(status.UNAVAILABLE, None, exc.reason), "exit_code": None,
                 "signal": None, "log_tail": exc.log_tail[-3000:]}
        return self.finish(cell, work, started, outcome.Verdict(status.UNAVAILABLE, error=error, reason=exc.reason),
                           Evidence())

    def not_run(self, cell: Cell, cause: BaseException | str) -> Result:
        """Record a cell that cannot run here: its environment failed, or the host lacks what it
        needs; or the harness's own code failed preparing it (`harness_fault`)."""
        if isinstance(cause, EnvironmentUnavailable):
            return self.unavailable(cell, cause)
        if isinstance(cause, EnvironmentUnsupported):
            return self.unsupported(cell, str(cause))
        if is_harness_fault(cause):
            return self.harness_fault(cell, cause)
        if isinstance(cause, BaseException):
            raise cause
        return self.unsupported(cell, cause)

    def harness_fault(self, cell: Cell, exc: BaseException, provenance: dict | None = None) -> Result:
        """Record a cell whose run the harness's own code failed around -- an engine that could not
        be set up, a launcher, a cluster task's bookkeeping -- as an `error` of kind
        `status.HARNESS_FAULT`, its traceback in the folder's harness.log. The cell is never lost
        to such a fault, nor blamed for it, and the next run tries it again
        (`status.retried_always`)."""
        started = record.now()
        work = self._begin(cell)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        (work / HARNESS_LOG).write_text(trace)
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        message = str(exc) or kind
        error = {"kind": status.HARNESS_FAULT, "type": kind, "message": message,
                 "signature": outcome.signature(status.HARNESS_FAULT, kind, message), "exit_code": None,
                 "signal": None, "log_tail": trace[-3000:]}
        reason = (f"the harness's own code failed around this cell, not the cell ({type(exc).__name__}: "
                  f"{message}); its traceback is in {HARNESS_LOG}, and the next run tries the cell again")
        return self.finish(cell, work, started, outcome.Verdict(status.ERROR, error=error, reason=reason),
                           Evidence(), provenance)

    def killed(self, cell: Cell, verdict_of: Callable[[Evidence], outcome.Verdict], *,
               evidence_from: Path | None, copy: Callable[[Path], None] | None = None,
               provenance: dict | None = None, started: str | None = None) -> Result:
        """Record a run that a scheduler ended from outside (a Slurm time-limit or memory kill):
        what the cell wrote before the kill is taken from `evidence_from` (its dead owner's partial
        folder); `copy(work)` adds the scheduler's own files (its log); `verdict_of` says what
        the kill means, given that evidence."""
        work = self._begin(cell)
        if evidence_from is not None:
            for name in KEPT_FROM_PARTIAL:
                if (evidence_from / name).is_file():
                    shutil.copy2(evidence_from / name, work / name)
        if copy is not None:
            copy(work)
        evidence = Evidence.read(work)
        return self.finish(cell, work, started or record.now(), verdict_of(evidence), evidence, provenance or {})

    # -- the one writer ---------------------------------------------------------------
    def finish(self, cell: Cell, work: Path, started: str, verdict: outcome.Verdict, evidence: Evidence,
               provenance: dict | None = None, slot: Slot | None = None) -> Result:
        """Assemble the result, judge the expectation, save result.json, commit the folder."""
        prov = {**(provenance or {}), **self.provenance}
        if self.workloads_digest is not None:
            prov["workloads_sha256"] = self.workloads_digest
        result = record.assemble(cell, self.engine_name, prov, verdict, evidence, self.matrix_label,
                                 self.matrix_sha256, started, slot=slot)
        code = usercode.describe(cell)
        if code:  # the user's own code this cell ran (harness/usercode.py)
            result.extra["code"] = code
            result.provenance["code_sha256"] = code["sha256"]
        result.extra.update(chains.result_fields(cell, work))
        result.expectation = judge(cell, result, self.peer)
        result.save(work)
        self.store.commit(work, cell)
        _cost_line(cell, result, self.engine_name)
        return result

    def rejudge(self, cell: Cell, result: Result) -> Result:
        """Judge a stored result against the matrix as it is now (an edited `expect:` changes the
        verdict, not the run) and store the new verdict, so `report` reads what `run` printed."""
        judged = judge(cell, result, self.peer)
        if judged != result.expectation or cell.expect != result.expect:
            result.expectation, result.expect = judged, cell.expect
            claim = self.store.claim(cell.id)
            if claim is not None:  # a live run owns the cell: it writes its own verdict
                try:
                    result.save(self.store.final_dir(cell))
                finally:
                    claim.release()
        return result

    def peer(self, cell_id: str) -> Result | None:
        """Another cell's stored result in this run folder (value expectations `same_as`)."""
        found = load_folder(self.store.run_dir / cell_id) if "/" in cell_id else None
        return found if isinstance(found, Result) else None

    # -- helpers -----------------------------------------------------------------------
    def _begin(self, cell: Cell) -> Path:
        work = self.store.begin(cell)
        write_json(work / SPEC, cell.spec())
        return work

    def _utilisation(self, slot: Slot, evidence: Evidence) -> dict | None:
        """NVML samples of the cell's own GPUs over its steady epochs (2..N)."""
        if not self.monitor or not slot.gpus:
            return None
        epochs = evidence.epochs_seen
        if len(epochs) < 2:
            return None
        start = epochs[0]["wall"]          # the end of epoch 1 = the start of the steady part
        end = epochs[-1]["wall"]
        return self.monitor.window([g.index for g in slot.gpus], start, end) or None


def _cost_line(cell: Cell, result: Result, engine: str) -> None:
    """The cell's line in the cache's ledger: what its process cost the host, and how much of that was
    starting -- the interpreter and the stack's import -- and the first epoch (tracing, compiling). A
    run's or a suite's time is mostly fixed costs of this kind, which no result table adds up."""
    t = result.timing or {}
    held = t.get("host_seconds") or t.get("total_seconds")
    if not held:   # decided before launch (unsupported here): no process, no cost
        return
    starting = sum(t.get(k) or 0 for k in ("interpreter_start_seconds", "import_seconds"))
    ledger.append("cell", engine=engine, environment=cell.environment.name, status=result.status,
                  seconds=round(held, 2), starting=round(starting, 2), first_epoch=t.get("first_epoch_seconds"))


HARNESS_LOG = "harness.log"  # a harness fault's traceback, in the cell's folder


def is_harness_fault(exc: BaseException | str) -> bool:
    """Is this exception, raised around a cell, the harness's own failure rather than an end the
    run means (Ctrl-C, a cancellation: KeyboardInterrupt) or the user's input (exit 2)?"""
    return isinstance(exc, Exception) and not isinstance(exc, UserError)


# What a killed cell's partial folder holds that its result should keep.
KEPT_FROM_PARTIAL = ("events.jsonl", "workload.json", "stdout.log", "stderr.log")
