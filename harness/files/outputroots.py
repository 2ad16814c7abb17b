"""The folders the harness writes, never taken for the user's code.

A user runs the harness in the folder that holds their script and matrix (``path: .``), so
the folders it writes there -- results, bundles, reduced, diverge, site, its caches -- sit
inside the code folder it hashes and copies. Taken for code, they nested: `reduce` copied
its own candidates into every new candidate until a name was too long to make, and the
record `diverge` wrote changed the code's hash, so its second comparison ran both sides
again. Three things keep them out of a workload's hash and copy (``usercode.walk``),
wherever they sit:

1. their default names (``usercode.SKIPPED``), for output an older harness left;
2. ``MARKER``, a file the harness leaves in each output root of a command (when the command
   ends), so a folder the user named otherwise is known to every later command,
   whatever its options;
3. the command's own output folders, by path (``declared``, before the matrix is read): the
   first command to write a folder has left no marker in it yet.

An output folder that is a workload's code folder, or holds it, would hold its own input: it
is refused in one line before anything is written there (``check_apart``), and never marked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from harness.errors import UserError
from harness.files.paths import cache_dir

# The command-line options that name a folder the harness writes (or a results folder it reads).
OPTIONS = ("results", "out", "site", "bundles", "export")
MARKER = ".tfkeras-harness-output"
MARKER_TEXT = ("This folder is output of tfkeras-harness. The harness never hashes or copies it as a "
               "workload's code, wherever it sits.\n")

# This process's command: its output folders (resolved) -> (the option, the path as given); and
# those found to be or to hold a code folder (refused: never marked, even where a caller went on).
_declared: dict[Path, tuple[str, str]] = {}
_holding: set[Path] = set()


def _resolved(path) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte: no folder to keep apart
        return None


def folders_of(args) -> dict[str, object]:
    """The output folders a command line names, {how the user named it: path}: OPTIONS, and the
    harness's cache folder, which every command may write."""
    named = {f"--{key}": getattr(args, key) for key in OPTIONS if isinstance(getattr(args, key, None), str)}
    return {**named, "the harness's cache folder": cache_dir()}


@contextlib.contextmanager
def declared(args):
    """Run the command of `args` (argparse's, or any object with OPTIONS as attributes: the API's
    operations pass their own) with its output folders (``folders_of``) kept out of every code
    folder's hash and copy, and marked when it ends -- unless it ends refusing its input (a
    UserError), when what it was given may be the user's own folder. Nested (an API call inside a
    command, a notebook's second run), the inner folders join the outer ones for the inner's
    length; each call leaves the declarations as it found them."""
    before, holding_before = dict(_declared), set(_holding)
    for what, path in folders_of(args).items():
        resolved = _resolved(path) if path not in (None, "") else None
        if resolved is not None:
            _declared.setdefault(resolved, (what, str(path)))
    try:
        yield
    except UserError:
        raise
    except BaseException:  # interrupted, or a bug: what it wrote so far is still the harness's
        _mark()
        raise
    else:
        _mark()
    finally:
        _declared.clear()
        _declared.update(before)
        _holding.clear()
        _holding.update(holding_before)


def is_output(folder: Path) -> bool:
    """Whether `folder` (a folder met below a resolved code folder) is the harness's output: one
    this command writes, or one the harness marked."""
    return Path(folder) in _declared or os.path.lexists(os.path.join(folder, MARKER))


def check_apart(code: Path, where: str) -> None:
    """Refuse (one line) an output folder of this command that is the code folder `code`
    (resolved) of the workload at `where`, or holds it: the harness would copy and hash its own
    output as that workload's code, or write among the user's files."""
    for out, (what, given) in _declared.items():
        if out == code or out in code.parents:
            _holding.add(out)
            relation = "is" if out == code else "holds"
            raise UserError(f"{what} {given} {relation} the code folder of {where} ({code}): the harness would "
                            "write its output among the code it copies and hashes; choose a folder outside it "
                            "(one inside it is fine)")


def _mark() -> None:
    """Leave MARKER in each output folder of this command that exists and holds no code folder.
    Never through a link, never over what stands there, and silently not where it cannot be
    written (a read-only results folder is still read by name and by path)."""
    for out in _declared:
        if out in _holding or not out.is_dir():
            continue
        try:
            fd = os.open(out / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError:  # there already, or not writable
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(MARKER_TEXT)
