"""A page per stack: what becomes of the files it wrote on every reader, and what it makes of
every writer's files -- the two questions a user of that one release asks ("I saved on 2.10:
where does it load?", "I am on 2.16: which of my old files load?"). Linked from the grid's page
and from each change in the feed."""

from __future__ import annotations

from harness.claims import Change
from harness.names import file_name
from harness.portability.changes import sentence
from harness.portability.table import MARK, NOT_RUN, html_tables

STACKS = "stacks"     # the stacks' pages' folder, beside portability.md
FORMATS = "formats"   # the formats' pages' folder (a table each)


def link(name: str) -> str:
    return f"{STACKS}/{file_name(name)}.md"


def format_link(fmt: str) -> str:
    return f"{FORMATS}/{file_name(fmt)}.md"


def format_page(fmt: str, names: list[str], records: list[dict], stacks: dict[str, dict]) -> str:
    """One format's table: every writer that wrote it down, every reader across, with the filters
    (model, verdict, the line of writers or readers) kept in the address."""
    models = sorted({r["model"] for r in records if r["format"] == fmt})
    lines = [f"# `{fmt}` files, saved on one stack and loaded on another", "",
             f"[The grid](../portability.md), this format's table: writers down, readers across. A cell lists one "
             f"mark per model ({', '.join(models)}): `{MARK['same']}` loads and predicts the same, "
             f"`{MARK['differs']}` **loads but predicts differently**, `{MARK['refuses']}` refuses, "
             f"`{MARK['unknown']}` a format the reader cannot know; blank: not written by that stack; "
             f"`{NOT_RUN}`: not read yet. Each mark's title says what happened; the filters show one model, "
             f"verdict or line of writers or readers, and the address keeps the choice.", "",
             html_tables(records, names, stacks, [fmt]), ""]
    return "\n".join(lines) + "\n"


def stack_page(name: str, names: list[str], records: list[dict], stacks: dict[str, dict],
               found: list[Change]) -> str:
    models = sorted({r["model"] for r in records})
    formats = sorted({r["format"] for r in records})
    s = stacks[name]
    lines = [f"# `{name}`", "", ", ".join(f"{k} {v}" for k, v in sorted(s.items()) if v), "",
             f"Marks per model ({', '.join(models)}), as on [the grid](../portability.md): "
             f"`{MARK['same']}` same, `{MARK['differs']}` **loads but predicts differently**, `{MARK['refuses']}` "
             f"refuses, `{MARK['unknown']}` cannot know the format.", ""]
    for title, mine, other in ((f"Files written by `{name}`, on each reader", "writer", "reader"),
                               (f"Every writer's files, read by `{name}`", "reader", "writer")):
        lines += [f"## {title}", "", f"| {other} | " + " | ".join(formats) + " |", "|---|" + "---|" * len(formats)]
        by = {(r[other], r["model"], r["format"]): r["verdict"] for r in records if r[mine] == name}
        for o in names:
            row = ["".join(MARK[by[(o, m, f)]] if (o, m, f) in by else " " for m in models).strip() for f in formats]
            if any(row):
                lines.append(f"| [`{o}`]({file_name(o)}.md) | " + " | ".join(f"`{c}`" if c else "" for c in row) + " |")
        lines.append("")
    lines += ["## Changes at this release", ""]
    lines += [f"- as {c.kind}: {sentence(c)}" for c in found if c.after == name] or ["None along its line."]
    return "\n".join(lines) + "\n"
