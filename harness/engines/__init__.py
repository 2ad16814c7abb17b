"""Engines obtain environments and run cells in them: Docker images, virtualenvs, or an
interpreter that already holds the stack (local)."""

from __future__ import annotations

from rich.console import Console

from ..errors import EngineUnavailable
from ..terminal import shown
from .base import Engine


def select_engine(name: str, pythons: dict[str, str] | None = None, ca_bundle: str | None = None,
                  console: Console | None = None) -> Engine:
    """`auto` takes Docker when a daemon answers, else virtualenvs."""
    from .venv import VenvEngine
    if name == "venv":
        return VenvEngine(pythons=pythons)
    if name == "local":
        from .local import LocalEngine
        return LocalEngine(pythons=pythons)
    from .docker import DockerEngine, docker_client
    try:
        client = docker_client()
    except EngineUnavailable as exc:
        if name == "docker":
            raise
        if console:
            console.print(f"no Docker engine ({shown(exc)}); using virtualenvs", highlight=False)
        return VenvEngine(pythons=pythons)
    return DockerEngine(client, ca_bundle=ca_bundle, console=console, pythons=pythons)
