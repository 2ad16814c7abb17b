"""An environment's Docker image: which Dockerfile and base make it, the tag that names its
recipe, and the `docker build` that makes it.

Images are built with the docker CLI, not the SDK: BuildKit's build secrets carry the CA
bundle to pip without writing it into a layer, and only the CLI passes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

from harness import __version__, stacks
from harness.cells import Environment
from harness.engines.containers import LABEL
from harness.environments import bases, installer
from harness.errors import EngineUnavailable, EnvironmentUnavailable
from harness.index import cutoff
from harness.index.pipsettings import pip_settings

CA_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")


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


def install_note(env: Environment) -> dict:
    """What an image's provenance says of its install: uv's note, or for a TF 1.x GPU image (pip)
    the cut-off's loopback index."""
    if family(env) != "tf1-gpu":
        return installer.note(env)
    return {"installer": "pip", **({"cutoff": cutoff.cutoff_note(env, cutoff.BUILD_VIA)} if env.uploaded_before
                                   else {})}


def resolved_at(image) -> dict:
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


def image_requirements(env: Environment) -> list[str]:
    reqs = env.requirements
    if family(env) == "tf1-gpu":  # the base already holds tensorflow-gpu
        reqs = [r for r in reqs if not r.startswith("tensorflow")]
    return reqs


def image_tag(env: Environment, base_used: str, dockerfile: str, build_args: dict) -> str:
    """The image's tag: the environment's name and a digest of its recipe, so a changed recipe
    is a new image and an unchanged one is found again."""
    what = {"dockerfile": dockerfile, "args": build_args, "requirements": image_requirements(env),
            "force": list(env.force), "base": base_used}
    if env.uploaded_before:  # only then: other images keep their tags
        what["uploaded_before"] = env.uploaded_before
    blob = json.dumps(what, sort_keys=True)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{LABEL}/env:{env.name.replace('+', '_')}-{digest}"  # a tag takes no '+'


def same_recipe(client, tag: str) -> str | None:
    """An image built from the same recipe (Dockerfile, base, pins: the digest its tag ends
    in) under another environment name, now tagged `tag` too; its id, or None."""
    recipe = tag.rsplit("-", 1)[1]
    found = client.images.list(filters={"label": f"{LABEL}.recipe={recipe}"})
    if not found:
        return None
    repository, _, name = tag.rpartition(":")
    found[0].tag(repository, name)
    return found[0].id


def build_image(env: Environment, tag: str, dockerfile: Path, build_args: dict, base: bases.Base,
                log, log_path: Path, *, cli: str, ca: Path | None, console) -> None:
    """Build `tag` with `cli` from a context of its own (the Dockerfile, uv and its options, the
    pins), writing the build's output into `log` and its last line onto `console`; a failed
    build is EnvironmentUnavailable, with the log's tail."""
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
            pins = [f"--index-url {index}", *image_requirements(env)] if index else image_requirements(env)
        first = [f"--index-url {index}"] if index else []
        (Path(ctx) / "requirements.txt").write_text("\n".join(pins) + "\n")
        (Path(ctx) / "forced.txt").write_text("".join(f"{r}\n" for r in (first + list(env.force))
                                                      if env.force))
        host_network = bool(index) or (family(env) != "tf1-gpu" and _index_on_loopback())
        args = [cli, "build", "--progress=plain", "-t", tag] + (["--network", "host"] if host_network else [])
        for key, value in build_args.items():
            args += ["--build-arg", f"{key}={value}"]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        secret = Path(ctx) / "no-ca"
        secret.write_text("")  # an empty secret: the Dockerfile then leaves PIP_CERT alone
        args += ["--secret", f"id=ca,src={ca or secret}", ctx]
        log.write("$ " + " ".join(args) + "\n")
        log.flush()
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "DOCKER_BUILDKIT": "1"})
        last = ""
        with console.status(f"building {env.name}") as status:
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
