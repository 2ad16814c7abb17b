"""Files that many virtualenvs hold are one copy on disk (harness/samefiles.py): real folders,
real hard links; and two real virtualenvs built by the harness share their large files."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from harness import samefiles

from .conftest import harness

MIB = 1 << 20


def _tree(root: Path, files: dict[str, tuple[bytes, int]]) -> Path:
    for rel, (data, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    return root


@pytest.mark.quick
def test_the_same_large_file_of_two_environments_is_one_copy_with_its_mode_kept(tmp_path):
    lib, other = os.urandom(MIB), os.urandom(MIB)
    store = tmp_path / "venvs" / samefiles.STORE
    one = _tree(tmp_path / "venvs" / "one", {"lib/a.so": (lib, 0o755), "lib/small.py": (b"x" * 100, 0o644),
                                             "lib/mine.so": (other, 0o755)})
    two = _tree(tmp_path / "venvs" / "two", {"site/a.so": (lib, 0o755), "site/small.py": (b"x" * 100, 0o644),
                                             "site/ro.so": (lib, 0o444)})   # same bytes, other mode
    assert samefiles.share(one, store)["stored"] == 2
    done = samefiles.share(two, store)
    assert done["linked"] == 1 and done["bytes_saved"] == MIB
    a, b = (one / "lib/a.so").stat(), (two / "site/a.so").stat()
    assert a.st_ino == b.st_ino and (two / "site/a.so").read_bytes() == lib and stat.S_IMODE(b.st_mode) == 0o755
    assert (two / "site/ro.so").stat().st_ino != a.st_ino and stat.S_IMODE((two / "site/ro.so").stat().st_mode) == 0o444
    assert (one / "lib/small.py").stat().st_nlink == 1                     # small files stay copies
    # an environment removed: the stored copies only it linked go at the next build
    import shutil
    shutil.rmtree(one)
    assert samefiles.forget_unused(store) == 1                              # mine.so; a.so is still two's
    shutil.rmtree(two)
    assert samefiles.forget_unused(store) == 2 and not list(store.rglob("*-*"))


MATRIX = """\
name: shared
environments:
  - {name: one, python: "3.11", packages: ["six==1.16.0"]}
  - {name: two, python: "3.11", packages: ["six==1.17.0"]}
workloads:
  - {name: s, script: s.py}
"""


def test_two_virtualenvs_built_by_the_harness_share_their_large_files(tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    (tmp_path / "s.py").write_text("import six\n")
    cache = tmp_path / "cache"
    proc = harness("build", str(tmp_path / "m.yaml"), "--engine", "venv", "--results", str(tmp_path / "r"),
                   env={"HARNESS_CACHE": str(cache)}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    venvs = sorted(p for p in (cache / "venvs").iterdir() if p.name.startswith("py3.11-") and p.is_dir())
    assert len(venvs) == 2
    first, second = venvs
    shared = 0
    for path in first.rglob("*"):
        twin = second / path.relative_to(first)
        if path.is_file() and not path.is_symlink() and path.stat().st_size >= samefiles.MIN_BYTES \
                and twin.is_file() and twin.read_bytes() == path.read_bytes():
            assert twin.stat().st_ino == path.stat().st_ino, twin           # pip's own large files, once
            shared += 1
    assert shared > 0
    for venv in venvs:                                                        # and both still work
        assert subprocess.run([str(venv / "bin" / "python"), "-c", "import six"]).returncode == 0
