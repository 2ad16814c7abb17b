"""Engines obtain environments and run cells in them: Docker images, virtualenvs, or an
interpreter that already holds the stack (local).

`ENGINES` is the one list of them: the command line's ``--engine`` choices
are ``auto`` plus its keys. An engine is a context manager that releases what
it holds on leaving::

    with select_engine(args.engine, pythons=...) as engine:
        ...
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from harness.engines.base import Engine
from harness.errors import EngineUnavailable
from harness.terminal import shown


def _docker(pythons: dict[str, str] | None, ca_bundle: str | None, console: Console | None) -> Engine:
    # deferred: the engine's module (and the docker SDK) is imported when it is chosen, so the CLI starts without it
    from harness.engines.docker import DockerEngine, docker_client
    return DockerEngine(docker_client(), ca_bundle=ca_bundle, console=console, pythons=pythons)


def _venv(pythons: dict[str, str] | None, ca_bundle: str | None, console: Console | None) -> Engine:
    from harness.engines.venv import VenvEngine  # deferred: imported when chosen, so the CLI starts without it
    return VenvEngine(pythons=pythons)


def _local(pythons: dict[str, str] | None, ca_bundle: str | None, console: Console | None) -> Engine:
    from harness.engines.local import LocalEngine  # deferred: imported when chosen, so the CLI starts without it
    return LocalEngine(pythons=pythons)


# name -> how to open it (imported on use: the Docker client is only loaded when asked for)
ENGINES: dict[str, Callable[[dict[str, str] | None, str | None, Console | None], Engine]] = {
    "docker": _docker, "venv": _venv, "local": _local}
AUTO = "auto"
CHOICES = (AUTO, *ENGINES)


def select_engine(name: str, pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
                  console: Console | None = None) -> Engine:
    """`auto` takes Docker when a daemon answers, else virtualenvs."""
    if name != AUTO:
        return ENGINES[name](pythons, ca_bundle, console)
    try:
        return ENGINES["docker"](pythons, ca_bundle, console)
    except EngineUnavailable as exc:
        if console:
            console.print(f"no Docker engine ({shown(exc)}); using virtualenvs", highlight=False)
        return ENGINES["venv"](pythons, ca_bundle, console)
