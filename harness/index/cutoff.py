"""Resolving as of a moment where pip, not uv, does the resolving.

uv resolves every environment as of its cut-off itself (``installer``). pip is left in two
places, and for them: the project's own lock (``harness.toolchain.resolve``: pip's
``--dry-run --report``, which uv has no equivalent of) and the TF 1.x GPU images, whose
base's Python 3.5 no uv serves. pip >= 26.0 resolves as of a moment itself
(``--uploaded-prior-to``); for older pips the harness serves a loopback index that lists only
the files the real index had received before the cut-off (``CutoffIndex``). Either way pip is
isolated from its configuration but for the user's index, CA bundle and proxy, because files
from ``find-links`` folders carry no upload time. ``LoopbackIndex`` also serves the planted
indexes of the tests.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from packaging.version import InvalidVersion, Version

from harness.index.releases import pip_settings, project
from harness.index.simpleapi import ReleasesUnavailable

PIP_WITH_CUTOFF = Version("26.0")  # the first pip with --uploaded-prior-to (checked in its wheels)


def pip_has_cutoff(pip_version: str | None) -> bool:
    try:
        return pip_version is not None and Version(pip_version) >= PIP_WITH_CUTOFF
    except InvalidVersion:
        return False


def pip_version_of(python: str) -> str | None:
    """The version of the pip that `python` runs (None if it has none)."""
    try:
        out = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"pip (\S+)", out.stdout)
    return match.group(1) if match else None


class LoopbackIndex:
    """An index served on 127.0.0.1 by `handler` (a BaseHTTPRequestHandler class) from a thread,
    for as long as the `with` block lasts: the one serving mechanism of the cut-off index here
    and of the planted indexes the tests publish their own packages on."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def send_html(handler: BaseHTTPRequestHandler, code: int, body: str) -> None:
    """An index page (or a not-found one) as an http.server handler answers it."""
    data = body.encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "text/html; charset=utf-8")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class CutoffIndex(LoopbackIndex):
    """The index as it was at a moment: a PEP 503 index on 127.0.0.1 listing,
    for every project, only the files the real index had received before the
    cut-off, each linked to the real file with its hash. It gives pips older
    than 26.0 (no ``--uploaded-prior-to``) exactly that option's effect.

    Its lists are the harness's cached ones when they were fetched after the
    cut-off (``releases.project``'s `covers`); `refresh` asks the index for every
    one, as the project's own lock does so that both ways of applying a cut-off
    read the index as it is now."""

    def __init__(self, cutoff: str, *, refresh: bool = False):
        self.cutoff = cutoff
        self.refresh = refresh
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                if not parts:
                    body, code = "<html><body></body></html>", 200
                else:
                    body, code = index.page(parts[-1])
                send_html(self, code, body)

            def log_message(self, *args):  # quiet
                pass

        super().__init__(Handler)

    def page(self, name: str) -> tuple[str, int]:
        try:
            proj = project(name, refresh=self.refresh, covers=self.cutoff)
        except ReleasesUnavailable:
            return NOT_FOUND, 404
        return simple_page(before(proj.files, self.cutoff)), 200


NOT_FOUND = "<html><body>not found</body></html>"


def before(files, cutoff: str | None) -> list:
    """The files uploaded before `cutoff` (all of them without one); a file of unknown upload
    time is left out under a cut-off, as pip's ``--uploaded-prior-to`` does."""
    return list(files) if not cutoff else [f for f in files if f.uploaded and f.uploaded < cutoff]


def simple_page(files, href=None) -> str:
    """A PEP 503 project page linking `files` (simpleapi.File), each with its sha256, Python
    requirement and yanked flag; `href(file)` gives a link's target (default: the file's own URL)."""
    links = []
    for f in files:
        target = href(f) if href else f.url
        link = html.escape(target + (f"#sha256={f.sha256}" if f.sha256 else ""))
        rp = f' data-requires-python="{html.escape(f.requires_python)}"' if f.requires_python else ""
        yanked = " data-yanked" if f.yanked else ""
        links.append(f'<a href="{link}"{rp}{yanked}>{html.escape(f.filename)}</a><br/>')
    return "<html><body>\n" + "\n".join(links) + "\n</body></html>"



BUILD_VIA = ("a harness index on 127.0.0.1 listing files uploaded before the cut-off, read by pip in the "
             "image build (docker build --network host)")


def cutoff_note(env, via: str) -> dict:
    """What provenance says about an environment's cut-off."""
    return {"uploaded_before": env.uploaded_before, "ranges": [list(r) for r in env.ranges],
            "index": pip_settings().index, "via": via}


@contextlib.contextmanager
def build_index(env):
    """The cut-off index's URL for an image build while it lasts; None without a cut-off."""
    if not getattr(env, "uploaded_before", None):
        yield None
        return
    with CutoffIndex(env.uploaded_before) as index:
        yield index.url


@contextlib.contextmanager
def pip_arguments(uploaded_before: str, python: str, *, refresh: bool = False):
    """pip arguments that make `python`'s pip resolve as of `uploaded_before`, and how (for
    provenance): the one place a cut-off becomes pip options, for a cell's environment and for
    the project's own lock (``harness.toolchain.resolve``).

    pip checks upload times only for files from an index: files from ``find-links``
    folders and ``file://`` indexes carry none and would pass any cut-off. So the
    install is ``--isolated`` from pip's configuration and given back only what the
    cut-off can judge: the user's index, CA bundle and proxy (``pip_settings``).
    Then pip's own ``--uploaded-prior-to`` where it has it (pip >= 26.0), else a
    CutoffIndex for as long as the installs take (`refresh`: its lists from the index, not
    the cache)."""
    settings = pip_settings()
    keep = ((["--cert", settings.cert] if settings.cert else [])
            + (["--proxy", settings.proxy] if settings.proxy else []))
    pip = pip_version_of(python)
    if pip_has_cutoff(pip):
        yield (["--isolated", "--index-url", settings.index, *keep, f"--uploaded-prior-to={uploaded_before}"],
               f"pip {pip} --uploaded-prior-to")
        return
    with CutoffIndex(uploaded_before, refresh=refresh) as index:
        yield (["--isolated", "--index-url", index.url, *keep],
               f"a harness index on 127.0.0.1 listing files uploaded before the cut-off "
               f"(pip {pip} has no --uploaded-prior-to; pip >= {PIP_WITH_CUTOFF} does)")
