"""``harness portability``: ``run`` (every stack of a stacks file writes the seeds' models in every
format it has, then every stack loads every file; resumable, as any matrix), ``check`` (a user's own
file on every stack), ``explain`` and ``bisect`` (what the grid found, to its layer and its release) and
``publish`` (the judged records, CSV and the grid page, from the results).
Exit 0; 1 when a run left cells without a result or not ok; 2 for input that cannot be used.
The actions' work is harness/portability/actions.py, imported when one runs: the CLI starts without it."""

from __future__ import annotations

from rich.console import Console

from harness.commands.common import engine_for
from harness.options.engine import add_engine_args
from harness.options.shared import add_out, add_resource_args, add_results, add_slurm_args

STACKS = "matrices/portability/stacks.yaml"
RESULTS = "results/portability"
OUT = "docs/portability"


def add(sub) -> None:
    p = sub.add_parser("portability", help="model files saved on one release, loaded on another",
                       description="Every stack of a stacks file saves the seeds' models (GRU, LSTM, convnet, a "
                                   "custom layer) in every format it writes; every stack loads every file by each "
                                   "way its users would try, and each file is judged: loads and predicts the same, "
                                   "loads but predicts differently, refuses, or a format the reader cannot know. "
                                   "Exit 0; 1 when cells were left without a result or not ok; 2 for bad input.")
    acts = p.add_subparsers(dest="action", required=True)
    r = acts.add_parser("run", help="write and read every pair; resumable (finished cells are kept)")
    r.add_argument("stacks_file", nargs="?", default=STACKS, metavar="STACKS",
                   help=f"a YAML file whose 'environments:' are the stacks, as a matrix's (default: {STACKS})")
    r.add_argument("--stacks", action="append", metavar="GLOB",
                   help="only the stacks whose name matches, as writers and as readers (repeatable): a slice of a "
                        "large grid; every finished pair is kept, and a later slice reads only what is missing")
    r.add_argument("--row-and-column", action="store_true",
                   help="with --stacks: every pair with either end among them -- their row and column against "
                        "every stack of the file (a new release's cost), not only the pairs between them")
    add_results(r, RESULTS)
    r.add_argument("--disk-bound", action="store_true",
                   help="one stack's environment at a time (venv engine): every stack writes, then every stack "
                        "reads, the virtualenv each pass built removed after it with its own uv cache -- about one "
                        "stack of disk at the peak, each stack built twice (the PyTorch stacks are about 7 GB each)")
    add_engine_args(r)
    add_resource_args(r)
    add_slurm_args(r, "Slurm job arrays: the writers first; run it again once they are done, and the readers "
                      "go (each waits for its writer's files)")
    c = acts.add_parser("check", help="your own model file, loaded on every stack: loads? predicts the same?",
                        description="Your model file (.h5, .keras, a SavedModel folder) loaded on every stack "
                                    "of --stacks and its predictions compared. Exit 0: some stack reads it the "
                                    "same; 1: none does (each stack's answer is printed); 2: bad input.")
    c.add_argument("model", metavar="FILE", help="an HDF5 model (.h5), a .keras archive, or a SavedModel folder "
                                                 "(read where it lies: on virtualenvs, or --engine local)")
    c.add_argument("stacks", nargs="?", default=STACKS, metavar="STACKS",
                   help=f"the stacks to load it on, as for run (default: {STACKS})")
    c.add_argument("--writer", metavar="STACK", help="the stack that wrote it (its name in STACKS): the reference")
    c.add_argument("--custom", metavar="FILE.py", help="a Python file that defines the model's own layers")
    c.add_argument("--inputs", metavar="FILE.npy", help="the model's inputs to predict on, as a NumPy array (default: "
                                                         "sixteen drawn from its input's shape: token ids for an "
                                                         "Embedding)")
    add_results(c, f"{RESULTS}-check")
    add_out(c, "bundles/portability", "where check.json and a repro bundle per refusal or difference go")
    add_engine_args(c)
    add_resource_args(c)
    ex = acts.add_parser("explain", help="where each group of files that load but predict differently parts from "
                                         "its writer, layer by layer")
    add_results(ex, RESULTS, "the grid's results folder")
    add_out(ex, OUT, "the published grid's folder: the evidence goes to DIR/evidence, and the next publish links it")
    ex.add_argument("--probes", metavar="DIR", help="the probes' results folder (default: the grid's, -probes)")
    ex.add_argument("--group", action="append", metavar="ID", help="only this group (repeatable; the ids are "
                                                                     "the evidence files' names)")
    ex.add_argument("--again", action="store_true",
                    help="probe again the pairs probed before (a probe's result is kept, as any cell's: after the "
                         "harness's probe changed, its evidence is new only with this)")
    add_engine_args(ex)
    add_resource_args(ex)
    bs = acts.add_parser("bisect", help="narrow each change, along a line of readers or of writers, to the release "
                                        "that made it")
    add_results(bs, RESULTS, "the grid's results folder")
    add_out(bs, OUT, "the published grid's folder: each change's evidence goes to DIR/evidence/changes, and the "
                     "next publish adds it to the change")
    bs.add_argument("--change", action="append", metavar="ID",
                    help="only this change (repeatable; the ids are in changes.json)")
    bs.add_argument("--again", action="store_true", help="narrow the changes that already have evidence too")
    bs.add_argument("--bundles", default="bundles/portability-bisect", metavar="DIR",
                    help="where each bisect's repro bundle of the changed release goes (default: "
                         "bundles/portability-bisect)")
    add_engine_args(bs)
    add_resource_args(bs)
    pub = acts.add_parser("publish", help="the judged records (JSON, CSV) and the grid page")
    add_results(pub, RESULTS)
    add_out(pub, OUT, "where the data and the page go")


def command(args, console: Console) -> int:
    from harness.portability import actions  # the verb's work is imported when the verb runs: not at CLI start

    if args.action == "publish":
        return actions.publish_grid(args, console)

    def engine():
        return engine_for(args, console)
    act = {"run": actions.run_grid, "check": actions.check_file, "explain": actions.explain_groups,
           "bisect": actions.bisect_changes}[args.action]
    return act(args, console, engine)
