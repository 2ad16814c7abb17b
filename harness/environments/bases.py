"""Base images, including where no registry can be reached.

Dockerfiles name real public bases (``python:3.6-slim``,
``tensorflow/tensorflow:1.12.0-gpu-py3``) so that a user with a registry gets
exactly those. Where a base can be neither found locally nor pulled, an
offline route builds a local equivalent: a debootstrapped Debian imported as
an image, plus, for Python versions Debian does not ship, the host's own
interpreter copied in at its own path. Provenance records which one was used.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness import SOURCE
from harness.environments import buildlock, interpreters, ledger
from harness.errors import EnvironmentUnavailable

IMAGES_DIR = SOURCE.parent / "images"
PREFIX = "tfkeras-harness"
# Which Debian release ships which python3, for bases that need no copied interpreter.
DEBIAN_PYTHON = {"bookworm": "3.11", "bullseye": "3.9"}
DEFAULT_RELEASE = "bookworm"
DEBOOTSTRAP_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
PYTHON_REF = re.compile(r"^(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)(?:\.\d+)?(?:-slim)?(?:-\w+)?$")


@dataclass
class Base:
    requested: str   # what the Dockerfile / matrix names
    used: str        # what the build really started from
    route: str       # "local", "pulled" or "offline"
    image_id: str | None = None


def images_dir() -> Path:
    """The Dockerfiles; from a checkout, or HARNESS_IMAGES for an installed package."""
    return Path(os.environ.get("HARNESS_IMAGES") or IMAGES_DIR)


def _run(args: list[str], log, **kw) -> None:
    log.write(f"$ {' '.join(args)}\n")
    log.flush()
    proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, **kw)
    if proc.returncode != 0:
        raise EnvironmentUnavailable(f"{args[0]} {args[1]} failed with exit code {proc.returncode}")


def _exists(client, ref: str) -> str | None:
    import docker.errors  # optional dependency: the docker SDK, only with --engine docker
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def _try_pull(client, ref: str) -> str | None:
    import docker.errors  # optional dependency: the docker SDK, only with --engine docker
    try:
        return client.images.pull(ref).id
    except docker.errors.APIError:
        return None


def _once(client, tag: str, make) -> str:
    """`tag`, made by `make()` unless it exists; one maker per host (buildlock), the others
    wait for it and then find the image there. A base made is written in the cache's ledger."""
    if _exists(client, tag):
        return tag
    with buildlock.held(tag):
        if not _exists(client, tag):
            with ledger.building("docker", f"base {tag}"):
                make()
    return tag


def debian_image(client, cli: str, release: str, log) -> str:
    """``tfkeras-harness/debian:<release>``, debootstrapped and imported if missing."""
    tag = f"{PREFIX}/debian:{release}"
    return _once(client, tag, lambda: _debootstrap(client, cli, release, tag, log))


def _debootstrap(client, cli: str, release: str, tag: str, log) -> None:
    """The Debian base, bootstrapped here: by mmdebstrap where it is installed (apt's parallel
    downloads and a tarball written straight into `docker import`: about half debootstrap's time),
    else by debootstrap. Both make the same minbase system with the same packages."""
    mmdebstrap, debootstrap = shutil.which("mmdebstrap"), shutil.which("debootstrap")
    if not (mmdebstrap or debootstrap) or os.geteuid() != 0:
        raise EnvironmentUnavailable(
            f"no registry reachable and no local {tag}: building it needs debootstrap (or mmdebstrap) and root "
            f"(apt-get install debootstrap; run as root), or load a base image with 'docker load'")
    mirror = os.environ.get("HARNESS_DEBIAN_MIRROR")  # unset: the tool's own default (and its proxy rules)
    hook = _merged_usr_hook(mmdebstrap) if mmdebstrap else None
    if hook:
        _mmdebstrap(mmdebstrap, hook, cli, release, tag, mirror, log)
        return
    with tempfile.TemporaryDirectory(prefix="harness-debootstrap-") as root:
        _run([debootstrap, "--variant=minbase", f"--include={DEBOOTSTRAP_PACKAGES}", release, root,
              *([mirror] if mirror else [])], log)
        shutil.rmtree(Path(root) / "var/cache/apt/archives", ignore_errors=True)
        log.write(f"$ tar -C {root} -c . | {cli} import - {tag}\n")
        log.flush()
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([cli, "import", "--change", "ENV LANG=C.UTF-8", "-", tag], stdin=tar.stdout,
                             stdout=log, stderr=subprocess.STDOUT)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise EnvironmentUnavailable(f"docker import of the debootstrapped {release} failed")


def _merged_usr_hook(mmdebstrap: str) -> Path | None:
    """The hook that has mmdebstrap lay out /usr as debootstrap does (usr-is-merged; without it,
    usrmerge and perl come in), where mmdebstrap's package installed it; None: use debootstrap."""
    hook = Path(mmdebstrap).resolve().parent.parent / "share" / "mmdebstrap" / "hooks" / "maybe-merged-usr"
    return hook if hook.is_dir() else None


def _mmdebstrap(mmdebstrap: str, hook: Path, cli: str, release: str, tag: str, mirror: str | None, log) -> None:
    """mmdebstrap's tarball, on its standard output, imported as `tag` (its apt caches left out)."""
    args = [mmdebstrap, "--variant=minbase", f"--hook-dir={hook}", f"--include={DEBOOTSTRAP_PACKAGES}", release,
            "-", *([mirror] if mirror else [])]
    log.write(f"$ {' '.join(args)} | {cli} import - {tag}\n")
    log.flush()
    strap = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log)
    imp = subprocess.run([cli, "import", "--change", "ENV LANG=C.UTF-8", "-", tag], stdin=strap.stdout,
                         stdout=log, stderr=subprocess.STDOUT)
    strap.stdout.close()
    strap.wait()
    if imp.returncode != 0 or strap.returncode != 0:
        raise EnvironmentUnavailable(f"mmdebstrap of {release} into an image failed "
                                     f"(mmdebstrap exit {strap.returncode}, docker import exit {imp.returncode})")


_NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", "test", "tests")


def _interpreter_only(folder: str, entries: list[str]) -> set[str]:
    """What a copied interpreter leaves behind: tests, byte code, and everything
    installed into it (site-packages, and the pip / easy_install scripts). The
    host's packages are not the base's business, and they can carry the host's
    own trust store -- a proxy CA patched into pip's vendored certifi would
    otherwise end up in every image built on this base. pip is bootstrapped
    inside the image from the interpreter's own ensurepip wheel instead."""
    skipped = set(_NOT_COPIED(folder, entries))
    path = Path(folder)
    if path.parent.name == "lib" and path.name.startswith("python"):
        skipped |= {e for e in entries if e in ("site-packages", "dist-packages")}
    if path.name == "bin":
        skipped |= {e for e in entries if e.startswith(("pip", "easy_install"))}
    return skipped


def offline_python(client, cli: str, version: str, log, pythons: dict[str, str] | None = None) -> str:
    """A local stand-in for ``python:<version>-slim``."""
    for release, shipped in DEBIAN_PYTHON.items():
        if shipped == version:
            return debian_image(client, cli, release, log)
    dockerfile = images_dir() / "offline-python" / "Dockerfile"
    recipe = hashlib.sha256(dockerfile.read_bytes()).hexdigest()[:8]  # a changed recipe is a new base
    tag = f"{PREFIX}/python:{version}-{DEFAULT_RELEASE}-{recipe}"
    return _once(client, tag, lambda: _offline_python(client, cli, version, tag, dockerfile, log, pythons))


def _offline_python(client, cli: str, version: str, tag: str, dockerfile: Path, log, pythons) -> None:
    found = interpreters.find(version, pythons)
    if not found:
        raise EnvironmentUnavailable(
            f"no registry reachable, and no Python {version} on this host to build an offline base from "
            f"(install one with pyenv, or name it with --python {version}=PATH)")
    exe, full = found
    prefix = Path(exe).resolve().parent.parent
    debian = debian_image(client, cli, DEFAULT_RELEASE, log)
    with tempfile.TemporaryDirectory(prefix="harness-offline-python-") as ctx:
        shutil.copy(dockerfile, Path(ctx) / "Dockerfile")
        shutil.copytree(prefix, Path(ctx) / "python", symlinks=True, ignore=_interpreter_only)
        _run([cli, "build", "-t", tag, "--build-arg", f"DEBIAN_IMAGE={debian}",
              "--build-arg", f"PREFIX={prefix}", "--build-arg", f"VERSION={version}",
              "--label", f"org.opencontainers.image.description=offline python {full} from {exe}",
              ctx], log, env={**os.environ, "DOCKER_BUILDKIT": "0"})


def resolve(client, cli: str, ref: str, log, pythons: dict[str, str] | None = None) -> Base:
    """The base to build FROM: local, pulled, or an offline equivalent."""
    image_id = _exists(client, ref)
    if image_id:
        return Base(ref, ref, "local", image_id)
    log.write(f"pulling {ref}\n")
    image_id = _try_pull(client, ref)
    if image_id:
        return Base(ref, ref, "pulled", image_id)
    match = PYTHON_REF.match(ref)
    if not match:
        raise EnvironmentUnavailable(
            f"base image {ref} is not present and cannot be pulled, and has no offline route "
            f"(only python:X.Y bases do); pull or 'docker load' it on a machine with a registry")
    log.write(f"{ref} cannot be pulled; building an offline equivalent\n")
    used = offline_python(client, cli, match.group(1), log, pythons)
    return Base(ref, used, "offline", _exists(client, used))
