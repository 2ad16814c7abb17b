"""bench/warm.py's record: what its tables say, as JSON a page can quote (``--record``). A real
invocation on the local engine (this interpreter, user scripts that sleep): the record names the
machine, the command, every cell with its status, each run against its bound, and per stack the
ratios per round with their spreads and the verdict the tables printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.quick


def test_the_record_holds_what_the_tables_say(tmp_path):
    (tmp_path / "nap.py").write_text("import time\ntime.sleep(0.2)\n")
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "m.yaml").write_text(f'name: naps\nenvironments: [{{python: "{this}"}}]\n'
                                     "workloads:\n  - {name: a, script: nap.py}\n  - {name: b, script: nap.py}\n"
                                     "repeats: 2\ntimeouts: {wall: 120, progress: 60}\n")
    record = tmp_path / "out" / "warm.json"
    proc = subprocess.run([sys.executable, "bench/warm.py", str(tmp_path / "m.yaml"), "--engine", "local",
                           "--python", f"{this}={sys.executable}", "--rounds", "2", "--record", str(record)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(record.read_text())
    assert data["schema"] == "harness-bench-warm/1" and data["machine"]["cpu"] and data["command"][1] == "bench/warm.py"
    [measured] = data["matrices"]
    [arm] = measured["arms"].values()
    assert measured["rounds"] == 2 and arm["engine"] == "local" and arm["standby"] == "on"
    assert len(arm["cells"]) == 4 and set(arm["cells"].values()) == {"ok"}, arm["cells"]
    assert [r["run"] for r in arm["runs"]] == ["warm-up", "fresh-1", "warm-1", "fresh-2", "warm-2"]
    [stack] = arm["stacks"]
    assert len(stack["wall_warm_fresh"]) == 2 and stack["said"]["wall"] in proc.stdout
    assert arm["verdict"] in proc.stdout and measured["verdicts"] == [arm["verdict"]]
