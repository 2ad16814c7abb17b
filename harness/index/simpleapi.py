"""Asking an index for one project's files, through its simple API, as pip would ask it.

The JSON form (PEP 691) also says when each file was uploaded (PEP 700) and which Python it
needs; an index that only serves the HTML pages (PEP 503) gives no upload times. The request
goes the way the user's own pip goes -- its ``index-url``, ``cert`` and ``proxy`` (pipsettings.py)
-- and an index that cannot be reached is asked once per process, not once per project.
Caching the answers, and what they mean for a version range, is releases.py's business.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.index.pipsettings import PipSettings

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
TIMEOUT = 60                    # seconds for one index request


class ReleasesUnavailable(Exception):
    """The index could not be asked and nothing is cached: the reason, in words."""


def opener(settings: PipSettings) -> urllib.request.OpenerDirector:
    """An opener that reaches the index the way pip would: its CA bundle, its proxy."""
    context = ssl.create_default_context(cafile=settings.cert) if settings.cert else ssl.create_default_context()
    handlers: list = [urllib.request.HTTPSHandler(context=context)]
    if settings.proxy:
        handlers.append(urllib.request.ProxyHandler({"http": settings.proxy, "https": settings.proxy}))
    return urllib.request.build_opener(*handlers)  # without an explicit proxy: https_proxy etc., as pip


@dataclass(frozen=True)
class File:
    """One file the index lists for a project: a wheel or an sdist of one release."""

    filename: str
    url: str
    requires_python: str | None = None
    uploaded: str | None = None    # ISO 8601, UTC (PEP 700); None where the index does not say
    yanked: bool = False
    sha256: str | None = None

    @property
    def version(self) -> Version | None:
        try:
            if self.filename.endswith(".whl"):
                return parse_wheel_filename(self.filename)[1]
            return parse_sdist_filename(self.filename)[1]
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            return None


def _parse_json(data: dict, base: str) -> list[File]:
    files = []
    for f in data.get("files") or []:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
            continue
        upload = f.get("upload-time")
        files.append(File(filename=f["filename"], url=urllib.parse.urljoin(base, str(f.get("url", ""))),
                          requires_python=f.get("requires-python") or None,
                          uploaded=utc_text(upload) if isinstance(upload, str) else None,
                          yanked=bool(f.get("yanked")), sha256=(f.get("hashes") or {}).get("sha256")))
    return files


_ANCHOR = re.compile(r"<a\s([^>]*)>([^<]*)</a>", re.I)
_ATTR = re.compile(r'([a-zA-Z-]+)\s*=\s*"([^"]*)"')


def _parse_html(text: str, base: str) -> list[File]:
    """PEP 503 pages (indexes without the JSON API): no upload times."""
    files = []
    for attrs, label in _ANCHOR.findall(text):
        a = {k.lower(): html.unescape(v) for k, v in _ATTR.findall(attrs)}
        href = a.get("href", "")
        url, _, frag = href.partition("#")
        sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
        files.append(File(filename=html.unescape(label).strip(), url=urllib.parse.urljoin(base, url),
                          requires_python=a.get("data-requires-python") or None,
                          yanked="data-yanked" in a, sha256=sha))
    return files


def utc_text(text: str) -> str:
    """'2024-06-16T18:40:05.123Z' -> '2024-06-16T18:40:05Z': the one form of a moment in the
    harness's records and cut-offs (UTC, whole seconds; a time without a zone is UTC, a date is
    its midnight). ValueError for what is not an ISO 8601 date or time."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_down: dict[tuple, str] = {}  # (index, proxy) -> why it could not be reached: once per process, not per project


def fetch(settings: PipSettings, name: str) -> list[File]:
    """A project's files as the index lists them now; ReleasesUnavailable, in words, when it cannot say."""
    route = (settings.index, os.environ.get("https_proxy"), os.environ.get("HTTPS_PROXY"))
    if route in _down:
        raise ReleasesUnavailable(_down[route])
    try:
        return _fetch_once(settings, name)
    except ReleasesUnavailable as exc:
        if str(exc).startswith("cannot reach"):
            _down[route] = str(exc)
        raise


def _fetch_once(settings: PipSettings, name: str) -> list[File]:
    url = f"{settings.index}/{name}/"
    if url.startswith("file:"):
        path = Path(urllib.parse.urlparse(url).path)
        page = path / "index.html"
        if not page.is_file():
            raise ReleasesUnavailable(f"{name} is not in the index {settings.index}")
        return _parse_html(page.read_text(errors="replace"), page.as_uri())
    request = urllib.request.Request(url, headers={"Accept": f"{SIMPLE_JSON}, text/html;q=0.1",
                                                   "User-Agent": "tfkeras-harness"})
    try:
        with opener(settings).open(request, timeout=TIMEOUT) as response:
            body = response.read()
            kind = response.headers.get("Content-Type", "")
            final = response.geturl()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise ReleasesUnavailable(f"{name} is not on the index {settings.index} (404)") from None
        raise ReleasesUnavailable(f"{settings.index} answered {exc.code} {exc.reason} for {name}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReleasesUnavailable(f"cannot reach {settings.index}: {reason}") from None
    if "json" in kind:
        return _parse_json(json.loads(body), final)
    return _parse_html(body.decode(errors="replace"), final)
