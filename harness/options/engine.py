"""The engine options every command that builds environments takes (--engine, --python,
--ca-bundle), and how --python's VERSION=PATH values are read: one place, for every verb in
harness/commands/ and the work below it that reads them."""

from __future__ import annotations

import argparse

from harness.engines import CHOICES as ENGINE_CHOICES
from harness.errors import UserError


def pythons(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values or []:
        version, sep, path = value.partition("=")
        if not sep or not version or not path:
            raise UserError(f"--python expects VERSION=PATH (e.g. 3.6=/opt/py36/bin/python3.6), got {value!r}")
        out[version] = path
    return out


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                   help="where environments live: Docker images, virtualenvs, or (local) an interpreter "
                        "that already holds the pinned stack (auto: Docker if it answers)")
    p.add_argument("--python", action="append", metavar="VERSION=PATH", default=[],
                   help="venv/local engines: use this interpreter for this Python version (repeatable)")
    p.add_argument("--ca-bundle", metavar="PEM",
                   help="docker engine: extra CA bundle for pip behind a TLS-intercepting proxy "
                        "(default: PIP_CERT, SSL_CERT_FILE or REQUESTS_CA_BUNDLE)")
