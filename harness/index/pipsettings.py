"""The index, CA bundle and proxy the user's pip would use: what every environment resolves against.

A user's pip settings are where their index (a mirror, a company index), their TLS proxy's CA
bundle and their HTTP proxy already are, so the harness reads them, and gives them to uv
(``installer``) and to its own requests to the index (``releases``). They are read from pip's
files here, in pip's own order and precedence, not by asking a pip: the harness's environments
are made by uv and hold no pip, and the answer must not depend on which pip happens to sit
beside the harness.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class PipSettings:
    index: str = DEFAULT_INDEX
    cert: str | None = None
    proxy: str | None = None

    @property
    def key(self) -> str:
        return hashlib.sha256(self.index.encode()).hexdigest()[:12]


_settings: PipSettings | None = None


def pip_settings() -> PipSettings:
    """The index, CA bundle and proxy the user's pip would use: the ``PIP_*`` variables, then pip's
    configuration files, then pip's defaults -- read once per process.

    The files are read here, in pip's own order and precedence (``pip_config_files``), not by asking
    a pip: the harness's own environments are made by uv and hold no pip, and the answer must not
    depend on which pip happens to be installed beside the harness."""
    global _settings
    if _settings is None:
        found = pip_config()
        env = os.environ
        index = env.get("PIP_INDEX_URL") or found.get("index-url") or DEFAULT_INDEX
        cert = env.get("PIP_CERT") or found.get("cert")
        proxy = env.get("PIP_PROXY") or found.get("proxy")
        _settings = PipSettings(index=index.split()[0].rstrip("/"), cert=cert or None, proxy=proxy or None)
    return _settings


def pip_config_files() -> list[Path]:
    """pip's configuration files, lowest precedence first: global (``$XDG_CONFIG_DIRS``'s
    ``pip/pip.conf``, ``/etc/pip.conf``), user (``~/.pip/pip.conf``, ``$XDG_CONFIG_HOME/pip/pip.conf``),
    site (the running environment's ``pip.conf``), then ``PIP_CONFIG_FILE``. As pip does, a
    ``PIP_CONFIG_FILE`` that exists leaves the user's files out, and ``os.devnull`` leaves out all."""
    env = os.environ
    named = env.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    dirs = [d for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(dirs)] + [Path("/etc/pip.conf")]
    if not (named and Path(named).exists()):
        home = Path.home()
        files += [home / ".pip" / "pip.conf",
                  Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    if named:
        files.append(Path(named))
    return files


def pip_config() -> dict[str, str]:
    """pip's settings for `pip install` from its files (``pip_config_files``): a later file over an
    earlier one, and in each file ``[install]`` over ``[global]``. A file that cannot be read or
    parsed is passed over, as it would make pip fail, not resolve elsewhere."""
    found: dict[str, str] = {}
    for path in pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                found.update({k: v.strip().strip("'\"") for k, v in parser.items(section)})
    return found
