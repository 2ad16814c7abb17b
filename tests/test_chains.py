"""Chains (`needs:`), run for real on this interpreter with the local engine: a consumer gets its
producers' files read-only; a producer that did not end ok leaves its consumer `unavailable`, with
the reason -- unless the need is `optional: true`, when the consumer runs with what the others
handed over and its record says which producer handed nothing, and why."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.results.store import iter_results

from .conftest import harness

pytestmark = pytest.mark.quick

SCRIPT = '''\
import os
import sys

if sys.argv[1] == "write":
    with open(os.path.join(os.environ["HARNESS_OUTPUT"], "model.txt"), "w") as f:
        f.write("weights")
elif sys.argv[1] == "fail":
    sys.exit("this writer fails")
else:  # read: the producers' folders that hold files (inputs/<as>/, beside each other)
    root = os.path.dirname(os.environ["HARNESS_INPUT_GOOD"])
    found = sorted(name for name in os.listdir(root)
                   if os.path.isdir(os.path.join(root, name)) and os.listdir(os.path.join(root, name)))
    sys.exit(0 if found == sys.argv[2:] else "found %r" % found)
'''


def test_an_optional_need_whose_producer_failed_hands_nothing_and_the_consumer_runs(tmp_path):
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "chain.py").write_text(SCRIPT)
    (tmp_path / "m.yaml").write_text(textwrap.dedent(f"""\
        name: chain
        environments: [{{python: "{python}"}}]
        workloads:
          - {{name: good, script: s/chain.py, args: [write]}}
          - {{name: bad, script: s/chain.py, args: [fail]}}
          - {{name: reader, script: s/chain.py, args: [read, good],
             needs: [good, {{workload: bad, optional: true}}]}}
          - {{name: strict, script: s/chain.py, args: [read, good], needs: [good, bad]}}
        """))
    proc = harness("run", str(tmp_path / "m.yaml"), "--engine", "local", "--python", f"{python}={sys.executable}",
                   "--results", str(tmp_path / "r"), timeout=600)
    results = {r["workload"]: r for _, r in iter_results(tmp_path / "r" / "chain")}
    assert {w: r["status"] for w, r in results.items()} == \
        {"good": "ok", "bad": "error", "reader": "ok", "strict": "unavailable"}, proc.stdout[-3000:]
    handed = {n["as"]: n for n in results["reader"]["needs"]}
    assert handed["good"]["files"] == 1 and "missing" not in handed["good"]
    assert handed["bad"]["files"] is None and handed["bad"]["status"] == "error"
    assert handed["bad"]["missing"].startswith(f"needs {results['bad']['cell']}, which ended error")
    assert results["strict"]["reason"].startswith(f"needs {results['bad']['cell']}, which ended error")


def test_optional_is_a_yes_or_no(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "chain.py").write_text(SCRIPT)
    (tmp_path / "m.yaml").write_text(textwrap.dedent("""\
        name: chain
        environments: [{python: "3.11"}]
        workloads:
          - {name: good, script: s/chain.py, args: [write]}
          - {name: reader, script: s/chain.py, args: [read], needs: {workload: good, optional: maybe}}
        """))
    proc = harness("list", str(tmp_path / "m.yaml"), timeout=60)
    assert proc.returncode == 2 and "workloads[1].needs.optional" in proc.stderr, proc.stderr
