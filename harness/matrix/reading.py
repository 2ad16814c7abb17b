"""Reading a matrix file as untrusted input: only a regular file, only up to
MAX_FILE_BYTES, UTF-8, YAML's safe loader with duplicate keys refused, and the
document's size and nesting bounded -- before parsing builds it and again once
its aliases are expanded -- so any document ends in one MatrixError naming the
file and the place, within milliseconds, before validation walks it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
from pathlib import Path

import yaml

from harness.errors import MatrixError
from harness.matrix.checker import _show
from harness.matrix.schema import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES

# libyaml where PyYAML has it: the pure-Python reader takes ~100 us a value, so a 1 MiB list would take a minute.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """YAML's safe loader, stricter: a key given twice is an error (plain YAML
    keeps the last value and silently drops the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merged keys may be overridden; non-scalar keys are rare and unhashable anyway
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"the key {_show(key)} is given twice",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _scan(text: str) -> None:
    """Walk the event stream once before anything is built: stop at MAX_DEPTH
    levels of nesting and at MAX_VALUES values. The parser itself keeps a
    stack of states, but composing nodes recurses (20,000 levels would be a
    RecursionError, or a crash in libyaml's composer), and building a huge
    document costs time before any check could refuse it. Where the parser has
    a limit of its own that bites first (libyaml >= 0.2.6 stops flow nesting
    at 1,000 levels while its scanner looks ahead on one line), its error is
    the message: either way one line naming the file and the place."""
    parser = _BaseLoader(text)
    depth = values = 0
    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                      event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent,
                                  yaml.SequenceStartEvent)):
                values += 1
                if values > MAX_VALUES:
                    raise _TooBig(f"more than {MAX_VALUES} values")
    finally:
        parser.dispose()


class _TooBig(Exception):
    pass


def _measure(root) -> None:
    """Refuse a document that is too large or deep once its aliases are expanded.

    YAML shares an aliased value instead of copying it, so ten levels of ten
    aliases load in microseconds -- and validation, which walks (and quotes)
    values, would then meet ten billion of them. Sizes are memoised per shared
    object, so this walk itself stays linear in what the file really holds.
    """
    sizes: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()

    def visit(node, depth: int) -> tuple[int, int]:
        if not isinstance(node, (dict, list, set)):
            return 1, 0
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            raise _TooBig("a value contains itself (a recursive alias)")
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested deeper than {MAX_DEPTH} levels (counting aliases)")
        open_.add(id(node))
        total, deepest = 1, 0
        for child in itertools.chain.from_iterable(node.items()) if isinstance(node, dict) else node:
            size, child_depth = visit(child, depth + 1)
            total += size
            deepest = max(deepest, child_depth + 1)
            if total > MAX_VALUES:
                raise _TooBig(f"more than {MAX_VALUES} values once its aliases are expanded")
            if depth + deepest > MAX_DEPTH:
                raise _TooBig(f"nested deeper than {MAX_DEPTH} levels (counting aliases)")
        open_.discard(id(node))
        sizes[id(node)] = (total, deepest)
        return total, deepest

    visit(root, 0)


def _read(path: Path) -> bytes:
    """The file's bytes: only a regular file, only up to MAX_FILE_BYTES. A FIFO
    is opened without blocking and refused, so it cannot hang the harness."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise MatrixError(path, ["no such file"]) from None
    except IsADirectoryError:
        raise MatrixError(path, ["is a folder, not a matrix file"]) from None
    except OSError as exc:
        raise MatrixError(path, [f"cannot read: {exc.strerror}"]) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise MatrixError(path, ["is a folder, not a matrix file"])
        if not stat.S_ISREG(mode):
            raise MatrixError(path, ["is not a regular file (a pipe, a device or a socket)"])
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise MatrixError(path, [f"cannot read: {exc.strerror}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise MatrixError(path, [f"larger than {MAX_FILE_BYTES >> 20} MiB; a matrix is a few KiB"])
    return data




def read(path: Path) -> tuple[dict, str]:
    """The file's top-level mapping and the sha256 of its bytes, or one MatrixError."""
    data = _read(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MatrixError(path, [f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"]) from None
    try:
        _scan(text)
        raw = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _TooBig as exc:
        raise MatrixError(path, [f"the document is too large: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        problem = " ".join(str(problem).split())  # one line
        problem = problem if len(problem) <= 200 else problem[:200] + "..."
        raise MatrixError(path, [f"{where}YAML syntax error: {problem}"]) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of 5,000 digits
        raise MatrixError(path, [f"a value cannot be read: {_show(str(exc))}"]) from None
    if not isinstance(raw, dict):
        raise MatrixError(path, ["expected a mapping at the top level (environments:, workloads:, ...)"])
    try:
        _measure(raw)
    except _TooBig as exc:
        raise MatrixError(path, [f"the document is too large: {exc}"]) from None
    return raw, hashlib.sha256(data).hexdigest()
