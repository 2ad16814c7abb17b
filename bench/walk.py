"""A cell's walk through the host side: which modules ("rooms") one real cell
enters on its way from `Runner.run` to its committed result, and how often the
walk climbs back up.

One cell -- a plain environment (this interpreter, no TensorFlow) running a
one-line script through the local engine, as `python -m harness run
--engine local` would -- runs under a profiler that sees every Python call in
every thread. Each call from one harness module into another is an edge of
the walk (the caller is the nearest harness frame, so a call through the
standard library or rich still counts as the harness module's own):

- a *room* is a harness module the walk enters;
- a *climb* is an edge whose callee sits higher in the import layering than
  its caller: the callee imports the caller (directly or not), so the call
  can only travel back up through a callback, a hook or an object handed down;
- a module is *entered from* each distinct module that calls it.

Distinct edges are counted, not calls: a loop calling `store` a hundred times
is one way into it; a generator expression resumed by the function it was
handed to is data, not a call. The in-environment side (harness/workloads) runs in the
cell's own process and is not part of this walk.

    python bench/walk.py            # the summary
    python bench/walk.py --edges    # and every edge, climbs marked
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_structure import import_graph  # noqa: E402 - the layering the structure tests hold

MATRIX = textwrap.dedent("""
    name: walk
    environments:
      - {{python: "{python}"}}
    workloads:
      - {{script: ./hello.py}}
    """)


def _reach(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """module -> every harness module it imports, directly or not."""
    out: dict[str, set[str]] = {}

    def visit(m: str) -> set[str]:
        if m not in out:
            out[m] = set()
            for t in graph.get(m, ()):
                out[m] |= {t} | visit(t)
        return out[m]

    for m in graph:
        visit(m)
    return out


class Tracer:
    """Edges between harness modules, from every thread's calls (sys.setprofile)."""

    def __init__(self):
        self.edges: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    @staticmethod
    def _module(frame) -> str | None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("harness.") and not name.startswith("harness.workloads"):
            return name
        return None

    def profile(self, frame, event, arg):
        if event != "call":
            return
        callee = self._module(frame)
        if callee is None or frame.f_code.co_name == "<genexpr>":
            return  # a generator expression resumed by its consumer is data handed over, not a call
        caller, up = None, frame.f_back
        while up is not None and caller is None:
            caller = self._module(up)
            up = up.f_back
        if caller and caller != callee:
            with self.lock:
                self.edges.add((caller, callee))

    def __enter__(self):
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)


def walk() -> dict:
    """Run the cell under the tracer; the walk's rooms, edges and climbs."""
    from rich.console import Console

    from harness.engines import select_engine
    from harness.matrix import load
    from harness.run.runner import Runner

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "hello.py").write_text("print('hello')\n")
        (folder / "m.yaml").write_text(MATRIX.format(python=python))
        m = load(folder / "m.yaml")
        console = Console(file=open(folder / "console.txt", "w"), soft_wrap=True)  # noqa: SIM115
        with select_engine("local", pythons={python: sys.executable}, console=console) as engine:
            runner = Runner(m, engine, folder / "results", console)
            with Tracer() as tracer:
                results = runner.complete(m.cells)
        console.file.close()
    statuses = sorted({r.status for r in results})
    reach = _reach(import_graph())
    climbs = sorted((a, b) for a, b in tracer.edges if a in reach.get(b, ()))
    rooms = sorted({b for _, b in tracer.edges} | {"harness.run.runner"})
    entered = {room: sorted(a for a, b in tracer.edges if b == room) for room in rooms}
    return {"statuses": statuses, "rooms": rooms, "edges": sorted(tracer.edges), "climbs": climbs,
            "entered_from": entered}


def main(argv: list[str]) -> int:
    got = walk()
    if got["statuses"] != ["ok"]:
        print(f"the cell did not run: {got['statuses']}", file=sys.stderr)
        return 1
    busiest = sorted(got["entered_from"].items(), key=lambda kv: -len(kv[1]))[:3]
    print(f"rooms: {len(got['rooms'])}, edges: {len(got['edges'])}, climbs: {len(got['climbs'])}")
    print("entered from most modules: " + ", ".join(f"{m.removeprefix('harness.')} ({len(c)})" for m, c in busiest))
    entered = got["entered_from"]["harness.results.store"]
    print("store entered from: " + ", ".join(m.removeprefix("harness.") for m in entered))
    for a, b in got["climbs"]:
        print(f"  climb: {a.removeprefix('harness.')} -> {b.removeprefix('harness.')}")
    if "--edges" in argv:
        for a, b in got["edges"]:
            print(f"  {a.removeprefix('harness.')} -> {b.removeprefix('harness.')}")
    if "--json" in argv:
        print(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
