"""Planted faults: real failures, so the host's classification is tested
against the real thing (a real SIGSEGV, a real OOM kill), never a simulation.
"""
import ctypes
import os
import sys
import time


def _segfault(log):
    ctypes.string_at(0)


def _abort(log):
    os.abort()


def _memory(log):
    hoard = []
    while True:  # grow until the memory limit kills the process
        block = bytearray(64 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1  # touch every page so it is really resident
        hoard.append(block)


def _hang(log):
    log.emit("hanging")
    while True:
        time.sleep(3600)


def _exception(log, message=None):
    # `message` lets a test plant hostile text (markup, pipes, newlines) that
    # the report must show as text.
    raise RuntimeError(message or "planted fault: the workload raised on purpose")


def _import(log):
    # the planted fault itself: an import of a module no environment has
    import tensorflow_not_installed_planted_fault  # noqa: F401


def _silent_exit(log):
    sys.stdout.flush()
    os._exit(0)


FAULTS = {
    "segfault": _segfault,
    "abort": _abort,
    "memory": _memory,
    "hang": _hang,
    "exception": _exception,
    "import": _import,
    "silent_exit": _silent_exit,
}


def plant(kind, log, message=None):
    log.emit("fault", kind=kind)
    if kind == "exception":
        _exception(log, message)
    FAULTS[kind](log)
