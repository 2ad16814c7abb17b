"""The user's code folder is read safely (issue 31, item 3), on real files: the walk is
bounded before it starts, never enters /proc, /sys, /dev, other mounts or special files,
never follows a link loop, and a folder or file it cannot read is one line naming it, exit 2,
no traceback (`path: /` used to end in a PermissionError on /proc/1/cwd)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, harness

pytestmark = pytest.mark.quick  # the quick tier: nox -s tests -- -m quick

FACTORY = "def build(keras):\n    pass\n\n\ndef data():\n    pass\n"
HEAD = 'environments: [{python: "3.11", tensorflow: "2.15.0", packages: ["numpy<2"]}]\nworkloads:\n'


def _matrix(where: Path, path: str) -> Path:
    matrix = where / "m.yaml"
    matrix.write_text(HEAD + f"  - {{name: a, model: user, path: '{path}', build: 'model:build', "
                             "data: 'model:data'}\n")
    return matrix


def _one_line_exit_2(proc, *named: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "workloads[0].path: " in proc.stderr, proc.stderr
    for text in named:
        assert text in proc.stderr, (text, proc.stderr)


@pytest.mark.parametrize("folder", ["/", "/etc", "/proc/self", "/sys/kernel", "/dev"])
def test_system_folders_are_refused_before_the_walk(tmp_path, folder):
    """`path: /` walked into /proc and ended in a traceback; /etc (as root) was hashed and would
    have been staged, /etc/shadow and all, into results and bundles."""
    started = time.monotonic()
    proc = harness("list", str(_matrix(tmp_path, folder)), timeout=120)
    _one_line_exit_2(proc, folder)
    assert time.monotonic() - started < 60


def _code(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(FACTORY)
    return folder


def _hash(folder: Path) -> str:
    from harness import usercode
    return usercode.load(folder, folder).sha256


def test_links_loops_and_special_files_are_skipped_not_read(tmp_path, monkeypatch):
    """A link loop (to itself, between two links, to a parent folder), a FIFO, a socket and
    device files (made with mknod where allowed, else links to /dev/null and /dev/zero): the
    folder hashes as its code alone, `list` answers at once, and staging copies the code only."""
    from harness import usercode
    code = _code(tmp_path / "code")
    plain = _hash(code)
    os.symlink("self", code / "self")
    os.symlink("b", code / "a")
    os.symlink("a", code / "b")
    os.symlink("..", code / "up")
    os.symlink(".", code / "here")
    os.mkfifo(code / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(code)  # a socket's address holds about 100 characters: a deep temp folder has more
    listener.bind("sock")
    try:
        for name, minor in (("null", 3), ("zero", 5)):
            try:
                os.mknod(code / name, 0o666 | 0o020000, os.makedev(1, minor))
            except PermissionError:
                os.symlink(f"/dev/{name}", code / name)
        os.symlink("/dev/zero", code / "zero-link")
        assert _hash(code) == plain
        proc = harness("list", str(_matrix(tmp_path, str(code))), timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        staged = usercode.copy_into(tmp_path / "staged", usercode.load(code, code))
        assert sorted(p.name for p in staged.iterdir()) == ["model.py"]
    finally:
        listener.close()


def test_the_walk_is_bounded_before_a_byte_is_read(tmp_path):
    """A sparse file far over the byte bound is refused from its size (it used to be read whole
    into memory first); a folder of many names the hash skips anyway (a cache, a home folder) stops
    at the name bound instead of being walked to its end; more files than the file bound stop too."""
    from harness import usercode
    big = _code(tmp_path / "big")
    with open(big / "weights.bin", "wb") as f:
        f.truncate(1 << 40)  # 1 TiB of nothing
    started = time.monotonic()
    proc = harness("list", str(_matrix(tmp_path, str(big))), timeout=120)
    _one_line_exit_2(proc, str(big), "weights.bin", f"{usercode.MAX_BYTES >> 20} MiB")
    assert time.monotonic() - started < 60

    names = _code(tmp_path / "names")
    for i in range(usercode.MAX_NAMES + 1):
        (names / f"m{i}.pyc").touch()
    _one_line_exit_2(harness("list", str(_matrix(tmp_path, str(names))), timeout=120), str(names),
                     f"{usercode.MAX_NAMES} names")

    files = _code(tmp_path / "files")
    for i in range(usercode.MAX_FILES + 1):
        (files / f"f{i}.txt").touch()
    _one_line_exit_2(harness("list", str(_matrix(tmp_path, str(files))), timeout=120), str(files),
                     f"{usercode.MAX_FILES} files")


def test_another_mount_inside_the_folder_is_not_entered(tmp_path):
    """A tmpfs mounted inside the code folder (in a private mount namespace, so nothing outlives
    the test) is another device: its files are not part of the code's hash."""
    code = _code(tmp_path / "code")
    (code / "mnt").mkdir()
    (code / "mnt" / "helper.py").write_text("x = 1\n")
    with_folder = _hash(code)
    (code / "mnt" / "helper.py").unlink()
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
    script = (f"mount -t tmpfs none {code / 'mnt'} && echo 'x = 1' > {code / 'mnt' / 'helper.py'} && "
              f"exec {sys.executable} -c 'import sys; from pathlib import Path; from harness import usercode; "
              f"print(usercode.load(Path(sys.argv[1]), Path(sys.argv[1])).sha256)' {code}")
    proc = subprocess.run([unshare, "-m", "--propagation", "private", "sh", "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (code / "mnt").rmdir()
    assert proc.stdout.strip() == _hash(code) != with_folder


@pytest.fixture
def unprivileged(tmp_path):
    """run(matrix): `harness list` by a process that file modes bind. Root reads any file whatever
    its mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so as root the two capabilities are dropped
    from the bounding set for the harness's process (setpriv), and it meets modes as a user does."""
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and no setpriv to drop root's right to read every file")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]

    def run(matrix: Path) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, "-m", "harness", "list", str(matrix)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "x").write_text("x")
    (probe / "x").chmod(0)
    if subprocess.run([*prefix, sys.executable, "-c", f"open({str(probe / 'x')!r})"],
                      capture_output=True).returncode == 0:
        pytest.skip("this process reads a file of mode 000 even without CAP_DAC_OVERRIDE")
    yield run
    for path in tmp_path.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


def test_what_cannot_be_read_is_one_line_naming_it(unprivileged, tmp_path):
    """A folder without read permission used to be skipped in silence (the code's hash then left
    it out), one with read but no search permission ended in a traceback; an unreadable file was
    already one line. Each is now one line naming it, exit 2."""
    for name, mode, named in (("closed", 0o000, "closed"), ("listed", 0o644, "listed"), ("file", None, "secret.py")):
        code = _code(tmp_path / name)
        (code / "inner").mkdir()
        (code / "inner" / "secret.py").write_text("x = 1\n")
        matrix = _matrix(code, str(code))
        if mode is None:
            (code / "inner" / "secret.py").chmod(0o000)
        else:
            (code / "inner").chmod(mode)
        _one_line_exit_2(unprivileged(matrix), named, "cannot be read")
