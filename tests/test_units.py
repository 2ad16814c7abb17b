"""Fast, table-driven tests of the pure decisions: how GPU and CPU sets are
handed out, when a multi-device run counts as engaged, control-cell verdicts,
pip's failure line, and the store's ownership rule (with real processes)."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from harness import status
from harness.cells import Cell, Environment, Parallelism, Workload
from harness.environments.installer import failure as install_failure
from harness.host.resources import Gpu, Inventory, Pool
from harness.host.supervise import RawOutcome
from harness.results.result import Result
from harness.results.store import ResultStore
from harness.run.runner import _ranges
from harness.status.outcome import classify, not_engaged

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick


def _cell(devices: int, kind: str = "gpu", repeat: int = 0) -> Cell:
    return Cell(Environment("e", "3.11", "2.15.0"), Workload("w", "idle"), Parallelism("none", devices, kind),
                batch_size=1, epochs=1, repeat=repeat)


def _inventory(gpus: int, cpus: int, links: dict | None = None) -> Inventory:
    return Inventory([Gpu(str(i)) for i in range(gpus)], list(range(cpus)), "declared", links or {})


def test_gpu_sets_are_disjoint_and_given_back():
    pool = Pool(_inventory(4, 8))
    a, b = pool.take(_cell(2)), pool.take(_cell(2))
    assert {g.index for g in a.gpus} | {g.index for g in b.gpus} == {"0", "1", "2", "3"}
    assert not set(a.cpus) & set(b.cpus)
    assert pool.take(_cell(1)) is None          # no GPU left
    pool.give_back(a)
    assert len(pool.take(_cell(2)).gpus) == 2


def test_gpu_sets_prefer_nvlinked_pairs():
    # 0-1 and 2-3 over PCIe, 0-2 and 1-3 over NVLink: a 2-GPU cell gets an NVLink pair
    links = {}
    for a, b, kind in (("0", "1", "SYS"), ("2", "3", "SYS"), ("0", "2", "NV12"), ("1", "3", "NV12"),
                       ("0", "3", "SYS"), ("1", "2", "SYS")):
        links[(a, b)] = links[(b, a)] = kind
    pool = Pool(_inventory(4, 8, links))
    assert [g.index for g in pool.take(_cell(2)).gpus] == ["0", "2"]
    assert [g.index for g in pool.take(_cell(2)).gpus] == ["1", "3"]


@pytest.mark.parametrize("gpus,cpus,jobs,cells,want_jobs,want_cpus", [
    (0, 2, None, 7, 2, 1),      # a small host: one core per cell
    (0, 64, None, 3, 3, 21),    # fewer cells than cores: the cores are shared out
    (0, 8, 1, 5, 1, 8),         # --jobs 1: every core to each cell
    (8, 128, None, 20, 20, 6),  # a GPU host: CPU-only cells would share its cores out
])
def test_slots_follow_the_host_and_the_cells(gpus, cpus, jobs, cells, want_jobs, want_cpus):
    pool = Pool(_inventory(gpus, cpus), jobs=jobs, cells=cells)
    assert (pool.jobs, pool.cpus_per_cell) == (want_jobs, want_cpus)


def test_gpu_cells_get_cores_in_proportion_and_impossible_cells_are_named():
    pool = Pool(_inventory(8, 128))
    assert len(pool.take(_cell(2)).cpus) == 32
    assert pool.impossible(_cell(9)) == "9 GPUs asked, this host has 8 (declared)"
    assert pool.impossible(_cell(8)) is None


@pytest.mark.parametrize("numbers,text", [([0, 1, 2, 5], "0-2,5"), ([7], "7"), ([3, 1, 2, 9, 10], "1-3,9-10")])
def test_core_ranges(numbers, text):
    assert _ranges(numbers) == text


@pytest.mark.parametrize("engagement,utilisation,asked,problem", [
    ({"ran_on": 2}, None, 2, None),
    ({"ran_on": 1}, None, 2, "parallelism not engaged: asked 2, ran on 1"),
    ({"ran_on": None}, None, 2, None),                    # no witness: no verdict
    ({}, {"0": {"max": 30, "n": 9}, "1": {"max": 0, "n": 9}}, 2,
     "parallelism not engaged: asked 2, ran on 1 (GPU utilisation sampled through NVML)"),
    ({}, {"0": {"max": 30, "n": 9}, "1": {"max": 0, "n": 2}}, 2, None),   # too few samples to judge
    ({"ran_on": 1}, None, 1, None),
])
def test_engagement_rule(engagement, utilisation, asked, problem):
    assert not_engaged({"engagement": engagement}, asked, utilisation) == problem


def test_a_finished_run_that_did_not_engage_is_an_error_with_its_counts():
    verdict = classify(RawOutcome(0), {"outcome": "ok", "engagement": {"ran_on": 1}}, None, "", asked=4)
    assert verdict.status == status.ERROR
    assert verdict.error["signature"] == "engagement: parallelism not engaged: asked 4, ran on 1"


@pytest.mark.parametrize("expect,result,met", [
    ({"status": "error", "signature": "Runtime"}, {"status": "error", "error": {"signature": "x: RuntimeError"}}, True),
    ({"status": "error", "signature": "SIGBUS"}, {"status": "error", "error": {"signature": "x: RuntimeError"}}, False),
    ({"status": "unsupported", "signature": "3 gpu"}, {"status": "unsupported", "reason": "3 GPU devices asked"},
     True),
    ({"status": "ok"}, {"status": "crash"}, False),
])
def test_control_verdicts(expect, result, met):
    result = Result.from_dict({"schema": 1, "cell": "e/w/p/b1/r0", **result})
    assert status.judge(expect, result)["met"] is met
    assert status.judge(None, result) is None


def test_install_failure_names_the_conflict():
    log = ("ERROR: Cannot install keras==2.2.4 and tensorflow-cpu==2.15.1 because these package versions "
           "have conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested keras==2.2.4\n"
           "    tensorflow-cpu 2.15.1 depends on keras<2.16 and >=2.15.0\n\nERROR: ResolutionImpossible: ...\n")
    line = install_failure(log)
    assert line.startswith("Cannot install keras==2.2.4 and tensorflow-cpu==2.15.1")
    assert "depends on keras<2.16" in line


def _hold(root: str, cell_id: str, ready, release) -> None:
    claim = ResultStore(root, "run").claim(cell_id)
    ready.put(claim is not None)
    release.wait(30)


def test_a_cell_claimed_by_a_live_process_cannot_be_claimed_until_it_dies(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), "a/b/c", ready, release))
    proc.start()
    assert ready.get(timeout=30) is True
    store = ResultStore(tmp_path, "run")
    assert store.claim("a/b/c") is None            # held by the other process
    other = store.claim("a/b/d")
    assert other is not None and store.claim("a/b/d") is None   # and within one process too
    other.release()
    proc.kill()                                    # a hard kill drops the lock with the process
    proc.join()
    deadline = time.monotonic() + 5
    while (claim := store.claim("a/b/c")) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert claim is not None
    claim.release()


def test_every_model_loads_with_its_defaults(tmp_path):
    """A workload that names only its model takes the model's defaults, and they pass the limits."""
    from harness.matrix import MODEL_DEFAULTS, load
    models = "".join(f"  - {{model: {m}{', fault: abort' if m == 'fault' else ''}}}\n" for m in MODEL_DEFAULTS)
    path = tmp_path / "defaults.yaml"
    path.write_text('environments: [{python: "3.11", tensorflow: "2.15.0"}]\nworkloads:\n' + models)
    assert {c.workload.model for c in load(path).cells} == set(MODEL_DEFAULTS)


def test_the_slurm_watcher_backs_off_then_polls_every_n_seconds():
    from itertools import islice

    from harness.run.executors.slurm.queue import delays, watch
    assert list(islice(delays(10), 6)) == [2.0, 2.0, 4.0, 10.0, 10.0, 10.0]  # asked at 0, 2, 4, 8, 18, 28 s
    slept, looks = [], iter([False, False, True])
    watch(lambda: next(looks), wait=3600, poll=10, sleep=slept.append)
    assert slept == [2.0, 2.0], "it stops as soon as nothing is left to wait for"
    slept.clear()
    watch(lambda: False, wait=0, poll=10, sleep=slept.append)
    assert slept == [], "no wait: one look"


def test_runs_staging_the_workloads_at_once_all_get_one_whole_tree(tmp_path):
    """Two `harness run`s on one results folder stage the workloads at the same moment (seen in CI:
    both copied into one temporary folder and the loser died with FileExistsError). Each process
    now copies under its own name and the first rename wins; no one removes a staged tree."""
    import multiprocessing

    from harness.run.lifecycle import stage_workloads

    run_dir = tmp_path / "results" / "run"  # not tmp_path itself: its parent, pytest's base folder,
    run_dir.mkdir(parents=True)               # would then look like a results folder to other tests
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(6) as pool:
        roots = pool.map(stage_workloads, [run_dir] * 12)
    assert len({str(root) for root, _ in roots}) == 1
    root = roots[0][0]
    assert (root / "workloads" / "__init__.py").exists() and (root / "workloads" / "run.py").exists()
    assert not [p for p in root.parent.iterdir() if ".tmp-" in p.name]  # losers cleaned their copies


def test_a_group_goes_back_to_the_slot_its_launcher_holds(tmp_path):
    """Where a warm launcher holds its slot (a launcher container owns its cores), the scheduler
    (the real executor, cells that sleep) gives its group's cells that slot whenever it is free,
    and other cells the rest, instead of whichever core frees first: a group cell given other
    cores would find no launcher there."""
    import threading

    from harness.launch.launcher import Plan
    from harness.run.executors.local import Hooks, execute

    env = Environment("e", "3.11", "2.15.0")
    group = [Cell(env, Workload("g", "idle", {"seconds": 0.3}), Parallelism("none", 1, "cpu"), 1, 1, repeat=r)
             for r in range(4)]
    others = [Cell(Environment("f", "3.11", "2.15.0"), Workload("h", "idle", {"seconds": 0.1}),
                   Parallelism("none", 1, "cpu"), 1, 1, repeat=r) for r in range(24)]
    plan = Plan(group + others, why=lambda cell: None)
    ran: dict[str, tuple] = {}
    lock = threading.Lock()

    def run_cell(prepared, cell, slot, claim, cancel, standby=None, release=None):
        if cell is group[0]:  # the group's launcher starts in the first cell's slot, and holds it
            plan.home("launcher of g", cell, slot.cpus)
        time.sleep(cell.workload.params["seconds"])
        with lock:
            ran[cell.id] = slot.cpus
        return {}

    hooks = Hooks(prepare=lambda e: e, run_cell=run_cell, not_run=lambda *a: {}, finished=lambda *a: None,
                  waiting=lambda text: None)
    execute(group + others, ResultStore(tmp_path, "r"), Pool(_inventory(0, 2), cells=28), hooks, plan=plan)
    assert len(ran) == 28
    home = ran[group[0].id]
    assert [ran[c.id] for c in group] == [home] * 4
    assert {ran[c.id] for c in others} == {(0,), (1,)}, "the other cells use both cores"


def test_a_gpu_set_passes_to_the_cell_prepared_beside_it_never_back_through_the_pool(tmp_path):
    """The hand-over of standby.py, in the real executor with cells that sleep, on a declared
    inventory of two GPUs: cells that find none free stand by on a running set (one each), get
    it when its cell ends and never before; a follower that ends before its turn (an error while
    preparing) leaves the set to its cell, which gives it back to the pool as usual. Then the
    relay alone: a follower behind a follower, sets cut into pieces, and a follower that joins a
    smaller running set with free GPUs."""
    import threading

    from harness.launch.standby import Relay
    from harness.run.executors.local import Hooks, execute

    env = Environment("e", "3.12", keras="3.15.1", backend="jax", device="gpu")
    cells = [Cell(env, Workload("w", "idle", {"seconds": 0.3}), Parallelism("data_parallel", 2, "gpu"), 1, 1,
                  repeat=r) for r in range(4)]
    lock, log = threading.Lock(), []

    def run_cell(prepared, cell, slot, claim, cancel, standby=None, release=None):
        with lock:
            log.append(("start", cell.repeat, standby is not None))
        if standby is not None:
            if cell.repeat == 2:  # fails while it prepares: it never holds the GPUs
                return {}
            assert standby.went.wait(10), "never handed its GPUs"
        with lock:
            log.append(("train", cell.repeat, slot.visible_devices))
        time.sleep(0.3)
        with lock:
            log.append(("end", cell.repeat, slot.visible_devices))
        return {}

    pool = Pool(_inventory(2, 4), cells=4)
    hooks = Hooks(prepare=lambda e: e, run_cell=run_cell, not_run=lambda *a: {}, finished=lambda *a: None,
                  waiting=lambda text: None, stands_by=lambda cell: True)
    execute(cells, ResultStore(tmp_path, "r"), pool, hooks)
    trains = [e for e in log if e[0] in ("train", "end")]
    assert [e[0] for e in trains] == ["train", "end"] * 3, "two cells trained on one set at once"
    assert [e for e in log if e[0] == "start" and e[2]], "no cell stood by"
    assert pool.free_gpus == ["0", "1"] and pool.running == 0  # every set back in the pool at the end
    # the relay alone: one follower per piece and one behind it; a withdrawn one leaves its place
    # to the one behind it; a set of two GPUs is cut for one-GPU followers, and a piece with no
    # follower goes back to the pool
    pool = Pool(_inventory(2, 4))
    relay = Relay(pool)
    slot = pool.take(cells[0])
    relay.held(slot)
    _, first = relay.follow(2)
    assert relay.follow(1) is None   # one count per set
    _, behind = relay.follow(2)      # one more prepares behind the follower...
    assert relay.follow(2) is None   # ...never deeper
    relay.ended(slot, first)         # the follower ended before its turn: the one behind takes its place
    assert not first.went.is_set() and not behind.went.is_set() and pool.free_gpus == []
    relay.ended(slot, None)          # its cell ends: the set passes to the one that was behind
    assert behind.went.is_set() and pool.free_gpus == [] and pool.running == 1
    (zero, second), (one, third), (again, fourth), (later, fifth) = (relay.follow(1) for _ in range(4))
    assert [p.visible_devices for p in (zero, one, again, later)] == ["0", "1", "0", "1"]
    assert len(zero.cpus) == 2 and relay.follow(1) is None
    relay.ended(slot, behind)        # GPU 0 to the second, GPU 1 to the third; the two behind follow them
    assert second.went.is_set() and third.went.is_set() and not (fourth.went.is_set() or fifth.went.is_set())
    assert pool.free_gpus == [] and pool.running == 2
    relay.ended(zero, second)        # GPU 0 passes on again, never through the pool
    assert fourth.went.is_set() and pool.free_gpus == []
    relay.ended(later, fifth)        # the fifth failed while it prepared: GPU 1 stays the third's
    relay.ended(one, third)
    assert not fifth.went.is_set() and pool.free_gpus == ["1"]
    relay.ended(again, fourth)
    assert pool.free_gpus == ["0", "1"] and pool.running == 0 and sorted(pool.free_cpus) == [0, 1, 2, 3]
    # a two-GPU follower with no two-GPU set to follow joins the longest-held one-GPU set that has
    # no follower and a free GPU: it holds the free one from then on, and the two run as one slot
    pool = Pool(_inventory(4, 8))
    relay = Relay(pool)
    singles = [pool.take(_cell(1)) for _ in range(3)]  # GPUs 0, 1, 2; GPU 3 free
    for single in singles:
        relay.held(single)
    assert relay.follow(1, keep=2) is None             # while a two-GPU cell waits, one-GPU cells leave the sets to it
    pair, joined = relay.follow(2)
    assert pair.visible_devices == "0,3" and pool.free_gpus == [] and len(pair.cpus) == 4
    _, behind = relay.follow(2)                        # one behind it; no free GPU for another join
    assert relay.follow(2) is None
    relay.ended(pair, joined)                          # ended before its turn: the one behind takes its place
    relay.ended(singles[0], None)                      # GPU 0's cell ends: GPUs 0 and 3 go as one slot
    assert behind.went.is_set() and pool.free_gpus == [] and pool.running == 3
    relay.ended(pair, behind)
    assert pool.free_gpus == ["0", "3"] and pool.running == 2
    other, alone = relay.follow(2)                     # joins GPU 1 and takes GPU 0...
    assert other.visible_devices == "0,1" and pool.free_gpus == ["3"]
    relay.ended(other, alone)                          # ...and gives it back when it ends before its turn
    assert pool.free_gpus == ["0", "3"] and pool.running == 2
    for single in singles[1:]:
        relay.ended(single, None)
    assert pool.free_gpus == ["0", "1", "2", "3"] and pool.running == 0 and len(pool.free_cpus) == 8


def test_reading_a_results_folder_while_a_run_churns_its_scratch_space(tmp_path):
    """Seen in CI: `**/result.json` globbed over a live run failed when a staging folder vanished
    between being listed and being entered. The store's readers (`iter_results`, the partial-folder
    sweep) pass over what vanishes, and never look inside a live cell's half-written folder."""
    import json
    import shutil
    import threading

    from harness.results.store import iter_results

    run_dir = tmp_path / "results" / "run"
    for cell in ("env/a", "env/b"):
        (run_dir / cell).mkdir(parents=True)
        (run_dir / cell / "result.json").write_text(json.dumps({"cell": cell, "status": "ok"}))
    stop, failed = threading.Event(), []
    live = ResultStore(tmp_path / "results", "run").claim("env/c")    # a live run's cell: its folder is its own

    def churn():
        n = 0
        try:
            while not stop.is_set():
                for scratch in (run_dir / ".workloads" / f"x.tmp-{n}", run_dir / "env" / f"c.partial-h-{n}"):
                    (scratch / "deep" / "er").mkdir(parents=True)
                    (scratch / "deep" / "er" / "result.json").write_text("{}")
                    shutil.rmtree(scratch)
                n += 1
        except OSError as exc:                      # the sweep must never touch a live cell's folder
            failed.append(exc)

    churner = threading.Thread(target=churn)
    churner.start()
    store = ResultStore(tmp_path / "results", "run")
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert sorted(r["cell"] for _, r in iter_results(run_dir)) == ["env/a", "env/b"]
            store.clean_partials()
    finally:
        stop.set()
        churner.join()
        live.release()
    assert not failed, failed


def test_one_process_launcher_serves_every_gpu_set_of_its_group(tmp_path):
    """On a GPU host the first cell on each GPU set used to wait for a launcher of its own (the
    GPUs were part of the key): one real launcher now serves GPU 0 and GPU 1, and each fork is
    handed its own GPUs; a container launcher (`where`: its devices) still has one per set."""
    import sys
    from pathlib import Path

    from harness.launch.launcher import Launcher, Plan
    from harness.launch.warmserver import Server

    env = Environment("e", "3.11", keras="3.15.1", backend="jax", device="gpu")

    def cell(devices: int, repeat: int) -> Cell:
        return Cell(env, Workload("w", "idle", {"seconds": 0.1}), Parallelism("data_parallel", devices, "gpu"), 1, 1,
                    repeat=repeat)

    cells = [cell(1, 0), cell(1, 1), cell(1, 2), cell(1, 3), cell(1, 4)]
    made: list = []

    def make(*args, where=None, **kwargs):  # a real process launcher, whatever keyed it
        made.append(where)
        return Server(*args, **kwargs)

    launcher = Launcher(why=lambda c: None, make=make)
    launcher.plan = Plan(cells, why=lambda c: None)
    workloads = Path(__file__).resolve().parent.parent / "harness"
    try:
        for c, gpus in zip(cells[:3], ("0", "1", "0"), strict=True):
            launcher.plan.begin(c)
            variables = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(workloads), "CUDA_VISIBLE_DEVICES": gpus}
            server = launcher.server(sys.executable, c, variables, workloads, tmp_path / f"{gpus}.log")
            assert not isinstance(server, str) and server.ready, server
        assert made == [None], "one launcher for both GPUs"
        launcher.plan.begin(cells[3])
        for where in ("gpu 0", "gpu 1"):
            launcher.server(sys.executable, cells[3], {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(workloads)},
                            workloads, tmp_path / "c.log", where=where)
        assert made == [None, "gpu 0", "gpu 1"]
    finally:
        launcher.close()


def test_the_launchers_of_the_next_gpu_groups_start_while_a_cell_trains():
    """When a GPU cell forks, the schedule names one cell of each other GPU group of its
    environment with two or more cells to come, once: their launchers import beside it instead
    of while the group's first cell holds its GPUs. A group with one cell left, another
    environment's group and CPU cells get none."""
    from harness.launch.launcher import Plan

    env, other_env = (Environment(n, "3.11", keras="3.15.1", backend="jax", device="gpu") for n in ("e", "f"))

    def cell(environment, model: str, devices: int, repeat: int, kind: str = "gpu") -> Cell:
        return Cell(environment, Workload(model, model, {}), Parallelism("data_parallel", devices, kind), 1, 1,
                    repeat=repeat)

    idle = [cell(env, "idle", 1, r) for r in range(2)]
    dense = [cell(env, "dense", 1, r) for r in range(2)] + [cell(env, "dense", 2, 0)]
    lonely = [cell(env, "convnet", 1, 0)]
    elsewhere = [cell(other_env, "dense", 1, r) for r in range(2)]
    cpu = [cell(env, "dense", 1, r, "cpu") for r in range(2)]
    plan = Plan(idle + dense + lonely + elsewhere + cpu, why=lambda c: None)
    plan.begin(idle[0])
    assert plan.ahead(idle[0]) == [dense[0]], "dense on 1 GPU"
    assert plan.ahead(idle[1]) == [], "each group once"
    assert plan.ahead(cpu[0]) == []


def test_a_reduction_never_keeps_a_cut_that_drops_a_seed():
    """A candidate that calls a seeder the original seeded with no seed passes or fails by chance
    (the reducer prefers it: it is shorter); it is refused before it runs. Other seeders, and a
    seeder the original itself called bare, are the candidate's business."""
    from harness.investigate.reduce_source import seeders, unseeded

    original = ("import random\nimport numpy as np\nimport tensorflow as tf\nrng = np.random.RandomState(0)\n"
                "tf.random.set_seed(seed=1)\nrandom.seed()\nx = rng.normal(size=3)\n")
    seeded = seeders(original)
    assert seeded == {"RandomState", "set_seed"}
    assert unseeded(original.replace("RandomState(0)", "RandomState()"), seeded)
    assert unseeded(original.replace("set_seed(seed=1)", "set_seed()"), seeded)
    assert not unseeded(original, seeded)
    assert not unseeded("import random\nrandom.seed()\n", seeded), "the original called random.seed() bare"


def test_standing_by_is_asked_of_warm_gpu_cells_and_the_switch_turns_it_off(tmp_path, monkeypatch):
    """A warm run stands a GPU cell of a stack that shares its GPUs' memory by on a running set; with
    HARNESS_STANDBY=off in the harness's environment (bench/warm.py --standby off) none is, and a
    fresh run never stands one by."""
    from harness.engines.venv import VenvEngine
    from harness.launch.standby import SWITCH

    engine = VenvEngine(root=tmp_path)
    engine.warm = True
    monkeypatch.delenv(SWITCH, raising=False)
    assert engine.stands_by(_cell(1)) and not engine.stands_by(_cell(1, "cpu"))
    monkeypatch.setenv(SWITCH, "off")
    assert not engine.stands_by(_cell(1))
    monkeypatch.setenv(SWITCH, "on")
    engine.warm = False
    assert not engine.stands_by(_cell(1))


def test_releases_a_python_cannot_install_are_each_said_under_their_own_reason():
    """A range said not to install holds for every release in it: neighbours under one reason
    form a run, and the next reason starts another (upgrade's note, and the verdict's)."""
    from harness.upgrade.course import unfit_spans

    unfit = {"2.16.1": "requires Python >=3.9", "2.17.0": "requires Python >=3.9", "2.19.0": "requires Python >=3.10"}
    assert unfit_spans(["2.16.1", "2.17.0", "2.19.0", "2.20.0"], unfit) == (
        "2.16.1 to 2.17.0 not tried: requires Python >=3.9; 2.19.0 not tried: requires Python >=3.10; "
        "2.20.0 not tried: no file")
