"""One download cache for every environment build: virtualenvs and images alike.

Without it each build fetches every wheel again: pip's own HTTP cache lives in one
user's home and never reaches an image build (whose pip runs with ``--no-cache-dir`` in a
throw-away container), and behind a proxy that drops the index's caching headers it keeps
nothing at all. A bisect over ten NumPy releases then downloads JAX ten times, a matrix on
Docker and on virtualenvs downloads TensorFlow twice, and the wait is the network's.

So the harness serves its builds an index of its own on 127.0.0.1 (``CachingIndex``), for
as long as a build lasts. Its project pages are the user's index's (``releases.project``:
the index, CA bundle and proxy pip would use), with each file that the index gives a sha256
linked to the harness instead: the first request fetches it from the index once, checks
its sha256 and keeps it under ``<cache>/downloads/``; every later build, in a virtualenv or
in a ``docker build --network host``, is served the kept file. pip checks the hash again,
so a file changed on disk is refused, not installed. Under a cut-off the same index lists
only the files uploaded before it (``cutoff.before``), which is how every pip, old or new,
resolves as of a moment. Each file fetched or served again is a line in the cache's ledger
(``ledger.py``).

What it does not change: the index pip resolves against (the user's, read live for an
environment without a cut-off), the extra indexes and find-links folders of the user's pip
configuration (kept without a cut-off; left out under one, whose rule needs upload times).
``HARNESS_DOWNLOAD_CACHE=0`` sends builds to the index directly, as before (an index the
harness cannot read itself, say one that asks for a login pip takes from a keyring).

The cache is bounded: when a build's index closes, the files least recently served go until
what is kept fits ``HARNESS_DOWNLOAD_CACHE_MAX`` (``4g`` unless set; ``0`` keeps nothing past
the build that fetched it). TensorFlow's wheels run to hundreds of megabytes each, and a cache
that only grows fills a disk that virtualenvs and images need as well -- as a cache of every
wheel a matrix ever read once did in this project's own CI. What a build is being served
meanwhile is safe: an open file outlives its name, and a file removed between its check and
its opening is fetched again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from . import buildlock, ledger, samefiles
from . import cutoff as cutoffs
from .caches import private
from .cells import size_bytes
from .cutoff import ISOLATED, NOT_FOUND, LoopbackIndex, applied_cutoff, before, cutoff_note, send_html, simple_page
from .errors import UserError
from .paths import cache_dir, inside
from .releases import TIMEOUT, File, ReleasesUnavailable, opener, pip_settings, project

VARIABLE = "HARNESS_DOWNLOAD_CACHE"
MAX_VARIABLE = "HARNESS_DOWNLOAD_CACHE_MAX"
DEFAULT_MAX = 4 << 30
SHA256 = re.compile(r"[0-9a-f]{64}")
FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,250}")
CHUNK = 1 << 20
VIA = "the harness's download cache: an index on 127.0.0.1 over the user's index"
VIA_CUTOFF = ("a harness index on 127.0.0.1 listing files uploaded before the cut-off, served from the harness's "
              "download cache")


class DownloadFailed(Exception):
    """A file could not be fetched, or was not what the index said it is."""


def enabled() -> bool:
    return os.environ.get(VARIABLE, "1").strip().lower() not in ("0", "off", "no", "false")


def folder() -> Path:
    return cache_dir() / "downloads"


def max_bytes() -> int:
    """The cache's bound in bytes, from ``HARNESS_DOWNLOAD_CACHE_MAX`` in the sizes a matrix's
    ``memory_limit`` takes (``4g``, ``500m``, ``0``); a value that is not one is an error naming
    the variable, not a silent default."""
    raw = os.environ.get(MAX_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX
    size = size_bytes(raw)
    if size is None:
        raise UserError(f"{MAX_VARIABLE}={raw!r}: not a size (say 4g, 500m or 0)")
    return size


def trim(limit: int | None = None) -> list[Path]:
    """Remove the least recently served files until the cache holds at most `limit` bytes
    (``max_bytes()``); returns what went. Each file goes under its own fetch lock, so no file
    is removed while a build checks or fetches it."""
    limit = max_bytes() if limit is None else limit
    root = folder()
    if not root.is_dir() or private(root):
        return []
    kept = []
    for path in root.glob("??/*"):
        if SHA256.fullmatch(path.name[:64]) and ".part-" not in path.name:
            with contextlib.suppress(OSError):
                st = path.stat()
                kept.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in kept)
    gone = []
    for _, size, path in sorted(kept):
        if total <= limit:
            break
        with buildlock.held(f"download {path.name[:64]}"):
            path.unlink(missing_ok=True)
        total -= size
        gone.append(path)
        ledger.append("download-evicted", file=path.name[65:], bytes=size)
    return gone


def cacheable(f: File) -> bool:
    """A file the cache can keep: one the index names a sha256 for, fetched over http(s)."""
    return bool(f.sha256 and SHA256.fullmatch(f.sha256) and FILENAME.fullmatch(f.filename)
                and urllib.parse.urlsplit(f.url).scheme in ("http", "https"))


def path_of(sha256: str, filename: str) -> Path:
    root = folder()
    return inside(root, root / sha256[:2] / f"{sha256}-{filename}")


def obtain(f: File) -> Path:
    """The kept copy of `f`, fetched and checked first if this cache has none. A kept copy is
    checked again before it is served (a file changed on disk is fetched anew, never served).
    One process fetches a file while any other that wants it waits (buildlock), then reads
    the same copy."""
    path = path_of(f.sha256, f.filename)
    why = private(folder()) or private(path.parent)
    if why:
        raise DownloadFailed(f"download cache not usable: {why}")
    with buildlock.held(f"download {f.sha256}"):
        if _sha256(path) == f.sha256:
            os.utime(path)  # served now: the last to go when the cache is trimmed
            ledger.append("download", file=f.filename, bytes=path.stat().st_size, seconds=0, fetched=False)
        else:
            _fetch(f, path)
    return path


def _sha256(path: Path) -> str | None:
    try:
        return samefiles.file_sha256(path)
    except OSError:
        return None


def _fetch(f: File, path: Path) -> None:
    started = time.monotonic()
    part = path.with_name(f"{path.name}.part-{os.getpid()}")
    digest, size = hashlib.sha256(), 0
    try:
        with opener(pip_settings()).open(f.url, timeout=TIMEOUT) as response, open(part, "wb") as out:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        if digest.hexdigest() != f.sha256:
            raise DownloadFailed(f"{f.filename} from {f.url}: sha256 {digest.hexdigest()}, the index says {f.sha256}")
        os.replace(part, path)
    except OSError as exc:
        raise DownloadFailed(f"{f.filename} from {f.url}: {getattr(exc, 'reason', exc)}") from None
    finally:
        part.unlink(missing_ok=True)
    ledger.append("download", file=f.filename, bytes=size, seconds=round(time.monotonic() - started, 2),
                  fetched=True)


class CachingIndex(LoopbackIndex):
    """The user's index, as of `cutoff` if one is given, with its files served from the
    download cache (the module's docstring). A project the harness cannot read from the index
    is sent there (a redirect) without a cut-off, and not found under one."""

    def __init__(self, cutoff: str | None = None):
        self.cutoff = cutoff
        self.files: dict[str, File] = {}   # sha256 -> the file a page linked, for its fetch
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                parts = [urllib.parse.unquote(p) for p in self.path.split("?")[0].split("/") if p]
                if len(parts) == 3 and parts[0] == "files":
                    return index.serve_file(self, parts[1])
                if len(parts) < 2 or parts[0] != "simple":
                    return send_html(self, 200, "<html><body></body></html>")
                return index.serve_page(self, parts[1])

            def log_message(self, *args):  # quiet
                pass

        super().__init__(Handler)

    def serve_page(self, handler: BaseHTTPRequestHandler, name: str) -> None:
        try:
            proj = project(name, refresh=not self.cutoff, covers=self.cutoff)
        except ReleasesUnavailable:
            if self.cutoff:
                return send_html(handler, 404, NOT_FOUND)
            handler.send_response(302)  # the index pip would have asked: its own page, its own links
            handler.send_header("Location", f"{pip_settings().index}/{urllib.parse.quote(name)}/")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return None
        files = before(proj.files, self.cutoff)
        for f in files:
            if cacheable(f):
                self.files[f.sha256] = f

        def href(f: File) -> str:
            return f"/files/{f.sha256}/{urllib.parse.quote(f.filename)}" if cacheable(f) else f.url
        return send_html(handler, 200, simple_page(files, href))

    def serve_file(self, handler: BaseHTTPRequestHandler, sha256: str) -> None:
        f = self.files.get(sha256)
        if f is None:
            return send_html(handler, 404, NOT_FOUND)
        try:
            fh = _open(f)
        except DownloadFailed as exc:
            return send_html(handler, 502, f"<html><body>{exc}</body></html>")
        with fh:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/octet-stream")
            handler.send_header("Content-Length", str(os.fstat(fh.fileno()).st_size))
            handler.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # pip gave up: its business
                shutil.copyfileobj(fh, handler.wfile, CHUNK)
        return None


def _open(f: File):
    """The kept copy of `f`, opened: fetched again if another build's trim removed it between
    its check and its opening."""
    for _ in range(3):
        with contextlib.suppress(FileNotFoundError):
            return open(obtain(f), "rb")
    raise DownloadFailed(f"{f.filename}: removed from the download cache while being served, three times")


class TrimmedIndex(CachingIndex):
    """A CachingIndex that bounds the cache (``trim``) when it closes: every build's index.
    The bound is read first, so that a value that is not a size stops the build before it
    starts."""

    def __init__(self, cutoff: str | None = None):
        self.limit = max_bytes()
        super().__init__(cutoff)

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        trim(self.limit)


@contextlib.contextmanager
def pip_index(env, python: str):
    """pip arguments for the installs of an environment's build, and what its provenance says
    of them (``{"cutoff": ...}`` or ``{"downloads": ...}``; empty: nothing to say): the download
    cache's index, as of the environment's cut-off if it has one, for as long as the build
    lasts. Without the cache (HARNESS_DOWNLOAD_CACHE=0) the cut-off's own route
    (``cutoff.applied_cutoff``)."""
    cutoff = getattr(env, "uploaded_before", None)
    if not enabled():
        with applied_cutoff(env, python) as (args, note):
            yield args, ({"cutoff": note} if note else {})
        return
    settings = pip_settings()
    with TrimmedIndex(cutoff) as index:
        if not cutoff:  # the user's extra indexes and find-links folders still apply
            yield ["--index-url", index.url], {"downloads": {"index": settings.index, "via": VIA}}
            return
        keep = (["--cert", settings.cert] if settings.cert else []) + (
            ["--proxy", settings.proxy] if settings.proxy else [])
        yield (["--isolated", "--index-url", index.url, *keep],
               {"cutoff": {**cutoff_note(env, VIA_CUTOFF), "isolated": ISOLATED}})


def local_daemon() -> bool:
    """Whether a Docker daemon's builds share this host's loopback (``--network host``): the
    default socket or a unix one; a daemon elsewhere (tcp://, ssh://) cannot reach the index."""
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


def _for_builds() -> bool:
    return enabled() and local_daemon()


def build_note(env) -> dict:
    """What an image's provenance says of the index its build read, as ``pip_index`` does."""
    cutoff = getattr(env, "uploaded_before", None)
    if not _for_builds():
        return {"cutoff": cutoff_note(env, cutoffs.BUILD_VIA)} if cutoff else {}
    if cutoff:
        return {"cutoff": cutoff_note(env, f"{VIA_CUTOFF} (docker build --network host)")}
    return {"downloads": {"index": pip_settings().index, "via": f"{VIA} (docker build --network host)"}}


@contextlib.contextmanager
def build_index(env):
    """The index an image build's pip reads, while it lasts, or None for the index itself:
    the download cache's (as of the environment's cut-off, if any) where the Docker daemon is
    local and the cache is on; else the cut-off's own index, or none (``cutoff.build_index``)."""
    if _for_builds():
        with TrimmedIndex(getattr(env, "uploaded_before", None)) as index:
            yield index.url
        return
    with cutoffs.build_index(env) as url:
        yield url
