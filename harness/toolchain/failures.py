"""A pytest plugin (``-p harness.toolchain.failures``): the node id of every test that failed,
or module that did not collect, one per line in the file ``$HARNESS_FAILURES_FILE`` names --
exact ids for re-running them, without reading them back out of a report's text."""

import os

VARIABLE = "HARNESS_FAILURES_FILE"


def _note(nodeid: str) -> None:
    path = os.environ.get(VARIABLE)
    if path and nodeid:
        with open(path, "a", encoding="utf-8") as out:
            out.write(nodeid + "\n")


def pytest_runtest_logreport(report):
    if report.failed:
        _note(report.nodeid)


def pytest_collectreport(report):
    if report.failed:
        _note(report.nodeid)


def read(path) -> list[str]:
    """The ids written to `path`, each once, in order (a test that failed in setup and teardown is one)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return list(dict.fromkeys(line.strip() for line in fh if line.strip()))
    except FileNotFoundError:
        return []
