"""The Docker engine: one image per environment (docker_build.py), one container per cell --
fresh, or on a warm run a launcher container per environment and slot that forks its cells
(docker_warm.py).

Images are built with the docker CLI (BuildKit, for the CA-bundle secret);
containers are run through the Docker SDK, which reports the exit code and the
OOM flag separately -- both are needed, since OOMKilled can be true with exit
0 when only a child was killed, and 137 can be any SIGKILL.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from rich.console import Console

from harness import stacks
from harness.cells import Cell, Environment
from harness.chains import carries_files
from harness.engines.base import CELL_ENV, Engine, Prepared, RunContext, cell_argv, cell_variables, read_reaped
from harness.engines.containers import LABEL, OUT_MOUNT, WORKLOADS_MOUNT, owner_labels, remove_dead
from harness.engines.docker_build import (
    build_image,
    default_base,
    family,
    find_ca_bundle,
    find_cli,
    image_requirements,
    image_tag,
    install_note,
    resolved_at,
    same_recipe,
)
from harness.engines.docker_warm import ContainerServer, run_forked
from harness.environments import bases, buildlock, installer, ledger
from harness.environments.recipes import docker_script, lock_without_forced
from harness.errors import CellUnsupported, EngineUnavailable, EnvironmentUnavailable
from harness.host.resources import Slot
from harness.host.supervise import RawOutcome, watch
from harness.launch.caches import in_container
from harness.launch.cellenv import PIDS_LIMIT, TMPFS, hardening, hardening_flags  # noqa: F401 - re-exported
from harness.launch.cellgroup import leftovers
from harness.launch.confinement import container as container_confinement
from harness.launch.launcher import fresh_because, stack_imports, warm_settings
from harness.status.outcome import signal_name
from harness.workloads.protocol import EVENTS_FILE, INPUTS_DIR, SPEC_FILE, STDERR_FILE, STDOUT_FILE

# Every cell container is hardened: no capabilities (TensorFlow, JAX and the
# planted faults need none; the cell runs as the caller's uid and writes only
# to its own folder), no privilege gain through setuid binaries, a bounded
# number of processes and threads, and a read-only root filesystem with a
# tmpfs for /tmp (HOME; Keras' and the frameworks' caches). /tmp keeps `exec`:
# compilers that load what they just built from /tmp would fail without it.
MEMORY_MARGIN = 0.10        # of the daemon host's memory, left to the host when the matrix sets no limit
MEMORY_MARGIN_MIN = 1 << 30
LOCKS = ("/opt/env/requirements.lock", "/opt/requirements.lock")  # venv images, tf1-gpu images


def default_memory_limit(client) -> int | None:
    """Bytes a cell may use when its matrix names no memory_limit: the Docker
    host's memory less a margin, so a runaway cell is OOM-killed (and recorded
    as `oom`) instead of pushing the host itself out of memory."""
    try:
        total = int(client.info().get("MemTotal") or 0)
    except Exception:  # noqa: BLE001 - no figure: Docker's own default (no limit)
        return None
    if total <= 0:
        return None
    return total - max(int(total * MEMORY_MARGIN), MEMORY_MARGIN_MIN)


def docker_client():
    """A client for the daemon DOCKER_HOST (or the default socket) names, or a clear error."""
    try:
        # optional dependency: the docker SDK, only with --engine docker (or auto); missing, it is
        # EngineUnavailable, so auto falls back to virtualenvs
        import docker
        import docker.errors
    except ImportError:  # pragma: no cover - a dependency of the package
        raise EngineUnavailable("the docker Python package is not installed (pip install docker)") from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        where = os.environ.get("DOCKER_HOST") or "the default socket (/var/run/docker.sock)"
        raise EngineUnavailable(f"no Docker engine answers at {where}: {_root_cause(exc)}; "
                                "start dockerd, or use --engine venv") from None
    return client


def _root_cause(exc: BaseException) -> str:
    """Why a connection failed, in words: the operating system's reason ('No such file or
    directory', 'Connection refused', 'Permission denied') found below docker-py's,
    requests' and urllib3's wrappers, instead of their nested reprs."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.strerror:
            path = f" ({e.filename})" if e.filename else ""
            hint = "; is your user allowed to use Docker (the docker group)?" if isinstance(e, PermissionError) else ""
            return f"{e.strerror}{path}{hint}"
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None), *getattr(e, "args", ())]
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


class _Follower(threading.Thread):
    """Copies a container's output into a file as it comes, so logs are live
    (`repro` shows them, a hang shows what it printed last)."""

    def __init__(self, container, path: Path, stdout: bool):
        super().__init__(daemon=True)
        self.container, self.path, self.stdout = container, path, stdout
        self.complete = False
        self.start()

    def run(self) -> None:
        try:
            with open(self.path, "wb") as fh:
                for chunk in self.container.logs(stdout=self.stdout, stderr=not self.stdout, stream=True,
                                                 follow=True):
                    fh.write(chunk)
                    fh.flush()
            self.complete = True
        except Exception:  # noqa: BLE001 - finish() fetches the logs in one piece instead
            pass

    def finish(self) -> None:
        """Wait for the stream to end; if it broke off, write the logs again in one piece."""
        self.join(timeout=10)
        if not self.complete:
            self.path.write_bytes(self.container.logs(stdout=self.stdout, stderr=not self.stdout))


class DockerEngine(Engine):
    name = "docker"
    confines_cells = True  # each cell in its own container: a read-only root, writes only where it is mounted

    def __init__(self, client, ca_bundle: str | None = None, console: Console | None = None,
                 pythons: dict[str, str] | None = None):
        self.client = client
        self.cli = find_cli()
        self.ca = find_ca_bundle(ca_bundle)
        self.console = console or Console()
        self.pythons = pythons or {}
        self.remove_leftovers()

    # -- containers left by a run that was killed ---------------------------
    def remove_leftovers(self) -> int:
        """Remove the cell containers whose harness is provably dead (`containers.remove_dead`)."""
        removed = remove_dead(self.client)
        if removed:
            self.console.print(f"removed {removed} container(s) left by an interrupted run")
        return removed

    # -- images ---------------------------------------------------------------
    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        import docker.errors  # optional dependency: the docker SDK, only with --engine docker
        log_path.parent.mkdir(parents=True, exist_ok=True)
        fam = family(env)
        dockerfile_path = bases.images_dir() / fam / "Dockerfile"
        dockerfile = dockerfile_path.read_text()
        requested = env.base_image or default_base(env)
        with open(log_path, "a") as log:
            base = bases.resolve(self.client, self.cli, requested, log, self.pythons)
            build_args = {"BASE_IMAGE": base.used}
            if fam == "tf1-gpu":  # pip, for the base's Python 3.5, which uv does not serve
                build_args["BOOTSTRAP_PIP"] = stacks.pip_requirement(env.python)
            else:  # the stack imported once at build: its bytecode is in the image, for every container
                build_args.update(STACK_IMPORTS=" ".join(stack_imports(env)), STACK_BACKEND=env.backend or "")
            tag = image_tag(env, base.used, dockerfile, build_args)
            provenance = {"image_tag": tag, "base_requested": requested, "base_used": base.used,
                          "base_route": base.route, "base_id": base.image_id, "dockerfile": f"images/{fam}/Dockerfile",
                          "dockerfile_sha256": hashlib.sha256(dockerfile.encode()).hexdigest(),
                          "requirements": image_requirements(env), "force": list(env.force), "ca_bundle": bool(self.ca)}
            provenance.update(install_note(env))
            with buildlock.held(tag):  # another run building this image: wait for it, then reuse it
                try:
                    image = self.client.images.get(tag)
                    return Prepared(env, {**provenance, "image": image.id, **resolved_at(image)}, handle=image.id,
                                    reused=True)
                except docker.errors.ImageNotFound:
                    pass
                twin = same_recipe(self.client, tag)
                if twin is not None:  # built for an environment of another name: the same image
                    return Prepared(env, {**provenance, "image": twin}, handle=twin, reused=True)
                with ledger.building(self.name, env.name) as timing:
                    build_image(env, tag, dockerfile_path, build_args, base, log, log_path,
                                cli=self.cli, ca=self.ca, console=self.console)
        image = self.client.images.get(tag)
        return Prepared(env, {**provenance, "image": image.id, "build_seconds": timing["seconds"],
                              **resolved_at(image)}, handle=image.id)

    # -- running a cell ---------------------------------------------------------
    def fresh_because(self, cell: Cell) -> str | None:
        """A process engine's reasons (launch.fresh_because), in a container's terms."""
        if cell.limits.memory:
            return ("a memory limit is its container's: a launcher's container would share it with the "
                    "launcher, so the cell starts in a container of its own")
        if any(carries_files(need) for need in cell.needs):
            return "a chain's producer files are mounted read-only into a container of its own: it starts fresh"
        return fresh_because(cell)

    def make_server(self):
        """A warm launcher here is a container (docker_warm.py)."""
        return lambda *args, **kwargs: ContainerServer(*args, engine=self, **kwargs)

    def run(self, prepared: Prepared, cell: Cell, workdir: Path, workloads_root: Path,
            ctx: RunContext | None = None) -> RawOutcome:
        import docker.errors  # optional dependency: the docker SDK, only with --engine docker

        ctx = ctx or RunContext()
        warmth = warm_settings(self, cell, ctx.slot)  # a cell the host decides is never started
        cache_volumes, cache_env = in_container(warmth.variables)
        environment = {**cell_variables(cell, ctx.slot), **cache_env, "PYTHONPATH": WORKLOADS_MOUNT,
                       "HOME": "/tmp"}
        environment.pop("CUDA_VISIBLE_DEVICES", None)  # the runtime exposes exactly the requested GPUs
        kwargs, memory = self._share(cell, ctx.slot)
        volumes = {str(workloads_root.resolve()): {"bind": WORKLOADS_MOUNT, "mode": "ro"},
                   str(workdir.resolve()): {"bind": OUT_MOUNT, "mode": "rw"}}
        if (workdir / INPUTS_DIR).is_dir():  # a chain's producer files (harness/chains.py): read-only, even for root
            volumes[str((workdir / INPUTS_DIR).resolve())] = {"bind": f"{OUT_MOUNT}/{INPUTS_DIR}", "mode": "ro"}
        elif self.warm:  # forked in a launcher container of this environment and slot (docker_warm.py)
            server = self.launcher().for_cell(
                prepared.handle, cell, environment, workloads_root.resolve(), warmth, cpus=ctx.slot.cpus,
                where={"cpus": sorted(ctx.slot.cpus or ()), "gpus": [g.uuid or g.index for g in ctx.slot.gpus],
                       "memory": memory,
                       "volumes": cache_volumes}, cancel=ctx.cancel)
            if server is not None:
                raw = run_forked(server, prepared.handle, cell, workdir, ctx, warmth, memory)
                if raw is not None:
                    return raw
        try:
            container = self.client.containers.run(
                prepared.handle, cell_argv("python3", f"{OUT_MOUNT}/{SPEC_FILE}", OUT_MOUNT, cell.limits.wall),
                detach=True, init=True, network_mode="none", environment=environment,
                user=f"{os.getuid()}:{os.getgid()}", working_dir="/tmp",
                volumes={**volumes, **cache_volumes},
                labels={LABEL: "1", f"{LABEL}.cell": cell.id, **owner_labels()},
                **hardening(), **kwargs)
        except docker.errors.APIError as exc:
            message = _first_line(exc)
            if "could not select device driver" in message:
                raise CellUnsupported(f"{cell.parallelism.devices} GPU(s) asked, but this Docker engine has "
                                      f"no GPU runtime ({message})") from None
            raise
        followers = [_Follower(container, workdir / STDOUT_FILE, stdout=True),
                     _Follower(container, workdir / STDERR_FILE, stdout=False)]
        try:
            def poll() -> int | None:
                container.reload()
                state = container.attrs["State"]
                return None if state.get("Running") or state.get("Status") == "created" else state["ExitCode"]

            def kill() -> None:
                try:
                    container.kill()
                except docker.errors.APIError:
                    pass

            code, timed_out, seconds = watch(poll, kill, workdir / EVENTS_FILE, cell.limits.wall,
                                             cell.limits.progress, cancel=ctx.cancel)
            container.reload()
            state = container.attrs["State"]
            for follower in followers:
                follower.finish()
        finally:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
        sig = signal_name(code - 128) if code is not None and code > 128 and not timed_out else None
        return RawOutcome(exit_code=code, signal=sig, oom_killed=bool(state.get("OOMKilled")) and code != 0,
                          timed_out=timed_out, seconds=seconds,
                          detail={"container_oom_flag": bool(state.get("OOMKilled")), "image": prepared.handle,
                                  "memory_limit": memory, **warmth.detail(False),
                                  "confinement": container_confinement({**volumes, **cache_volumes}, OUT_MOUNT),
                                  # the subreaper runs inside the container too; what it could not end
                                  # (or a cell given up) ends with the container: its init is PID 1
                                  "leftovers": leftovers(read_reaped(workdir), [], None,
                                                         how="subreaper in the container, then the container's end"),
                                  "memory": {"unavailable": "the container's cgroup is removed with it; "
                                                            "the engine's OOM flag is recorded instead"}})

    def _share(self, cell: Cell, slot: Slot) -> tuple[dict, int | None]:
        """The container's share of the host, as `containers.run` arguments, and its memory limit:
        the slot's GPUs (a cell that asks for GPUs and was given none is unsupported) and CPUs,
        and the cell's memory limit or the host's less a margin, with no swap beyond it."""
        from docker.types import DeviceRequest  # optional dependency: the docker SDK, only with --engine docker
        kwargs = {}
        if slot.gpus:
            ids = [g.uuid or g.index for g in slot.gpus]
            kwargs["device_requests"] = [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]
        elif cell.parallelism.device_kind == "gpu":
            raise CellUnsupported(f"{cell.parallelism.devices} GPU(s) asked, none assigned")
        if slot.cpus:
            kwargs["cpuset_cpus"] = ",".join(str(c) for c in slot.cpus)
        memory = cell.limits.memory or default_memory_limit(self.client)
        if memory:
            kwargs["mem_limit"] = memory
            kwargs["memswap_limit"] = memory  # no swap: over the limit is an OOM kill
        return kwargs, memory

    def exec(self, prepared: Prepared, argv: list[str], workloads_root: Path, timeout: float,
             gpus: list[str] = ()) -> tuple[int | None, str, str]:
        """Run ``python3 ARGV`` in a fresh container of the image (workloads mounted, no
        network, the GPUs `gpus` only); exit code None when it ran past ``timeout``."""
        # optional dependency: the docker SDK (and requests, its HTTP client), only with --engine docker
        import docker.errors
        import requests
        from docker.types import DeviceRequest
        kwargs = {"device_requests": [DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]} if gpus else {}
        token = uuid.uuid4().hex
        try:
            container = self.client.containers.run(
                prepared.handle, ["python3", *argv], detach=True, init=True, network_mode="none",
                environment={**CELL_ENV, "PYTHONPATH": WORKLOADS_MOUNT, "HOME": "/tmp"}, working_dir="/tmp",
                user=f"{os.getuid()}:{os.getgid()}",
                volumes={str(workloads_root.resolve()): {"bind": WORKLOADS_MOUNT, "mode": "ro"}},
                labels={LABEL: "1", **owner_labels(), f"{LABEL}.exec": token},
                **kwargs)
        except docker.errors.APIError as exc:
            for left in self.client.containers.list(all=True, filters={"label": f"{LABEL}.exec={token}"}):
                left.remove(force=True)  # created, then refused at start
            if "could not select device driver" in _first_line(exc):
                raise EnvironmentUnavailable("this host has GPUs but its Docker engine has no GPU runtime "
                                             f"(install the NVIDIA Container Toolkit): {_first_line(exc)}") from None
            raise
        try:
            try:
                code = container.wait(timeout=timeout)["StatusCode"]
            except requests.exceptions.RequestException:  # the client's read timeout: it ran too long
                container.kill()
                code = None
            return (code, container.logs(stdout=True, stderr=False).decode(errors="replace"),
                    container.logs(stdout=False, stderr=True).decode(errors="replace"))
        finally:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass

    def add_labels(self, prepared: Prepared, labels: dict[str, str]) -> None:
        """Put labels learnt after the build (the CUDA / cuDNN versions the framework was
        built for) on the environment's image: a one-line ``FROM`` build under the same tag."""
        image = self.client.images.get(prepared.handle)
        if all((image.labels or {}).get(k) == v for k, v in labels.items()):
            return
        args = [self.cli, "build", "-q", "-t", prepared.provenance["image_tag"]]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        proc = subprocess.run([*args, "-"], input=f"FROM {image.id}\n", capture_output=True, text=True,
                              env={**os.environ, "DOCKER_BUILDKIT": "0"})
        if proc.returncode != 0:
            raise EnvironmentUnavailable(f"labelling {prepared.provenance['image_tag']} failed: "
                                         f"{proc.stderr.strip()[-300:]}")
        prepared.handle = self.client.images.get(prepared.provenance["image_tag"]).id
        prepared.provenance["image"] = prepared.handle

    # -- bundles ---------------------------------------------------------------
    replay_words = "plain Docker"
    recipe_words = "the Dockerfile and pins"

    def write_replay(self, cell: Cell, prov: dict, env_dir: Path) -> str:
        """The image's recipe, installing the image's own `pip freeze` (every package at the
        version the cell ran with, the forced ones left to forced.txt as in the build), so a
        rebuild elsewhere or later gets what ran here, not what the index resolves that day.
        An image that cannot be read (gone, or built before it kept a lock) gives the pins."""
        fam = prov["dockerfile"].split("/")[1]
        recipe = "tf1-gpu" if fam == "tf1-gpu" else "replay"  # pip and Docker alone: what its readers have
        shutil.copy(bases.images_dir() / recipe / "Dockerfile", env_dir / "Dockerfile")
        lock = self._lock(prov.get("image") or prov["image_tag"])
        (env_dir / "requirements.txt").write_text(lock_without_forced(lock, cell.environment.force) if lock
                                                  else "".join(f"{r}\n" for r in image_requirements(cell.environment)))
        return docker_script(cell, prov, locked=bool(lock))

    def _lock(self, image: str) -> str | None:
        """The `pip freeze --all` the image's build wrote (images/*/Dockerfile), or None."""
        import docker.errors  # optional dependency: the docker SDK, only with --engine docker
        for path in LOCKS:
            try:
                text = self.client.containers.run(image, ["cat", path], entrypoint="", remove=True,
                                                  network_mode="none", stderr=False).decode()
            except (docker.errors.DockerException, UnicodeDecodeError):
                continue
            if text.strip():
                return installer.plain_pins(text)
        return None

    def shell(self, cell: Cell, prepared: Prepared, bundle: Path) -> tuple[list[str], dict]:
        tty = ["-it"] if sys.stdin.isatty() else ["-i"]
        variables = cell.environment.variables(inherit={**CELL_ENV, "PYTHONPATH": WORKLOADS_MOUNT})
        argv = [self.cli, "run", "--rm", *tty, "--network", "none",
                *(arg for k, v in sorted(variables.items()) for arg in ("-e", f"{k}={v}")),
                "-v", f"{bundle.resolve() / 'workloads'}:{WORKLOADS_MOUNT}/workloads:ro",
                *(["-v", f"{bundle.resolve() / 'user'}:{WORKLOADS_MOUNT}/user:ro"]  # the user's code
                  if (bundle / "user").is_dir() else []),
                "-v", f"{bundle.resolve()}:/bundle", "-w", "/bundle", prepared.handle, "bash"]
        return argv, dict(os.environ)

    def close(self) -> None:
        super().close()  # the launcher containers first
        self.client.close()
