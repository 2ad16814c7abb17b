"""The options several verbs take, each declared once: the matrix, the results and output folders,
how version ranges expand, the host's resources for cells, and the executor (with the Slurm options).
A flag that every verb spells, defaults and describes the same way reads the same in every --help."""

from __future__ import annotations

import argparse

from harness import status
from harness.options.slurm import add_arguments as add_slurm_arguments
from harness.options.types import gpu_list, seconds, whole

DEFAULT_MATRIX = "matrices/smoke.yaml"
DEFAULT_RESULTS = "results"
STATUSES = (*status.ALL, "all")
positive = whole(1, 4_096)  # cells at once, cores per cell
__all__ = ["gpu_list", "seconds", "whole"]  # the argument types the verbs take from here


def add_matrix(p: argparse.ArgumentParser, required: bool = False) -> None:
    """The positional MATRIX file: named by the user, or (not `required`) the smoke matrix by default."""
    if required:
        p.add_argument("matrix", metavar="MATRIX")
    else:
        p.add_argument("matrix", nargs="?", default=DEFAULT_MATRIX)


def add_results(p: argparse.ArgumentParser, default: str | None = DEFAULT_RESULTS,
                what: str = "results folder") -> None:
    """--results DIR: `what` the folder is to this verb, then its default (None: `what` says it)."""
    p.add_argument("--results", default=default, metavar="DIR",
                   help=what if default is None else f"{what} (default: {default})")


def add_out(p: argparse.ArgumentParser, default: str, what: str, tell_default: bool = True) -> None:
    """--out DIR, where the verb writes what it makes: `what` goes there, then (`tell_default`) its default."""
    p.add_argument("--out", default=default, metavar="DIR",
                   help=f"{what} (default: {default})" if tell_default else what)


def add_release_args(p: argparse.ArgumentParser, results: bool = False) -> None:
    """How version ranges expand; with `results`, also --results (the run whose expansion is reused)."""
    if results:
        add_results(p, what="version ranges expand as this results folder recorded them")
    p.add_argument("--refresh-releases", action="store_true",
                   help="version ranges: ask the package index again instead of reusing the expansion this "
                        "results folder recorded (new releases become new cells)")
    p.add_argument("--offline", action="store_true",
                   help="version ranges: expand from the cached release lists only, never the index")


def add_resource_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", "-j", type=positive, metavar="N",
                   help="run at most N cells at once (default: as many as the host's cores and GPUs allow; "
                        "--jobs 1 runs one cell at a time with every core)")
    p.add_argument("--gpus", metavar="IDS", type=gpu_list,
                   help="the GPUs cells may use, e.g. 0,1,2,3 (default: CUDA_VISIBLE_DEVICES if set, "
                        "else every GPU NVML lists); each GPU cell is given its own")
    p.add_argument("--cpus-per-cell", type=positive, metavar="K",
                   help="cores pinned to each CPU cell (default: the host's cores divided by --jobs)")


def add_slurm_args(p: argparse.ArgumentParser,
                    how: str = "one Slurm job-array task per cell (submits and returns)") -> None:
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help=f"where cells run: this host, or {how}")
    add_slurm_arguments(p.add_argument_group("slurm executor (override the matrix's slurm: section)"))
