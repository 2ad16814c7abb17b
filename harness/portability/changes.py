"""Where the grid changes along a line of releases: the first reader release that stops (or
starts) loading a writer's files the same, and the first writer release whose files a reader
stops (or starts) loading.

A line is one family of stacks (`table.line`: standalone Keras 2.2, tf.keras, tf-keras, Keras 3
on one backend), in release order. Along the readers of a line, for one writer's file (model and
format), a change is two neighbouring readers that judge it differently; along the writers of a
line, for one reader, two neighbouring writers whose files it judges differently -- never the
newer stack's files on itself, which only says that a stack reads its own. Changes with the
same two neighbours and the same two verdicts are one change, listing the files it covers. The
grid's resolution is its stacks: a change between two minors is narrowed to the patch release by
`harness bisect` on the stack's package (each change says between which two stacks it lies)."""

from __future__ import annotations

from collections import defaultdict

from harness.claims import Change
from harness.portability.table import line

READER, WRITER = "reader", "writer"   # which end of the pair moved along its line


# A change of the grid is a `claims.Change` whose kind is the end that moved (READER: the reader
# release changed; WRITER: the writer release changed), `before` and `after` the stacks on either
# side of it (neighbours in its line), `where` its `line` and the verdict before it (`was`) and
# after it (`now`), and its `evidence` the files it covers, as (other end, model, format).


def change_id(moved: str, before: str, after: str, was: str, now: str) -> str:
    """Readable and stable: 'reader:tf2.13->tf2.14:same->refuses' (`portability bisect --change` takes it)."""
    return f"{moved}:{before}->{after}:{was}->{now}"


def along(moved: str, name: str, before: str, after: str, was: str, now: str) -> Change:
    """The grid's change on the line `name`, between its neighbours `before` and `after`; no file yet."""
    return Change(moved, before, after, id=change_id(moved, before, after, was, now),
                  where={"line": name, "was": was, "now": now})


def as_dict(change: Change) -> dict:
    """The change as changes.json and the narrowing's evidence hold it."""
    where = change.where
    return {"id": change.id, "moved": change.kind, "line": where["line"], "before": change.before,
            "after": change.after, "was": where["was"], "now": where["now"],
            "files": [{"other": o, "model": m, "format": f} for o, m, f in change.evidence]}


def sentence(change: Change) -> str:
    """The line the grid's page says of it."""
    others = sorted({o for o, _, _ in change.evidence})
    kinds = sorted({f"{m} {f}" for _, m, f in change.evidence})
    was, now = change.where["was"], change.where["now"]
    if change.kind == READER:
        return (f"reading on `{change.after}` (after `{change.before}`): {was} -> {now}, for files of "
                f"{_listed(others)} ({_listed(kinds)})")
    return (f"files written by `{change.after}` (after `{change.before}`): {was} -> {now} on "
            f"{_listed(others)} ({_listed(kinds)})")


def _listed(items: list[str], most: int = 6) -> str:
    shown = ", ".join(f"`{i}`" if " " not in i else i for i in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def lines_of(names: list[str], stacks: dict[str, dict]) -> dict[str, list[str]]:
    """line -> its stacks, in the order given (the page's: oldest first)."""
    out: dict[str, list[str]] = defaultdict(list)
    for name in names:
        out[line(stacks[name])].append(name)
    return dict(out)


def find(records: list[dict], names: list[str], stacks: dict[str, dict]) -> list[Change]:
    """Every change along every line, readers' then writers', in the lines' order."""
    verdict = {(r["writer"], r["reader"], r["model"], r["format"]): r["verdict"] for r in records}
    files = sorted({(r["model"], r["format"]) for r in records})
    found: dict[str, Change] = {}
    for name, members in lines_of(names, stacks).items():
        for before, after in zip(members, members[1:], strict=False):   # neighbours
            for other in names:
                if other == after:   # the newer stack's own files on itself: a stack reads its own files
                    continue
                for model, fmt in files:
                    _note(found, READER, name, before, after, other, model, fmt,
                          verdict.get((other, before, model, fmt)), verdict.get((other, after, model, fmt)))
                    _note(found, WRITER, name, before, after, other, model, fmt,
                          verdict.get((before, other, model, fmt)), verdict.get((after, other, model, fmt)))
    return list(found.values())


def _note(found: dict, moved: str, name: str, before: str, after: str, other: str, model: str, fmt: str,
          was: str | None, now: str | None) -> None:
    if was is None or now is None or was == now:
        return   # not read on both sides (not written, not read yet), or no change
    change = along(moved, name, before, after, was, now)
    found.setdefault(change.id, change).evidence.append((other, model, fmt))
