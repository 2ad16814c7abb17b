"""A package index on the loopback interface serving small planted packages, each release
with the upload time a test chooses (PEP 691 JSON with PEP 700 upload times, the API the
harness and pip read). Any other project is redirected to the real index, so pip can still
upgrade itself in a new virtualenv."""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import json
import zipfile
from http.server import BaseHTTPRequestHandler

from harness.index.cutoff import LoopbackIndex

REAL_INDEX = "https://pypi.org/simple"
# The caching headers PyPI sends: a file never changes, a project page may after ten minutes
IMMUTABLE = "max-age=365000000, immutable, public"
PAGE = "max-age=600, public"


def wheel(name: str, version: str, body: str, module: str | None = None,
          requires: list[str] = ()) -> tuple[str, bytes]:
    """A minimal pure-Python wheel holding `module/__init__.py` = body (`module`: the name, unless
    the project's module is named otherwise, as tensorflow-cpu's is `tensorflow`); `requires`: its
    Requires-Dist lines (what an installer must resolve beside it)."""
    dist = f"{name.replace('-', '_')}-{version}"
    needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {f"{module or name}/__init__.py": body,
             f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}",
             f"{dist}.dist-info/WHEEL": ("Wheel-Version: 1.0\nGenerator: planted\nRoot-Is-Purelib: true\n"
                                          "Tag: py3-none-any\n")}
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{dist}.dist-info/RECORD,,")
        z.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return f"{dist}-py3-none-any.whl", buf.getvalue()


class PlantedIndex(LoopbackIndex):
    """`releases`: {name: {version: upload time (ISO 8601 UTC)}}; each release's module says its version.
    `modules`: {name: the module a project installs}, where that is not its name; `bodies`: code a
    release's module holds besides its version (an API that one release has and the next lacks);
    `requires`: {(name, version): its Requires-Dist} (a release that needs numpy < 2)."""

    def __init__(self, releases: dict[str, dict[str, str]], modules: dict[str, str] | None = None,
                 bodies: dict[tuple[str, str], str] | None = None,
                 requires: dict[tuple[str, str], list[str]] | None = None):
        self.files: dict[str, tuple[str, bytes, str]] = {}   # filename -> (project, bytes, uploaded)
        self.modules = modules or {}
        self.bodies = bodies or {}   # {(name, version): the module's code after its __version__}
        self.requires = requires or {}   # {(name, version): Requires-Dist}
        self.served: collections.Counter = collections.Counter()  # filename -> times its file was fetched
        self.lies: dict[str, bytes] = {}  # filename -> bytes served instead of the file its page's hash names
        for name, versions in releases.items():
            for version, uploaded in versions.items():
                self.plant(name, version, uploaded)
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                if parts[:1] == ["files"] and len(parts) == 2 and parts[1] in index.files:
                    index.served[parts[1]] += 0 if getattr(self, "head_only", False) else 1  # HEAD fetches nothing
                    data = index.lies.get(parts[1], index.files[parts[1]][1])
                    return self._send(200, data, "application/octet-stream", IMMUTABLE)
                if parts[:1] == ["simple"] and len(parts) == 2:
                    mine = [(f, d, u) for f, (p, d, u) in index.files.items() if p == parts[1]]
                    if not mine:
                        self.send_response(302)
                        self.send_header("Location", f"{REAL_INDEX}/{parts[1]}/")
                        self.end_headers()
                        return None
                    versions = sorted({f.split("-")[1] for f, _, _ in mine})
                    body = {"meta": {"api-version": "1.1"}, "name": parts[1], "versions": versions, "files": [
                        {"filename": f, "url": f"/files/{f}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
                         "upload-time": u} for f, d, u in mine]}
                    return self._send(200, json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json", PAGE)
                return self._send(404, b"not found", "text/plain")

            def do_HEAD(self):  # noqa: N802 - an installer may ask about a file (its size, range requests) first
                self.head_only = True
                return self.do_GET()

            def _send(self, code, data, kind, caching=None):
                self.send_response(code)
                self.send_header("Content-Type", kind)
                if caching:
                    self.send_header("Cache-Control", caching)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not getattr(self, "head_only", False):
                    self.wfile.write(data)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def plant(self, name: str, version: str, uploaded: str) -> None:
        """One more release, served from the next request on, with whatever upload time it is given
        (an earlier one than the moment it appears, as a mirror catching up shows)."""
        body = f'__version__ = "{version}"\n' + self.bodies.get((name, version), "")
        filename, data = wheel(name, version, body, self.modules.get(name), self.requires.get((name, version), []))
        self.files[filename] = (name, data, uploaded)
