"""The Docker engine: one image per environment, one container per cell -- fresh, or on a warm
run a launcher container per environment and slot that forks its cells (docker_warm.py).

Images are built with the docker CLI (BuildKit, for the CA-bundle secret);
containers are run through the Docker SDK, which reports the exit code and the
OOM flag separately -- both are needed, since OOMKilled can be true with exit
0 when only a child was killed, and 137 can be any SIGKILL.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

from rich.console import Console

from harness import __version__, stacks
from harness.cells import Cell, Environment
from harness.chains import carries_files
from harness.engines.base import CELL_ENV, Engine, Prepared, RunContext, cell_argv, cell_variables, read_reaped
from harness.engines.containers import LABEL, OUT_MOUNT, WORKLOADS_MOUNT, owner_labels, remove_dead
from harness.engines.docker_warm import ContainerServer, run_forked
from harness.environments import bases, buildlock, installer, ledger
from harness.errors import CellUnsupported, EngineUnavailable, EnvironmentUnavailable
from harness.host.supervise import RawOutcome, watch
from harness.index import cutoff
from harness.index.pipsettings import pip_settings
from harness.launch.caches import in_container
from harness.launch.cellenv import PIDS_LIMIT, TMPFS, hardening, hardening_flags  # noqa: F401 - re-exported
from harness.launch.cellgroup import leftovers
from harness.launch.confinement import container as container_confinement
from harness.launch.launcher import fresh_because, stack_imports, warm_settings
from harness.status.outcome import signal_name
from harness.workloads.protocol import EVENTS_FILE, INPUTS_DIR, SPEC_FILE, STDERR_FILE, STDOUT_FILE

CA_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
# Every cell container is hardened: no capabilities (TensorFlow, JAX and the
# planted faults need none; the cell runs as the caller's uid and writes only
# to its own folder), no privilege gain through setuid binaries, a bounded
# number of processes and threads, and a read-only root filesystem with a
# tmpfs for /tmp (HOME; Keras' and the frameworks' caches). /tmp keeps `exec`:
# compilers that load what they just built from /tmp would fail without it.
MEMORY_MARGIN = 0.10        # of the daemon host's memory, left to the host when the matrix sets no limit
MEMORY_MARGIN_MIN = 1 << 30


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


def _cli_version(cli: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([cli, "version", "--format", "{{.Client.Version}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    digits = out.stdout.strip().split("+")[0].split("-")[0]
    try:
        return tuple(int(p) for p in digits.split("."))
    except ValueError:
        return None


def find_cli() -> str:
    """A docker client that can build with BuildKit (needed for build secrets).

    Clients before 23.0 build with BuildKit themselves (DOCKER_BUILDKIT=1);
    later ones need the buildx plugin. Every ``docker`` on PATH is tried, since
    a newer client without buildx often shadows a working one.
    """
    explicit = os.environ.get("HARNESS_DOCKER_CLI")
    candidates = [explicit] if explicit else []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        exe = Path(folder) / "docker"
        if exe.is_file() and os.access(exe, os.X_OK):
            candidates.append(str(exe))
    tried = []
    for cli in dict.fromkeys(candidates):
        version = _cli_version(cli)
        if version is None:
            tried.append(f"{cli} (does not run)")
            continue
        if version < (23,):
            return cli
        buildx = subprocess.run([cli, "buildx", "version"], capture_output=True, timeout=30)
        if buildx.returncode == 0:
            return cli
        tried.append(f"{cli} ({'.'.join(map(str, version))}, no buildx)")
    raise EngineUnavailable("no docker client that can build with BuildKit: "
                            + (", ".join(tried) or "no docker on PATH")
                            + "; install the buildx plugin, or set HARNESS_DOCKER_CLI")


def find_ca_bundle(explicit: str | None) -> Path | None:
    """The extra CA bundle for pip inside builds, if the user has one."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise EngineUnavailable(f"--ca-bundle {explicit}: no such file")
        return path
    for var in CA_VARIABLES:
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return Path(value)
    return None


def family(env: Environment) -> str:
    """Which Dockerfile under images/ builds this environment."""
    if env.device == "gpu" and stacks.is_tf1(env.tensorflow):
        return "tf1-gpu"
    return "venv"


def default_base(env: Environment) -> str:
    if family(env) == "tf1-gpu":
        return f"tensorflow/tensorflow:{env.tensorflow}-gpu-py3"
    if env.device == "gpu" and env.tensorflow and not env.keras and \
            stacks.tensorflow_package(env.tensorflow, "gpu") == "tensorflow":
        return f"tensorflow/tensorflow:{env.tensorflow}-gpu"
    return f"python:{'.'.join(env.python.split('.')[:2])}-slim"


LOCKS = ("/opt/env/requirements.lock", "/opt/requirements.lock")  # venv images, tf1-gpu images


def _install_note(env: Environment) -> dict:
    """What an image's provenance says of its install: uv's note, or for a TF 1.x GPU image (pip)
    the cut-off's loopback index."""
    if family(env) != "tf1-gpu":
        return installer.note(env)
    return {"installer": "pip", **({"cutoff": cutoff.cutoff_note(env, cutoff.BUILD_VIA)} if env.uploaded_before
                                   else {})}


def _resolved_at(image) -> dict:
    """When an image's packages were resolved: its build's day, from the image itself (a reused
    image was resolved when it was built, not when it is used). Empty where Docker does not say."""
    created = str((image.attrs or {}).get("Created") or "")
    return {"resolved_at": created[:19] + "Z"} if len(created) >= 19 else {}


def _index_on_loopback() -> bool:
    """Whether the index the build reads is on this host's loopback (a local mirror, a cut-off's
    index) and the daemon is too (the default socket or a unix one): then the build shares the
    host's network to reach it, as the harness's own installs do."""
    host = urllib.parse.urlsplit(pip_settings().index).hostname or ""
    daemon = os.environ.get("DOCKER_HOST", "")
    return host in ("localhost", "127.0.0.1", "::1") and (not daemon or daemon.startswith("unix://"))


def _pip_index(env: Environment):
    """For a TF 1.x GPU image (pip), the cut-off's loopback index while the build lasts (None
    without a cut-off); for every other image, none (uv applies the cut-off itself). The TF 1.x
    GPU image is the one pip is kept for: its base's Python 3.5 is older than any uv serves."""
    if family(env) == "tf1-gpu":
        return cutoff.build_index(env)
    return contextlib.nullcontext(None)


def _requirements(env: Environment) -> list[str]:
    reqs = env.requirements
    if family(env) == "tf1-gpu":  # the base already holds tensorflow-gpu
        reqs = [r for r in reqs if not r.startswith("tensorflow")]
    return reqs


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
    def image_tag(self, env: Environment, base_used: str, dockerfile: str, build_args: dict) -> str:
        what = {"dockerfile": dockerfile, "args": build_args, "requirements": _requirements(env),
                "force": list(env.force), "base": base_used}
        if env.uploaded_before:  # only then: other images keep their tags
            what["uploaded_before"] = env.uploaded_before
        blob = json.dumps(what, sort_keys=True)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
        return f"{LABEL}/env:{env.name.replace('+', '_')}-{digest}"  # a tag takes no '+'

    def prepare(self, env: Environment, log_path: Path) -> Prepared:
        import docker.errors
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
            tag = self.image_tag(env, base.used, dockerfile, build_args)
            provenance = {"image_tag": tag, "base_requested": requested, "base_used": base.used,
                          "base_route": base.route, "base_id": base.image_id, "dockerfile": f"images/{fam}/Dockerfile",
                          "dockerfile_sha256": hashlib.sha256(dockerfile.encode()).hexdigest(),
                          "requirements": _requirements(env), "force": list(env.force), "ca_bundle": bool(self.ca)}
            provenance.update(_install_note(env))
            with buildlock.held(tag):  # another run building this image: wait for it, then reuse it
                try:
                    image = self.client.images.get(tag)
                    return Prepared(env, {**provenance, "image": image.id, **_resolved_at(image)}, handle=image.id,
                                    reused=True)
                except docker.errors.ImageNotFound:
                    pass
                twin = self._same_recipe(tag)
                if twin is not None:  # built for an environment of another name: the same image
                    return Prepared(env, {**provenance, "image": twin}, handle=twin, reused=True)
                with ledger.building(self.name, env.name) as timing:
                    self._build(env, tag, dockerfile_path, build_args, base, log, log_path)
        image = self.client.images.get(tag)
        return Prepared(env, {**provenance, "image": image.id, "build_seconds": timing["seconds"],
                              **_resolved_at(image)}, handle=image.id)

    def _same_recipe(self, tag: str) -> str | None:
        """An image built from the same recipe (Dockerfile, base, pins: the digest its tag ends
        in) under another environment name, now tagged `tag` too; its id, or None."""
        recipe = tag.rsplit("-", 1)[1]
        found = self.client.images.list(filters={"label": f"{LABEL}.recipe={recipe}"})
        if not found:
            return None
        repository, _, name = tag.rpartition(":")
        found[0].tag(repository, name)
        return found[0].id

    def _build(self, env: Environment, tag: str, dockerfile: Path, build_args: dict, base: bases.Base,
               log, log_path: Path) -> None:
        labels = {
            "org.opencontainers.image.title": f"tfkeras-harness environment {env.name}",
            "org.opencontainers.image.version": __version__,
            "org.opencontainers.image.created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "org.opencontainers.image.source": "https://github.com/tfkeras-harness/tfkeras-harness",
            "org.opencontainers.image.base.name": base.requested,
            f"{LABEL}.base-used": base.used,
            f"{LABEL}.environment": json.dumps(env.describe(), sort_keys=True),
            f"{LABEL}.dockerfile-sha256": hashlib.sha256(dockerfile.read_bytes()).hexdigest(),
            f"{LABEL}.recipe": tag.rsplit("-", 1)[1],  # what another name's environment finds it by
        }
        with tempfile.TemporaryDirectory(prefix="harness-build-") as ctx, _pip_index(env) as index:
            shutil.copy(dockerfile, Path(ctx) / "Dockerfile")
            if family(env) != "tf1-gpu":  # uv: its executable mounted from the context, its options a file
                unsupported = installer.supported(env.python)
                if unsupported:
                    raise EnvironmentUnavailable(unsupported)
                shutil.copy(installer.uv(), Path(ctx) / "uv")  # needs only glibc >= 2.17 of an image
                (Path(ctx) / "seed.py").write_text(installer.SEED)
                (Path(ctx) / "uv-options").write_text("\n".join(installer.options(env)) + "\n")
                pins = installer.requirements(env)
            else:  # pip reads a cut-off's loopback index (the build shares the host's network for it)
                pins = [f"--index-url {index}", *_requirements(env)] if index else _requirements(env)
            first = [f"--index-url {index}"] if index else []
            (Path(ctx) / "requirements.txt").write_text("\n".join(pins) + "\n")
            (Path(ctx) / "forced.txt").write_text("".join(f"{r}\n" for r in (first + list(env.force))
                                                          if env.force))
            host_network = bool(index) or (family(env) != "tf1-gpu" and _index_on_loopback())
            args = [self.cli, "build", "--progress=plain", "-t", tag] + (["--network", "host"] if host_network else [])
            for key, value in build_args.items():
                args += ["--build-arg", f"{key}={value}"]
            for key, value in labels.items():
                args += ["--label", f"{key}={value}"]
            secret = Path(ctx) / "no-ca"
            secret.write_text("")  # an empty secret: the Dockerfile then leaves PIP_CERT alone
            args += ["--secret", f"id=ca,src={self.ca or secret}", ctx]
            log.write("$ " + " ".join(args) + "\n")
            log.flush()
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env={**os.environ, "DOCKER_BUILDKIT": "1"})
            last = ""
            with self.console.status(f"building {env.name}") as status:
                for line in proc.stdout:
                    log.write(line)
                    if line.strip():
                        last = line.strip()
                        status.update(f"building {env.name}: {last[:100]}")
                proc.wait()
            log.flush()
        if proc.returncode != 0:
            tail = log_path.read_text(errors="replace")[-6000:]
            raise EnvironmentUnavailable(f"image build failed: {installer.failure(tail)}; "
                                         f"log: {log_path}", tail)

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
        import docker.errors
        from docker.types import DeviceRequest

        ctx = ctx or RunContext()
        warmth = warm_settings(self, cell, ctx.slot)  # a cell the host decides is never started
        cache_volumes, cache_env = in_container(warmth.variables)
        environment = {**cell_variables(cell, ctx.slot), **cache_env, "PYTHONPATH": WORKLOADS_MOUNT,
                       "HOME": "/tmp"}
        environment.pop("CUDA_VISIBLE_DEVICES", None)  # the runtime exposes exactly the requested GPUs
        kwargs = {}
        if ctx.slot.gpus:
            ids = [g.uuid or g.index for g in ctx.slot.gpus]
            kwargs["device_requests"] = [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]
        elif cell.parallelism.device_kind == "gpu":
            raise CellUnsupported(f"{cell.parallelism.devices} GPU(s) asked, none assigned")
        if ctx.slot.cpus:
            kwargs["cpuset_cpus"] = ",".join(str(c) for c in ctx.slot.cpus)
        memory = cell.limits.memory or default_memory_limit(self.client)
        if memory:
            kwargs["mem_limit"] = memory
            kwargs["memswap_limit"] = memory  # no swap: over the limit is an OOM kill
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

    def exec(self, prepared: Prepared, argv: list[str], workloads_root: Path, timeout: float,
             gpus: list[str] = ()) -> tuple[int | None, str, str]:
        """Run ``python3 ARGV`` in a fresh container of the image (workloads mounted, no
        network, the GPUs `gpus` only); exit code None when it ran past ``timeout``."""
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
        from harness.environments.recipes import docker_script, lock_without_forced
        fam = prov["dockerfile"].split("/")[1]
        recipe = "tf1-gpu" if fam == "tf1-gpu" else "replay"  # pip and Docker alone: what its readers have
        shutil.copy(bases.images_dir() / recipe / "Dockerfile", env_dir / "Dockerfile")
        lock = self._lock(prov.get("image") or prov["image_tag"])
        (env_dir / "requirements.txt").write_text(lock_without_forced(lock, cell.environment.force) if lock
                                                  else "".join(f"{r}\n" for r in _requirements(cell.environment)))
        return docker_script(cell, prov, locked=bool(lock))

    def _lock(self, image: str) -> str | None:
        """The `pip freeze --all` the image's build wrote (images/*/Dockerfile), or None."""
        import docker.errors
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
        import sys
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
