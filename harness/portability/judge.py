"""What each reader's observations mean: one verdict per writer, reader, model and format.

The reader script only observes (for every way it tried: loaded, and by how much its predictions
differ from the writer's, or the error); here the host decides, by one rule for every pair:

- the **floor** a difference is judged against is measured, not assumed: the difference loading
  on the writer's own stack shows (ten times it), and never below FLOOR -- float32 predictions
  computed by two releases' kernels (a GRU's fused and unfused paths, another BLAS) differ in the
  last bits without any change in the model;
- **same** when some way loads within the floor (the first such way is named: it is the one to
  use); **differs** when ways load but none within it (the largest difference of the best way is
  given); **refuses** when none loads (each way's error family); **unknown** when the reader
  cannot know the format at all (the reason; nothing was tried).
"""

from __future__ import annotations

import re

SAME, DIFFERS, REFUSES, UNKNOWN = "same", "differs", "refuses", "unknown"
VERDICTS = (SAME, DIFFERS, REFUSES, UNKNOWN)
FLOOR = 1e-5        # the least floor: last-bit differences between two releases' float32 kernels
OWN_FACTOR = 10     # the floor is this many times what the writer's own stack shows, when more


def floors(loads: dict[str, dict]) -> dict[tuple[str, str, str], float | None]:
    """(writer, model, format) -> the difference loading on the writer's own stack showed (the
    best way's), or None when the own stack loaded it no way. `loads`: reader name -> loads.json."""
    out = {}
    for reader, found in loads.items():
        own = (found.get("writers") or {}).get(reader) or {}
        for model, formats in (own.get("models") or {}).items():
            for fmt, entry in formats.items():
                diffs = [t["max_abs_diff"] for t in entry.get("tried") or [] if "max_abs_diff" in t]
                out[(reader, model, fmt)] = min(diffs) if diffs else None
    return out


def floor_for(own: float | None) -> float:
    return FLOOR if own is None else max(FLOOR, OWN_FACTOR * own)


def judge(entry: dict, floor: float) -> dict:
    """One file on one reader: {verdict, way, max_abs_diff, errors | reason}."""
    if "unknown" in entry:
        return {"verdict": UNKNOWN, "reason": entry["unknown"]}
    tried = entry.get("tried") or []
    loaded = [t for t in tried if t.get("loaded")]
    within = [t for t in loaded if t.get("max_abs_diff") is not None and t["max_abs_diff"] <= floor]
    if within:
        best = within[0]
        return {"verdict": SAME, "way": best["way"], "max_abs_diff": best["max_abs_diff"]}
    if loaded:
        numbers = [t for t in loaded if t.get("max_abs_diff") is not None]
        best = min(numbers, key=lambda t: t["max_abs_diff"]) if numbers else loaded[0]
        out = {"verdict": DIFFERS, "way": best["way"], "max_abs_diff": best.get("max_abs_diff")}
        if "shape" in best:
            out["shape"] = best["shape"]
        return out
    return {"verdict": REFUSES, "errors": {t["way"]: local(t.get("error")) for t in tried}}


# A cell's own folder, as an error names a handed file: `/…/<cell>.partial-<host>-<pid>/inputs/`
HANDED = re.compile(r"/[^\s'\"]*?/inputs/")


def local(error: str | None) -> str | None:
    """An error as the published data keeps it: a handed file named from the reader's `inputs/`,
    not by the folder of the machine and run that read it."""
    return HANDED.sub("inputs/", error) if error else error


# The operating system's words for a file that is not there (ENOENT), as h5py and open() report it
MISSING_FILE = ("No such file or directory", "unable to open file")


def unwritten(entry: dict) -> bool:
    """A file its writer's manifest lists, and no way found it: every way failed because the file
    was not there (a save that wrote nothing, or a later save of the same stack that removed it).
    Not a refusal of the reader's: nothing was there to judge."""
    tried = entry.get("tried") or []
    return bool(tried) and all(not t.get("loaded") and any(w in (t.get("error") or "") for w in MISSING_FILE)
                               for t in tried)


def records(loads: dict[str, dict], cells: dict[tuple[str, str], str] | None = None) -> list[dict]:
    """Every (writer, reader, model, format) judged, in a stable order. `cells`: (reader, writer)
    -> the id of the cell that read that writer's files, kept in each record as its evidence."""
    own = floors(loads)
    out = []
    for reader in sorted(loads):
        found = loads[reader]
        for writer, written in sorted((found.get("writers") or {}).items()):
            for model, formats in sorted((written.get("models") or {}).items()):
                for fmt, entry in sorted(formats.items()):
                    if unwritten(entry):
                        continue   # said among the cells that left nothing to judge (publish)
                    measured = own.get((writer, model, fmt))
                    floor = floor_for(measured)
                    record = {"writer": writer, "reader": reader, "model": model, "format": fmt,
                              **judge(entry, floor), "floor": floor,
                              "writer_stack": written.get("stack") or {}, "reader_stack": found.get("stack") or {},
                              "ways": [{**t, "error": local(t["error"])} if t.get("error") else t
                                       for t in entry.get("tried") or []]}
                    if measured is None and writer != reader:
                        record["floor_least"] = True   # the writer's own stack loads it no way: the least floor
                    if cells and (reader, writer) in cells:
                        record["cell"] = cells[(reader, writer)]
                    out.append(record)
    return out
