"""What the atlas already knows about the release a bump moves to: its rows for that release's minor
(the atlas keeps the newest patch of each) and the changes it found into them, each with its link,
so a maintainer reading the verdict sees whether the seeds' models moved there too.

Read from the atlas's published data (`docs/atlas/atlas.json`, `changes.json`) beside the harness's
source, as a clone holds it; an installed harness without it says nothing about the atlas, rather
than guessing."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.version import InvalidVersion, Version

ATLAS = Path(__file__).resolve().parents[2] / "docs" / "atlas"
PAGES = "https://github.com/tfkeras-harness/tfkeras-harness/blob/main/docs/atlas"
FIELDS = {"tensorflow": "tensorflow", "tensorflow-cpu": "tensorflow", "keras": "keras", "numpy": "numpy",
          "jax": "jax", "torch": "torch"}
MAX_ROWS = 8


def _minor(text: str) -> tuple | None:
    try:
        return Version(text).release[:2]
    except InvalidVersion:
        return None


def rows_for(package: str, version: str, atlas: Path = ATLAS) -> list[dict]:
    """The atlas's rows whose `package` is of `version`'s minor, each with the changes into it."""
    field = FIELDS.get(package)
    data, changes = atlas / "atlas.json", atlas / "changes.json"
    if field is None or not data.is_file() or _minor(version) is None:
        return []
    try:
        records = json.loads(data.read_text())["records"]
        found = json.loads(changes.read_text()) if changes.is_file() else []
    except (OSError, ValueError, KeyError):
        return []
    rows: dict[str, dict] = {}
    for r in records:
        if r.get(field) and _minor(r[field]) == _minor(version):
            key = f"{r['matrix']}/{r['environment']}"
            rows.setdefault(key, {"row": key, "release": r[field], "link": f"{PAGES}/rows/{r['matrix']}-"
                                  f"{r['environment']}.md", "changes": []})
    for c in found:
        if c.get("after") in rows:
            rows[c["after"]]["changes"].append({"kind": c.get("kind"), "detail": c.get("detail"), "id": c.get("id")})
    return sorted(rows.values(), key=lambda r: (not r["changes"], r["row"]))[:MAX_ROWS]   # changes first
