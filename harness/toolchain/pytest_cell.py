"""The cell of a search that ``nox -s tests-latest`` starts: run the named tests of the source
copied beside this file, with the packages of the cell's environment. Passing tests end the
cell ok; a failure ends it with an error naming the first failing test and what it raised,
which is what ``bisect`` compares and the bundle keeps.

Copied into the staged source as ``_harness_pytest_cell.py`` (``harness.toolchain.latest``):
it runs there, in the environment under test, and imports nothing of the host's."""

import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


class Failures:
    """pytest hooks: each failing test's id and the line its error ends with."""

    def __init__(self):
        self.seen = []

    def pytest_runtest_logreport(self, report):
        if report.failed:
            crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
            self.seen.append((report.nodeid, getattr(crash, "message", "").splitlines()[:1]))

    pytest_collectreport = pytest_runtest_logreport


CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")  # pytest's own order


def _config():
    """The project's own pytest configuration, or none at all: never one pytest would find by
    walking up from the staged copy, which lives inside a results folder of someone else's
    checkout (whose addopts may name plugins this environment lacks)."""
    for name in CONFIGS:
        path = os.path.join(ROOT, name)
        if os.path.isfile(path):
            return path
    return os.devnull


def main(ids):
    sys.path.insert(0, ROOT)       # the copied source first: its tests import it
    sys.dont_write_bytecode = True  # the staged copy is read, not written
    import pytest  # the environment under test's, once the copied source leads sys.path and bytecode is off

    args = ["-q", "-p", "no:cacheprovider", "--rootdir", ROOT, "-c", _config()]
    failures = Failures()
    code = pytest.main(args + [os.path.join(ROOT, i) for i in ids], plugins=[failures])
    if code != 0:
        first, message = failures.seen[0] if failures.seen else ("", [])
        raise SystemExit(f"{len(failures.seen)} of {len(ids)} test(s) failed (pytest exit {code}); first {first}: "
                         + (message[0] if message else "no message"))


if __name__ == "__main__":
    main(sys.argv[1:])
