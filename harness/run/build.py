"""``harness build MATRIX``: prepare every environment of a matrix without running a cell.

The usual way to work with GPUs: build on a CPU-only machine (CI, a login
node), check, then take the result to GPU nodes. So GPU environments are
built here even where this host has no GPU, and each is self-checked (see
:mod:`harness.engines.selfcheck`): the CUDA / cuDNN libraries its framework was built
for must be present and load, and on a GPU host a few GPU operations must
run. An environment that cannot be had, or fails its check, is `unavailable`
with the reason, exactly as a run would record it.

``--export DIR`` turns built images into what clusters without Docker run:
``docker save`` archives plus the Apptainer / enroot commands for them.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness import status
from harness.cells import Cell, Environment
from harness.engines import selfcheck
from harness.engines.base import Engine
from harness.errors import EnvironmentUnavailable
from harness.run.lifecycle import stage_workloads
from harness.terminal import shown

STATUS_COLOUR = {"built": "green", "reused": "green", status.UNAVAILABLE: "yellow"}


@dataclass
class Outcome:
    """What became of one environment."""

    environment: Environment
    status: str                      # built | reused | unavailable
    reason: str | None = None        # why unavailable
    seconds: float = 0.0
    check: dict | None = None        # the self-check's report (GPU environments)
    provenance: dict = field(default_factory=dict)
    exported: list[str] = field(default_factory=list)

    def line(self) -> str:
        env = self.environment
        text = f"{self.status:>11} {env.name} ({env.device}, {self.seconds:.0f} s)"
        if self.reason:
            return f"{text}: {self.reason}"
        if self.check is not None:
            text += f"; self-check ok: {selfcheck.summary(self.check)}"
        elif not selfcheck.needed(env):
            text += "; CPU environment: no self-check"
        return text + "".join(f"\n            exported: {e}" for e in self.exported)


def environments(cells: list[Cell]) -> list[Environment]:
    """Each environment once, in matrix order."""
    return list({c.environment.name: c.environment for c in cells}.values())


def build(cells: list[Cell], engine: Engine, run_dir: Path, console: Console,
          export: Path | None = None) -> list[Outcome]:
    workloads_root, _ = stage_workloads(run_dir)
    outcomes = []
    for env in environments(cells):
        log_path = run_dir / ".build" / f"{env.name}-{env.content_hash()}.log"
        started = time.monotonic()
        outcome = _one(env, engine, workloads_root, log_path, export)
        outcome.seconds = time.monotonic() - started
        colour = STATUS_COLOUR[outcome.status]
        console.print(f"[{colour}]{shown(outcome.line(), lines=True)}[/]", highlight=False)
        outcomes.append(outcome)
    return outcomes


def _one(env: Environment, engine: Engine, workloads_root: Path, log_path: Path, export: Path | None) -> Outcome:
    try:
        prepared = engine.prepare(env, log_path)
    except EnvironmentUnavailable as exc:
        return Outcome(env, status.UNAVAILABLE, reason=f"{exc.reason} (log: {log_path})")
    how = "reused" if prepared.reused else "built"
    report = None
    if selfcheck.needed(env):
        try:
            report = selfcheck.check(engine, prepared, workloads_root, log_path)
        except EnvironmentUnavailable as exc:
            return Outcome(env, status.UNAVAILABLE, reason=f"{exc.reason} (log: {log_path})",
                           provenance=prepared.provenance)
        add_labels = getattr(engine, "add_labels", None)
        if add_labels is not None:
            add_labels(prepared, selfcheck.labels(report))
    outcome = Outcome(env, how, check=report, provenance=prepared.provenance)
    if export is not None:
        outcome.exported = export_environment(engine, prepared.provenance, env, export)
    return outcome


def export_environment(engine: Engine, provenance: dict, env: Environment, folder: Path) -> list[str]:
    """What a cluster without Docker needs from this environment.

    An image becomes a ``docker save`` archive; ``apptainer build X.sif
    docker-archive:X.tar`` and ``enroot import dockerd://TAG`` turn it into what
    Apptainer / Pyxis run. A virtualenv is not relocatable: it is used where
    it was built, so the way to share it is to build it on the shared
    filesystem (HARNESS_CACHE) at the path the nodes see.
    """
    folder.mkdir(parents=True, exist_ok=True)
    tag = provenance.get("image_tag")
    if not tag:
        return [f"virtualenv {provenance.get('venv') or provenance.get('interpreter')}: not an image; build it "
                "with HARNESS_CACHE on a filesystem the nodes mount at the same path"]
    archive = folder / f"{env.name}.tar"
    if not archive.exists():
        partial = archive.with_name(archive.name + ".partial")
        cli = getattr(engine, "cli", "docker")
        proc = subprocess.run([cli, "save", "-o", str(partial), tag], capture_output=True, text=True)
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            return [f"export FAILED: docker save {tag}: {proc.stderr.strip()[-300:]}"]
        partial.rename(archive)
    commands = folder / "import-commands.sh"
    lines = commands.read_text().splitlines() if commands.exists() else [
        "# Turn the saved images into what a cluster runs (pick one per image).",
        "# The harness mounts its workloads at /opt/harness and runs: python3 -m workloads SPEC OUTDIR"]
    q = shlex.quote  # names are validated; quoted all the same, as every generated script's values are
    new = [f"apptainer build {q(env.name + '.sif')} {q('docker-archive:' + archive.name)}",
           f"enroot import -o {q(env.name + '.sqsh')} {q('dockerd://' + tag)}  # where Docker holds the image",
           f"docker load -i {q(archive.name)}                        # another Docker host"]
    lines += [line for line in new if line not in lines]
    commands.write_text("\n".join(lines) + "\n")
    return [str(archive), f"apptainer build {env.name}.sif docker-archive:{archive}"]
