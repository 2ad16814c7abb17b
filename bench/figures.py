"""Every figure a page states about a recorded run is quoted from its record, never typed.

    python bench/figures.py            # the audit: exit 1, each block that says what its records do not
    python bench/figures.py --write    # every block of every page made again from the records

A page quotes records through a block that this script writes and nobody edits:

    <!-- figures:NAME -->
    what NAME's generator made of the records
    <!-- /figures:NAME -->

Why: the same measurement typed on four pages drifts four ways (the suite's minutes, its disk, the
quick tier's time stood at three figures on two pages). A generator reads the records under
``bench/records/`` -- written by the bench scripts from real runs, never by hand -- and makes the
sentence or the table; the page holds what it made. The audit makes each block again and names,
with the page, the line and the records it rests on, every block whose text differs (a figure
typed over, or a record added since), every block no generator knows or left open, and every
figure of the suite's cost in its own unit (test-minutes) typed outside a block.

The generators are the bench scripts' own (`QUOTES`): each takes the records and gives the text and
the record files it read. Standard library only, as the scripts it quotes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

try:   # run as a script (bench/ on the path) or imported as bench.figures
    from bench import changes as change_bench
    from bench import suite_cost
except ImportError:
    import changes as change_bench
    import suite_cost

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"<!-- figures:([a-z0-9-]+) -->\n(?:(.*?)\n)?<!-- /figures:\1 -->", re.S)
_OPENED = re.compile(r"<!-- (/?)figures:([a-z0-9-]+) -->")
# the suite's cost in the unit this project coined for it: stated only through a block
_TYPED = re.compile(r"\d[\d.,]*\s*(?:-\s*\d[\d.,]*\s*)?test-min(?:ute)?s?\b")


@dataclass(frozen=True)
class Quote:
    """What a generator made: the text a block holds, and the record files it read."""
    text: str
    records: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    page: str
    line: int
    block: str     # the block's name ("" for a figure typed outside one)
    what: str      # one sentence, with the records it rests on

    def __str__(self) -> str:
        name = f" figures:{self.block}" if self.block else ""
        return f"{self.page}:{self.line}:{name} {self.what}"


def _suite(make: Callable[[list[dict]], str]) -> Callable[[dict], Quote]:
    """A generator of the suite's records; they are read once for every block (`read`)."""
    def quote(read: dict) -> Quote:
        if "suite" not in read:
            read["suite"] = suite_cost.load_records()
        records = read["suite"]
        return Quote(make(records), tuple(r["_file"] for r in records))
    return quote


WARM_RECORDS = ROOT / "bench" / "records" / "warm"
_STACK_ROW = re.compile(r"^\| (?P<stack>[^(|][^|]*?) \| (?P<wall>[\d.]+ \[[\d.-]+\]) \| [^|]* \| [^|]* \| "
                        r"(?P<steady>[\d.]+ \[[\d.-]+\]) \| (?P<fresh>[\d.]+%) \| (?P<warm>[\d.]+%) \| "
                        r"(?P<within>[^|]+?) \|$", re.M)
_RUN_ROW = re.compile(r"^run  warm-\d+: .*?: (?P<bound>[\d.]+)x the bound", re.M)


def warm_gpu(read: dict) -> Quote:
    """seed 000's one-GPU cells, warm against fresh, as the newest record of
    ``bench/device/warm-gpu.sh standby-on`` (``ONLY='*/none-g1/*'``) left them: the bench's JSON
    record (``bench/warm.py --record``) or, for a run recorded before it wrote one, its printed
    table row and run lines -- the verdict it gave, never a figure typed over it."""
    found = sorted(WARM_RECORDS.glob("*-h200/none-g1-standby-on.*"), key=lambda p: (p.parent.name, p.suffix == ".json"))
    found = [p for p in found if p.suffix in (".json", ".txt")]
    if not found:
        return Quote("No run of seed 000's one-GPU cells, warm against fresh, is recorded yet.", ())
    path = found[-1]
    if path.suffix == ".json":
        return _warm_gpu_record(path)
    text = path.read_text()
    row = _STACK_ROW.search(text)
    bounds = [float(b) for b in _RUN_ROW.findall(text)]
    rel = str(path.relative_to(ROOT))
    if row is None:
        return Quote(f"The newest record ({rel}) holds no table this page can quote.", (rel,))
    rounds = re.search(r"(\d+) round\(s\) of fresh then warm", text)
    cells = len(re.findall(r"^\| \S+/none-g1/\S+ \| ok \|", text, re.M))
    said = (f"seed 000's {cells} one-GPU cells on 1 x H200 ({row['stack']}; `bench/device/warm-gpu.sh standby-on`, "
            f"{rounds.group(1) if rounds else '?'} rounds, {path.parent.name[:10]}): the stack's wall warm/fresh "
            f"**{row['wall']}**, steady samples/s warm/fresh **{row['steady']}** against run-to-run spreads of "
            f"{row['fresh']} (fresh) and {row['warm']} (warm): within the spread: {row['within'].strip()}")
    if bounds:
        said += f"; warm runs {min(bounds):.2f}-{max(bounds):.2f} x their steady-work bound"
    return Quote(said + f" ([the record]({rel})).", (rel,))


def warm_gpu_rounds(read: dict) -> Quote:
    """seed 000's one-GPU cells of some batch sizes, warm against fresh over more rounds than the
    whole set fits in one call: the newest ``bench/warm.py --record`` of them
    (``*-h200/none-g1-b*-standby-on.json``), quoted as `warm_gpu` quotes its record."""
    found = sorted(WARM_RECORDS.glob("*-h200/none-g1-b*-standby-on.json"), key=lambda p: (p.parent.name, p.name))
    if not found:
        return Quote("No run of some of seed 000's one-GPU cells over more rounds is recorded yet.", ())
    command = json.loads(found[-1].read_text()).get("command", [])
    how = "`" + " ".join(c if " " not in c and "*" not in c else f"'{c}'" for c in command) + "`"
    return _warm_gpu_record(found[-1], how=how, link=False)


def _warm_gpu_record(path: Path, how: str = "`bench/device/warm-gpu.sh standby-on`", link: bool = True) -> Quote:
    """`warm_gpu` from a ``harness-bench-warm/1`` record: its first matrix and arm, its stack;
    `how` it was run, and whether the page `link`s the record (the README) or names it (docs/)."""
    rel = str(path.relative_to(ROOT))
    try:
        record = json.loads(path.read_text())
        measured, arm, stack = _bench_warm_stack(record)
    except (OSError, ValueError, KeyError, IndexError, StopIteration, TypeError):
        return Quote(f"The newest record ({rel}) holds no measurement this page can quote.", (rel,))
    said = stack["said"]
    cells = sum(1 for c, status in arm["cells"].items() if "/none-g1/" in c and status == "ok")
    bounds = [r["of_bound"] for r in arm["runs"] if re.fullmatch(r"warm-\d+", r["run"]) and r["of_bound"]]
    batches = sorted({c.split("/")[-2] for c in arm["cells"]}, key=lambda b: int(b[1:]) if b[1:].isdigit() else 0)
    text = (f"seed 000's {cells} one-GPU cells ({', '.join(batches)}) on 1 x H200 ({stack['stack']}; {how}, "
            f"{measured['rounds']} rounds, {record['recorded_at'][:10]}): the stack's wall warm/fresh "
            f"**{said['wall']}**, steady samples/s warm/fresh **{said['steady']}** against run-to-run spreads of "
            f"{said['spread_fresh']} (fresh) and {said['spread_warm']} (warm): within the spread: "
            f"{stack['within_words']}")
    if bounds:
        text += f"; warm runs {min(bounds):.2f}-{max(bounds):.2f} x their steady-work bound"
    return Quote(text + (f" ([the record]({rel}))." if link else f" (the record: `{rel}`)."), (rel,))


def _newest(found: list[Path], missing: str) -> tuple[str, dict] | Quote:
    """The newest of `found` records (the last, as sorted by the caller), read: its path as the page
    names it and its JSON; or the Quote a page holds without one (`missing`), or for a record it
    cannot read."""
    if not found:
        return Quote(missing, ())
    rel = str(found[-1].relative_to(ROOT))
    try:
        return rel, json.loads(found[-1].read_text())
    except (OSError, ValueError):
        return Quote(f"The newest record ({rel}) holds no measurement this page can quote.", (rel,))


def _bench_warm_stack(record: dict) -> tuple[dict, dict, dict]:
    """A ``harness-bench-warm/1`` record's first matrix, its first arm and that arm's one stack
    (a KeyError, IndexError or ValueError where the record holds other than that)."""
    measured = record["matrices"][0]
    arm = next(iter(measured["arms"].values()))
    [stack] = arm["stacks"]
    return measured, arm, stack


def _mmm(values: list[float]) -> str:
    """median [min-max], as bench/warm.py's tables print a ratio over the rounds."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def warm_cpu_smoke(read: dict) -> Quote:
    """The smoke matrix warm against fresh on a CPU machine, on the venv engine and in Docker
    interleaved in one invocation (``bench/warm.py matrices/smoke.yaml --engine venv,docker
    --record``): each engine's run wall warm/fresh, its stacks within their spread, and a warm
    Docker cell's fixed cost against a warm venv cell's -- from the newest such record."""
    return _warm_cpu_engines("smoke-venv-docker.json", "the smoke matrix")


def warm_cpu_wrappers(read: dict) -> Quote:
    """The wrappers matrix's GRU cells (every wrapper and feed on its stacks), the same way
    (``bench/warm.py matrices/wrappers-cpu.yaml --engine venv,docker --only '*/gru-*' --record``):
    where launchers serve, as the smoke matrix's one cell per stack does not show."""
    return _warm_cpu_engines("wrappers-gru-venv-docker.json", "the wrappers matrix's GRU cells")


def _warm_cpu_engines(name: str, what: str) -> Quote:
    """One sentence from the newest ``*-cpu/NAME`` record of bench/warm.py run on both engines."""
    newest = _newest(sorted(WARM_RECORDS.glob(f"*-cpu/{name}")),
                     f"No run of {what}, warm against fresh, is recorded yet.")
    if isinstance(newest, Quote):
        return newest
    rel, record = newest
    try:
        [measured] = record["matrices"]
        venv, docker = measured["arms"]["venv"], measured["arms"]["docker"]
        engines = measured["engines"]["docker"]
        command = list(record["command"])
    except (ValueError, KeyError, TypeError):
        return Quote(f"The newest record ({rel}) holds no measurement this page can quote.", (rel,))

    def within(arm: dict) -> str:
        judged = [st for st in arm["stacks"] if st["within"] is not None]
        return f"{sum(1 for st in judged if st['within'])} of {len(judged)}"

    def bitwise(arm: dict) -> str:
        said = [v for v in arm.get("accuracy", {}).values() if v != "not comparable"]
        return f"{sum(1 for v in said if v == 'bitwise')} of {len(said)}"

    machine = record["machine"]
    only = [command[i + 1] for i, word in enumerate(command[:-1]) if word == "--only"]
    matrix = f"`{measured['matrix']}`"
    if only:   # a selection: how many cells, and which
        matrix = (f"{matrix}'s {len(venv['cells'])} cells of {len(venv['stacks'])} stacks ("
                  + ", ".join(f"`--only '{o}'`" for o in only) + ")")
    text = (f"{matrix} on {machine['cores']} cores ({machine['cpu']}), both engines interleaved, "
            f"{measured['rounds']} rounds ({record['recorded_at'][:10]}): warm/fresh wall venv "
            f"**{_mmm(venv['run_wall_warm_fresh'])}** ({venv['wall_words']}), Docker "
            f"**{_mmm(docker['run_wall_warm_fresh'])}** ({docker['wall_words']}); steady samples/s within the "
            f"run-to-run spread in {within(venv)} stacks (venv) and {within(docker)} (Docker); a warm Docker cell's "
            f"fixed cost against a warm venv cell's **{engines['said']['median']}** {engines['said']['range']} over "
            f"{engines['cells']} cells ({'met' if engines['met'] else 'NOT met'})"
            + (f"; validation accuracy warm and fresh bit for bit the same in {bitwise(venv)} cells (venv) and "
               f"{bitwise(docker)} (Docker)" if "accuracy" in venv and "accuracy" in docker else "")
            + f" ([the record]({rel})).")
    return Quote(text, (rel,))


CHANGE_RECORDS = ROOT / "bench" / "records" / "changes"


def change_detection(read: dict) -> Quote:
    """The change-point method's false alarms and power, as the newest ``bench/changes.py --record``
    left them: the bench's own table, row for row."""
    newest = _newest(sorted(CHANGE_RECORDS.glob("*.json")), "No run of `bench/changes.py` is recorded yet.")
    if isinstance(newest, Quote):
        return newest
    rel, record = newest
    try:
        rows = [change_bench.table_row(row) for row in record["rows"]]
        trials, seed = record["trials"], record["seed"]
    except (KeyError, TypeError):
        return Quote(f"The newest record ({rel}) holds no table this page can quote.", (rel,))
    head = ["repeat CV", "run-to-run CV", "false alarms"] + [f"power {e:.0%}" for e in change_bench.EFFECTS]
    lines = [f"`python bench/changes.py` ({trials} trials a cell, seed {seed}, alpha 0.05, min_effect 5 %; "
             f"{record['recorded_at'][:10]}, the record: `{rel}`):", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return Quote("\n".join(lines), (rel,))   # a page under docs/: named, not linked


_AB_ROW = re.compile(r"^\| (?P<stack>[^|]+?) \| (?P<ratio>[\d.]+ \[[\d.-]+\]) \| (?P<on>[\d.]+%) \| "
                     r"(?P<off>[\d.]+%) \| (?P<within>[^|]+?) \|$", re.M)
_AB_VERDICT = re.compile(r"^verdict: .*standby on against .*?, (?P<rounds>\d+) round\(s\)\): warm run wall on/off "
                         r"(?P<wall>[\d.]+ \[[\d.-]+\]); steady samples/s: (?P<word>[^(]+?) \(", re.M)


def warm_standby_ab(read: dict) -> Quote:
    """Standing by on against off on one GPU, the two arms interleaved round by round, as the
    newest folder of ``bench/device/warm-gpu.sh ab`` records left them: each record's A/B row and
    verdict, quoted (one sentence per record: a batch size each)."""
    folders = sorted({p.parent for p in WARM_RECORDS.glob("*-h200*/*-ab.txt")})
    if not folders:
        return Quote("No A/B of standing by on one GPU is recorded yet.", ())
    said, rels = [], []
    for path in sorted(folders[-1].glob("*-ab.txt")):
        text = path.read_text()
        rel = str(path.relative_to(ROOT))
        rels.append(rel)
        head = text.find("standing by on / off")
        row, verdict = _AB_ROW.search(text, head if head >= 0 else 0), _AB_VERDICT.search(text)
        if head < 0 or row is None or verdict is None:
            said.append(f"The A/B record {rel} holds no table this page can quote.")
            continue
        cells = sorted({m for m in re.findall(r"^\| (\S+/none-g1/\S+) \| ok \|", text, re.M)})
        batches = sorted({c.split("/")[-2] for c in cells})
        said.append(f"On 1 x H200 ({row['stack']}; {len(cells)} cells, {', '.join(batches)}; "
                    f"`bench/device/warm-gpu.sh ab`, {verdict['rounds']} rounds of both arms interleaved, "
                    f"{path.parent.name[:10]}): a warm run's steady samples/s with standing by on against off "
                    f"**{row['ratio']}** (per round, median [min-max]) against run-to-run spreads of {row['on']} "
                    f"(on) and {row['off']} (off): {verdict['word'].strip()}, within the spread: "
                    f"{row['within'].strip()}; the warm run's wall on/off {verdict['wall']} (the record: `{rel}`).")
    return Quote("\n\n".join(said), tuple(rels))   # a page under docs/: named, not linked


def warm_gpu_deterministic(read: dict) -> Quote:
    """Warm against fresh on one GPU with XLA's deterministic ops asked in every cell, as the newest
    record of ``bench/device/warm-gpu.sh deterministic`` left it: whether every run's accuracy, fresh
    and warm, was the same bit for bit (the record's per-cell ``accuracy``), and the wall and steady
    ratios it gave -- the question a GPU's autotuning leaves open on the other arms."""
    newest = _newest(sorted(WARM_RECORDS.glob("*-h200*/warm-deterministic.json"), key=lambda p: p.parent.name),
                     "No warm run with deterministic GPU ops is recorded yet.")
    if isinstance(newest, Quote):
        return newest
    rel, record = newest
    try:
        measured, arm, stack = _bench_warm_stack(record)
        accuracy = arm["accuracy"]
        setting = " ".join(f"{k}={v}" for k, v in measured["env_added"].items())
    except (ValueError, KeyError, IndexError, StopIteration, TypeError, AttributeError):
        return Quote(f"The newest record ({rel}) holds no measurement this page can quote.", (rel,))
    ok = [c for c, status in arm["cells"].items() if status == "ok"]
    bitwise = [c for c in ok if accuracy.get(c) == "bitwise"]
    batches = sorted({c.split("/")[-2] for c in ok})
    said = stack["said"]
    text = (f"On 1 x H200 ({stack['stack']}; {len(ok)} cells, {', '.join(batches)}; `{setting}` in every "
            f"environment; `bench/device/warm-gpu.sh deterministic`, {measured['rounds']} rounds, "
            f"{record['recorded_at'][:10]}): validation accuracy the same bit for bit in every fresh and warm "
            f"run of **{len(bitwise)} of {len(ok)}** cells; the stack's wall warm/fresh **{said['wall']}**, "
            f"steady samples/s warm/fresh **{said['steady']}** against run-to-run spreads of "
            f"{said['spread_fresh']} (fresh) and {said['spread_warm']} (warm): within the spread: "
            f"{stack['within_words']} (the record: `{rel}`).")
    return Quote(text, (rel,))


# Every block a page may hold, by name: its generator. A new measurement quoted on a page gets its
# generator here, beside the script that records it.
QUOTES: dict[str, Callable[[dict], Quote]] = {
    "suite-cost": _suite(suite_cost.table),
    "suite-promises": _suite(suite_cost.promise_table),
    "suite-door": _suite(suite_cost.door_sentence),
    "suite-tiers": _suite(suite_cost.tiers_table),
    "suite-machines": _suite(suite_cost.machines_sentence),
    "warm-gpu": warm_gpu,
    "warm-gpu-rounds": warm_gpu_rounds,
    "warm-cpu-smoke": warm_cpu_smoke,
    "warm-cpu-wrappers": warm_cpu_wrappers,
    "change-detection": change_detection,
    "warm-standby-ab": warm_standby_ab,
    "warm-gpu-deterministic": warm_gpu_deterministic,
}


def pages(root: Path = ROOT) -> list[Path]:
    """The pages a reader reads: the README, the docs, the examples' READMEs."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md")), *sorted((root / "examples").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _made(quotes: dict[str, Callable[[dict], Quote]]) -> dict[str, Quote]:
    """Every generator's text, the records read once between them."""
    read: dict = {}
    return {name: make(read) for name, make in quotes.items()}


def audit(root: Path = ROOT, quotes: dict[str, Callable[[dict], Quote]] | None = None) -> list[Finding]:
    """Every block of every page against what its generator makes now; every open or unknown
    block; every figure in test-minutes typed outside a block."""
    made = _made(QUOTES if quotes is None else quotes)
    found: list[Finding] = []
    for path in pages(root):
        text = path.read_text(encoding="utf-8")
        page = str(path.relative_to(root))
        spans = []
        for m in _BLOCK.finditer(text):
            name, held = m.group(1), m.group(2) or ""
            spans.append(m.span())
            line = _line(text, m.start())
            if name not in made:
                found.append(Finding(page, line, name, f"no generator makes this block (known: {', '.join(made)})"))
            elif held != made[name].text:
                found.append(Finding(page, line, name,
                                     "says what its records do not make now (records: "
                                     f"{', '.join(made[name].records) or 'none'}): `python bench/figures.py "
                                     "--write` makes it again; a figure is mended in its record, not here"))
        for m in _OPENED.finditer(text):   # a marker outside every whole block has no pair
            if not any(a <= m.start() < b for a, b in spans):
                found.append(Finding(page, _line(text, m.start()), m.group(2),
                                     "is opened or closed without its pair (a block is `<!-- figures:NAME -->`, "
                                     "its text, `<!-- /figures:NAME -->`, each marker on a line of its own)"))
        for m in _TYPED.finditer(text):
            if not any(a <= m.start() < b for a, b in spans):
                found.append(Finding(page, _line(text, m.start()), "",
                                     f"the suite's cost typed by hand ({m.group(0)!r}): quote its record through "
                                     "a figures block"))
    return sorted(found, key=lambda f: (f.page, f.line))


def write(root: Path = ROOT, quotes: dict[str, Callable[[dict], Quote]] | None = None) -> list[str]:
    """Every known block of every page made again; the pages changed."""
    made = _made(QUOTES if quotes is None else quotes)
    changed = []
    for path in pages(root):
        text = path.read_text(encoding="utf-8")

        def again(m: re.Match) -> str:
            name = m.group(1)
            if name not in made:
                return m.group(0)   # the audit names it; writing never guesses
            return f"<!-- figures:{name} -->\n{made[name].text}\n<!-- /figures:{name} -->"

        new = _BLOCK.sub(again, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="make every block again from the records")
    args = parser.parse_args(argv)
    if args.write:
        changed = write()
        print(f"wrote {len(changed)} page(s): {', '.join(changed)}" if changed else "every block already holds "
              "what its records make")
        return 0
    findings = audit()
    for f in findings:
        print(f)
    print(f"{len(findings)} finding(s) over {len(pages())} pages and {len(QUOTES)} generators")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
