"""What a reduction tells, from its record: the versions each side ran (`stack_of`) and the other
pins that moved with them (`also_changed`), the draft for the upstream tracker (`issue`, written as
ISSUE.md) and the summary in the terminal (`show`). Kept apart from the driver that runs the
candidates (``reduce``): nothing here runs a cell.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.results.result import Result


def also_changed(stacks: dict, folder: Path) -> dict:
    """Every other package whose exact pin differs between the two bundles' locks, per side: what
    else moved with the release (jaxlib following jax; an environment resolved as of a later day)."""
    locks = {side: _pins(folder / side / "environment" / "requirements.lock") for side in ("good", "bad")}
    names = [n for n in sorted(set(locks["good"]) | set(locks["bad"])) if locks["good"].get(n) != locks["bad"].get(n)
             and n not in stacks["good"] and n not in stacks["bad"]]
    return {side: {n: locks[side].get(n, "-") for n in names} for side in locks}


def _pin(line: str) -> tuple[str, str] | None:
    """(name, version) of a `name==version` line (a comment, a marker, a continuation left out)."""
    name, sep, version = line.split("#")[0].split(";")[0].partition("==")
    if not sep or not name.strip() or name.strip().startswith("-"):
        return None
    return name.strip(), version.strip().rstrip("\\").strip()


def _pins(lock: Path) -> dict[str, str]:
    """The pins of a pip lock, by lower-case name (none where the engine keeps no lock)."""
    try:
        text = lock.read_text()
    except OSError:
        return {}
    return {pin[0].lower(): pin[1] for pin in map(_pin, text.splitlines()) if pin}


def stack_of(result: Result) -> dict:
    """The versions one side ran: what the cell saw of its stack, then the environment's pins."""
    seen = result.seen or {}
    keep = ("python", "tensorflow", "keras", "jax", "torch", "numpy") + (("backend",) if seen.get("api") == "keras3"
                                                                          else ())
    out = {k: seen.get(k) for k in keep if seen.get(k)}
    for package, _range, version in result.releases:
        out.setdefault(str(package), str(version))
    for req in (result.provenance or {}).get("requirements") or []:
        pin = _pin(str(req)) if ";" not in str(req) else None  # a pin for some platforms only: not this one's
        if pin:
            out.setdefault(*pin)
    return out


REPORT_IMPORT = "from workloads.metrics import report"
REPORT_SHIM = "def report(name, value):  # the value the two versions disagree on\n    print(name, value)"


def issue(record: dict, reduced: str) -> str:
    """A draft for the upstream tracker: what TensorFlow's and Keras's templates ask for first.
    A value the script reported to the harness is printed instead, so the code needs no harness."""
    reduced = reduced.replace(REPORT_IMPORT, REPORT_SHIM)
    values = record.get("values") or []
    expected = ([f"- expected (as with the first versions): {v['metric']} = {v['good']!r} (the matrix expects "
                 f"{v['expected']!r})" for v in values] + [f"- actual: {v['metric']} = {v['bad']!r}" for v in values]
                if values else
                [f"- expected (as with the first versions): it runs to the end ({record['good_status']})",
                 f"- actual: {record['signature']}"])
    good, bad = record["stacks"]["good"], record["stacks"]["bad"]
    changed = sorted(k for k in set(good) | set(bad) if good.get(k) != bad.get(k))
    title = ", ".join(f"{k} {good.get(k)} -> {bad.get(k)}" for k in changed) or "a change between two environments"
    versions = ["| package | works | fails |", "|---|---|---|"] + [
        f"| {k} | {good.get(k, '-')} | {bad.get(k, '-')} |" for k in sorted(set(good) | set(bad))]
    also = record.get("also_changed") or {}
    if also.get("good"):
        versions += ["", "Also different between the two environments:", "",
                     "| package | works | fails |", "|---|---|---|"] + [
            f"| {k} | {also['good'][k]} | {also['bad'][k]} |" for k in sorted(also["good"])]
    resolved = record.get("resolved")
    if resolved:  # what each side's record says, never what its matrix asked (Result.resolution)
        versions += ["", f"The packages no pin fixed were resolved, for the first versions, {resolved['good']}; "
                         f"for the second, {resolved['bad']}."]
    needs = record["needs"]
    return "\n".join([
        f"# {record.get('what') or record['family'].split(':')[0]} after upgrading: {title}", "",
        "## Describe the problem", "",
        f"This script works with the first set of versions below and fails with the second: "
        f"**{record['signature']}**.", "",
        "## Versions", "", *versions, "",
        "## Standalone code to reproduce", "",
        "```python", reduced.rstrip(), "```", "",
        *(["It reads these files of the original project, not included here: " + ", ".join(needs), ""]
          if needs else []),
        "## Expected and actual", "", *expected, "",
        "## How this was found", "",
        f"The original script ({_lines(record['lines']['original'])}) was reduced to "
        f"{_lines(record['lines']['reduced'])} "
        f"while both sides held: it still fails in the same way with the second versions and still passes with the "
        f"first ({record['candidates']['tried']} candidates tried, {record['candidates']['kept']} kept). "
        "`good/run.sh` and `bad/run.sh` beside this file rebuild each environment from exact pins and run it.", ""])


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def show(record: dict, console: Console) -> None:
    c = record["candidates"]
    console.rule("reduced")
    console.print(f"{record['script']}: {record['lines']['original']} -> [bold]{record['lines']['reduced']}[/] lines; "
                  f"still {record['family']} on {record['bad']}, still ok on {record['good']}", highlight=False)
    rate = c["tried"] / max(record["candidate_seconds"], 1e-9)
    console.print(f"{c['tried']} candidates tried, {c['kept']} kept, in {record['candidate_seconds']:.0f} s "
                  f"({rate:.2f} candidates/s; {c['forked_cell_runs']} of {c['cell_runs']} cell runs forked warm); "
                  "rejected: "
                  + (", ".join(f"{why} {n}" for why, n in sorted(c["rejected"].items())) or "none"), highlight=False)
    if c.get("given_back"):
        console.print(f"[yellow]note[/]: the {c['given_back']} last kept candidate(s) held only by chance (not when "
                      "run fresh); the answer is the last that held fresh", highlight=False)
    if record["needs"]:
        console.print("[yellow]note[/]: it still needs these files of the code folder: " + ", ".join(record["needs"]),
                      highlight=False)
    console.print(f"written: {record['folder']} (reduced/, good/run.sh, bad/run.sh, ISSUE.md; "
                  f"{record['seconds']:.0f} s)", highlight=False)
