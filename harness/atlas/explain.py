"""`harness atlas explain`: each break, mend, changed failure, slow-down or accuracy drop between
neighbouring rows, narrowed with the harness's own bisect -- to the first bad (or first good)
release between the two rows' minors and, where the package has nightlies, to the night -- and kept
as evidence the pages link.

The atlas measures the newest patch of each minor; a change between two rows therefore lies
somewhere among the releases between them. The bisect runs the after-row's cell with each release
of the package that differs between the rows (TensorFlow on the Keras 2 line, Keras on the Keras 3
lines, unless only the other moved), in the after-row's environment -- or, where an end does not
install there (a Python its release has no wheels for), in the before-row's -- each release resolved
as of its own day, and writes its record; that record is copied to ``EVIDENCE/<change id>.json`` with the
command that made it, so the next `publish` links it and anyone can run the command again.

A speed shift between rows is a candidate (the rows ran at different moments on a shared host):
the bisect runs both ends' cells in one session, so its answer confirms the shift or refutes it --
a speed-up as much as a slow-down (the slower end is the bad one, whichever it is). A two-device
finding within one row is not between releases: `harness diverge` follows the row's one-device
cell and its two-device cell layer by layer and says where the two models part, above the floor
the one-device stack scatters by itself; its record is the evidence.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from rich.console import Console

from harness import exits, status
from harness.atlas import changes, records, rows
from harness.environments import removal
from harness.errors import UserError
from harness.files.paths import cache_dir
from harness.terminal import shown

STATUS_KINDS = ("broke", "mended", "family-changed")
# A shift is bisected as a drop past the criterion from the better end, whichever end that is
SPEED = ["--speed-drop", "20"]
CRITERIA = {"slower": SPEED, "faster": SPEED, "accuracy": ["--accuracy-drop", "0.02"]}
SPEED_DIRECTION = {"slower": "broke", "faster": "mended"}  # what the bisect finds when the rows were right
EXPLAINED = STATUS_KINDS + tuple(CRITERIA) + ("devices", "devices-seed")
EVIDENCE = "docs/atlas/evidence"
# where the bisects' bundles (OUT/bundles) and the comparisons' sides and pages (OUT/diverge) go:
# apart from every results folder (one under `results/`, the runs' default, is refused there)
OUT = "bundles/atlas-explain"
UV = "atlas-uv/explain"   # under the harness's cache: the uv cache explaining runs install from, emptied after each
WHAT = {"bisect": "narrow it to the release and night", "diverge": "where the two models part, layer by layer"}
KEPT = ("package", "versions", "direction", "first_bad", "last_good", "first_good", "last_bad", "candidates",
        "problem", "warnings", "nightly", "tested")


def plan(change: changes.Change, by_key: dict[str, rows.Row], *, nightly: bool,
         side: str = "after") -> list[str] | None:
    """The harness's arguments that explain a change: `diverge` for a two-device finding, else
    `bisect` between the two rows, in the `side` row's environment; None when there is nothing to
    run (no two sides, a gain)."""
    if change.kind in ("devices", "devices-seed"):
        row = by_key.get(change.after)
        if row is None or change.size is None:  # "trained on fewer devices": nothing to compare
            return None
        column = change.where["column"]
        return ["diverge", row.entries[column].origin[0], *changes.device_pair(row, column)]
    before, after = by_key.get(change.before or ""), by_key.get(change.after)
    if before is None or after is None:
        return None
    package = rows.released_package(after.line, before.stack, after.stack)
    if package is None:
        return None
    workload, parallelism = change.where["column"].split(" ", 1)
    home = after if side == "after" else before
    entry = home.entries.get(change.where["column"])
    matrix, environment = entry.origin if entry else (home.matrix_file, home.environment)
    cell = f"{environment}/{workload}/{parallelism}/*"
    if change.kind == "accuracy" and (change.size or 1) >= 1:
        return None  # an accuracy gain: nothing dropped to bisect for
    return ["bisect", matrix, "--cell", cell, "--package", package, "--old", before.stack[package],
            "--new", after.stack[package], *CRITERIA.get(change.kind, []), *(["--nightly"] if nightly else [])]


def command(args, console: Console) -> int:
    explain(Path(args.data), Path(args.evidence), Path(args.results), console, only=args.change,
            nightly=not args.no_nightly, again=args.again, out=Path(args.out))
    return 0


def explain(data: Path, evidence: Path, results: Path, console: Console, *, only: list[str] | None = None,
            nightly: bool = True, again: bool = False, out: Path = Path(OUT)) -> int:
    """Explain the changes of the atlas data (`only` these ids) that have no evidence yet (`again`:
    all of them); returns how many were explained."""
    recs, _ = records.read(data)
    table = rows.build(recs)
    by_key = {r.key: r for r in table}
    wanted = [c for c in changes.find(table) if c.kind in EXPLAINED and (not only or c.id in only)]
    if only and not wanted:
        raise UserError(f"--change {' '.join(only)}: no change the atlas explains has that id "
                        f"(they are in {data.parent / 'changes.json'})")
    evidence.mkdir(parents=True, exist_ok=True)
    explained = 0
    for group in changes.grouped(wanted):
        change = group[0]
        targets = [evidence / f"{c.id}.json" for c in group]
        if all(t.exists() for t in targets) and not again:
            continue
        argv = plan(change, by_key, nightly=nightly)
        if argv is None:
            continue
        said = command_line(argv)
        console.print(shown(f"{change.kind} {change.where['column']} at {change.after}: {said}"), highlight=False)
        kept = _run(argv, by_key[change.after], change, results, out)
        if argv[0] == "bisect" and kept is not None and _an_end_not_installed(kept):
            other = plan(change, by_key, nightly=nightly, side="before")
            if other is not None and other != argv:
                argv, said = other, command_line(other)
                console.print(shown(f"  an end does not install in the after-row's environment; in the "
                                    f"before-row's: {said}"), highlight=False)
                kept = _run(argv, by_key[change.before or ""], change, results, out)
        if kept is None:  # it could not answer (said above); no evidence, the next explain tries again
            console.print(f"[red]no record[/] for {shown(change.id)}", highlight=False)
            continue
        for c, target in zip(group, targets, strict=True):  # one event in several columns: one run, each told
            target.write_text(json.dumps({**kept, "command": said, "change": changes.to_dict(c)}, indent=1,
                                         sort_keys=True, default=str) + "\n")
        explained += 1
    console.print(f"atlas explain: {explained} change(s) explained; evidence under {evidence}", highlight=False)
    return explained


def _run(argv: list[str], home: rows.Row, change: changes.Change, results: Path, out: Path) -> dict | None:
    """Run the plan in the results folder of the matrix that measured the column on `home`."""
    entry = home.entries.get(change.where["column"])
    matrix = entry.matrix if entry else home.matrix
    return (_diverge if argv[0] == "diverge" else _bisect)(argv, results, out, matrix)


def _an_end_not_installed(kept: dict) -> bool:
    """A bisect whose end could not be judged because it did not install there (`unavailable`:
    no wheel for that Python, say) -- a fact of the environment, not of the release."""
    versions = kept.get("versions") or []
    tested = [(kept.get("tested") or {}).get(v) or {} for v in versions[:1] + versions[-1:]]
    return any(t.get("verdict") == "skip" and str(t.get("why") or "").startswith(status.UNAVAILABLE) for t in tested)


def command_line(argv: list[str]) -> str:
    """The harness command a reader runs again, as a shell reads it back (a cell glob quoted)."""
    return "python -m harness " + shlex.join(argv)


def _calling(argv: list[str]) -> tuple[str, str, dict]:
    """The API call a plan's command line names (`plan` makes them, in two shapes only): the verb,
    the matrix, and the keyword arguments -- so the evidence keeps the command a reader runs
    again, and this process runs the same thing without starting the command line."""
    verb, matrix, rest = argv[0], argv[1], argv[2:]
    if verb == "diverge":
        return verb, matrix, {"cell_a": rest[0], "cell_b": rest[1]}
    flags = {"--cell": "cells", "--package": "package", "--old": "old", "--new": "new",
             "--speed-drop": "speed_drop", "--accuracy-drop": "accuracy_drop"}
    kwargs: dict = {"nightly": "auto" if "--nightly" in rest else None}
    pairs = [a for a in rest if a != "--nightly"]
    for flag, value in zip(pairs[::2], pairs[1::2], strict=True):
        name = flags[flag]
        kwargs[name] = [value] if name == "cells" else float(value) if name.endswith("_drop") else value
    return verb, matrix, kwargs


def _harness(argv: list[str], results: Path, out: Path):
    """A bisect or a comparison through the API, within the atlas's disk bound: it installs from a
    uv cache of its own (`UV`), and the virtualenvs built from it are removed with it once it is
    done -- a bisect builds one environment per release it tests, and a dozen explained changes
    would otherwise keep tens of GB. What it measured is in its results; a removed environment is
    built again when something needs it. None when it could not answer (an input it refused, a
    side it could not measure): said, and no evidence."""
    from harness import api  # deferred: the API loads the runner when it runs

    verb, matrix, kwargs = _calling(argv)
    console = Console(soft_wrap=True)
    try:
        with removal.own_cache(cache_dir() / UV):
            m = api.load_matrix(matrix, results=results)
            if verb == "diverge":
                return api.diverge(m, **kwargs, results=results, out=out / "diverge", engine="venv", console=console)
            return api.bisect(m, **kwargs, results=results, out=out / "bundles", engine="venv", console=console)
    except api.UserError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {shown(str(exc), lines=True)}",
                                                   highlight=False)
        return None


def _bisect(argv: list[str], results: Path, out: Path, matrix: str) -> dict | None:
    """Run the bisect (its bundle under OUT/bundles, never among results) and keep its record: an
    answer (exit 0) or none (1: the ends do not differ, which is evidence too)."""
    done = _harness(argv, results, out)
    if done is None:
        return None
    data = json.loads(done.record.read_text())
    return {"exit": done.exit_code, **{k: data.get(k) for k in KEPT}}


def _diverge(argv: list[str], results: Path, out: Path, matrix: str) -> dict | None:
    """Run the comparison (its sides and page under OUT/diverge) and keep its verdicts; a side it
    could not measure is no record."""
    done = _harness(argv, results, out)
    if done is None:
        return None
    found, _ = done
    return {"exit": exits.CHANGED if found.get("diverges") else exits.OK, "kind": "diverge",
            "diverges": found.get("diverges"),
            "summary": found.get("summary"), "stacks": found.get("stacks"),
            "first": {part: (found.get(part) or {}).get("first") for part in ("forward", "backward", "training")},
            "configurations": (found.get("configurations") or {}).get("differences"),
            "notes": [note for part in ("randomness", "training") for note in (found.get(part) or {}).get("notes", [])]}


def attach(found: list[changes.Change], evidence: Path, link_prefix: str) -> None:
    """Each change's evidence, when `explain` left one: its answer in words and a link."""
    for change in found:
        path = evidence / f"{change.id}.json"
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        entry = {"what": _answer(data), "link": f"{link_prefix}/{path.name}"}
        change.evidence.append(entry)
        if change.where.get("confirmed") is not None:  # a speed shift: the bisect ran both ends side by side, and
            # found the newer end the worse (broke) for a slow-down, the older (mended) for a speed-up
            confirmed = not data.get("problem") and data.get("direction") == SPEED_DIRECTION.get(change.kind)
            change.where["confirmed"] = confirmed
            pair = changes.side_by_side(data)
            if not confirmed and pair and changes.past_threshold(change.kind, pair[0], pair[3]):
                # the bisect called the ends alike (their ranges overlapped), while its own medians, run
                # side by side, moved as the rows claim past its threshold: not a refutation
                ratio, old, new, drop = pair
                entry["standing"] = changes.UNRESOLVED
                entry["what"] += (f"; side by side its medians moved x{ratio:.2f} ({old:,.0f} -> {new:,.0f} "
                                  f"samples/s), past its {drop:.0%} threshold, while its ranges overlapped: "
                                  "unresolved, neither confirmed nor refuted")
                continue
            got = data.get("direction")
            if not confirmed and not data.get("problem") and got in changes.OTHER_WAY:
                # refuted, and more: side by side, the releases part the other way; the verdict says
                # which, so it never reads as the rows' direction with a strike through it
                first = data.get("first_good") if got == "mended" else data.get("first_bad")
                change.detail += f"; {changes.OTHER_WAY_SAID}: {changes.OTHER_WAY[got]}" + (
                    f" from {data.get('package')} {first}" if first else "")


def _nights_ran(night: dict) -> str:
    """What the search of the nights ran and found, from its record only: the build at the end that
    did not behave as its release did, with its upload day (the record's words before ' -- ',
    never the guess after them about where else the change could have come from)."""
    found = night["problem"].split(" -- ")[0]
    build = next((b for b in night.get("window") or [] if f" {b} " in f" {found} "), None)
    day = (night.get("uploaded") or {}).get(build, "")[:10] if build else ""
    if build and day:
        found = found.replace(build, f"{night.get('nightly') or 'nightly'} {build} (uploaded {day})", 1)
    return found[:200]


def _answer(data: dict) -> str:
    if data.get("kind") == "diverge":
        if data.get("diverges"):
            return f"diverge: the two-device model parts from the one-device one: {(data.get('summary') or '')[:200]}"
        # diverge gives both sides the same weights and the same data in order, dropout at zero
        return ("diverge: from the same weights, the data in order and dropout at zero, the two-device model "
                "trains as the one-device one, within the floor at every layer and epoch -- the seed's gap "
                "comes from its random draws (initial weights, dropout masks, batch order), not from the "
                "wrapper's arithmetic")
    package = data.get("package") or "?"
    if data.get("problem"):
        return f"bisect of {package}: no answer ({data['problem'][:120]})"
    night = data.get("nightly") or {}
    words = {"first_bad": "first bad", "first_good": "first good"}
    for key, word in words.items():
        if data.get(key):
            text = f"bisect: {word} {package} {data[key]}"
            if isinstance(night, dict):
                found_night = night.get("first_bad") or night.get("first_good")
                if found_night:
                    text += f", night {found_night}"
                elif night.get("problem"):  # said, not hidden: why the nights do not narrow it
                    text += f"; its nights: {_nights_ran(night)}"
            return text
    return f"bisect of {package}: {data.get('direction') or 'no change found'}"
