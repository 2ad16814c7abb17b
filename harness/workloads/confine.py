"""A cell's writes confined to the folders the host names, before the user's code runs.

`harness reduce` runs hundreds of variants of a user's script that nobody has run: the
reducer replaces an ``if`` with its body, a call with its argument, so a branch the script
never took -- one that empties an output folder, uploads, or deletes a file by its absolute
path -- may run in a candidate. A cell the host asks to confine (the variable ENV_CONFINE:
the mechanism the host chose and the folders it may write) confines its own process, and so
everything it starts, before it runs anything of the user's; everything stays readable, so
the user's data is read as the script always read it. Two mechanisms:

- **landlock** (Linux >= 5.13, where the kernel enables it): an unprivileged, irrevocable
  rule set. Every right to change the filesystem that this kernel's Landlock ABI knows is
  denied, except beneath the writable folders; reading and executing are not restricted.
  Device files (GPUs, /dev/null) and the kernel's files under /proc may still be written in
  place -- neither is a file of anyone's; CUDA will not start unless it can name its threads
  in /proc/self/task/*/comm -- and /dev/shm is temporary space. What an older ABI cannot deny
  is said in the record (`gaps`): truncating a file by its path before ABI 3; as root, the
  kernel's settings under /proc/sys. Before ABI 2 a file cannot be moved between folders at
  all, even writable ones.
- **mount-namespace** (root, where Landlock is not enabled): the process gets a mount
  namespace of its own in which every mount but /proc is read-only, but bind mounts of the
  writable folders. Root can undo it (remount, or reach the host's mounts through /proc/PID/root):
  it keeps a script from destroying by accident, not a hostile one from escaping, and the
  record says so.

The host decides which mechanism a cell gets (harness/confinement.py, once per run, by
running this module's probe); a cell that cannot apply what it was asked never runs the
user's code. Either way no-new-privileges is set (a set-uid program gains nothing), as in a
container. A process that already runs threads cannot be confined (Landlock binds the calling
thread, and a new mount namespace needs a single-threaded caller): a fresh cell applies it
before its imports, a warm one right after its fork.

    python -m workloads.confine HOW FOLDER

is the host's probe: it confines itself with HOW to FOLDER/inside, checks that it can write
there, cannot remove or create anything in FOLDER/outside and can still read it, and prints
what it applied as one JSON line ({"unavailable": why} when it could not).

Python 3.5 syntax, standard library only.
"""
import errno
import json
import os
import re
import sys

from .protocol import ENV_CONFINE

# Syscall numbers: Landlock came after Linux 5.1 gave new syscalls one number on every
# architecture (alpha aside), so these hold on x86-64 and arm64 alike.
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Landlock's filesystem rights (include/uapi/linux/landlock.h), and the ABI that brought each.
FS_WRITE_FILE = 1 << 1
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13      # ABI 2: link or rename into another folder
FS_TRUNCATE = 1 << 14   # ABI 3: truncate(2) and O_TRUNC
WRITES_ABI_1 = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
                | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
# Reading, listing, executing and device ioctls are never handled, so never restricted.

MECHANISMS = ("landlock", "mount-namespace")
DEVICES = "/dev"      # device files: opened for writing (GPUs, /dev/null), never created or removed
PROCESSES = "/proc"   # the kernel's process files: CUDA names its threads in /proc/self/task/*/comm
SHARED_MEMORY = "/dev/shm"

# mount(2)
CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOSYMFOLLOW = 256
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME,
              "nosymfollow": MS_NOSYMFOLLOW}


class Unconfinable(Exception):
    """The confinement asked for cannot be applied here; the message says why (one line)."""


_LIBC = []


def _libc():
    if not _LIBC:
        import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError as exc:
            raise Unconfinable("no C library to call the kernel through (%s)" % exc)
        libc.syscall.restype = ctypes.c_long
        _LIBC.append(libc)
    return _LIBC[0]


def _failed(what):
    import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed
    code = ctypes.get_errno()
    return Unconfinable("%s failed: %s" % (what, os.strerror(code) if code else "unknown error"))


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def landlock_abi():
    """The kernel's Landlock ABI version; Unconfinable (why) where it has none."""
    if not sys.platform.startswith("linux"):
        raise Unconfinable("Landlock is a Linux feature")
    import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed
    abi = _libc().syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                          ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 0:
        code = ctypes.get_errno()
        if code == errno.ENOSYS:
            raise Unconfinable("this kernel has no Landlock (Linux 5.13 or later, built with it)")
        if code == errno.EOPNOTSUPP:
            raise Unconfinable("Landlock is built into this kernel but not enabled (add it to the lsm= boot "
                               "parameter)")
        raise Unconfinable("Landlock cannot be used here (%s)" % os.strerror(code))
    return int(abi)


def _rights(abi):
    """(every write right this ABI can deny, where it falls short of the newest: what it cannot
    deny, and on ABI 1 what it denies that it should not)."""
    handled, gaps = WRITES_ABI_1, []
    if abi >= 2:
        handled |= FS_REFER
    else:
        gaps.append("no file can be moved or linked into another folder, even a writable one (Landlock ABI 1)")
    if abi >= 3:
        handled |= FS_TRUNCATE
    else:
        gaps.append("truncating an existing file by its path (truncate(2)) is not denied before Landlock ABI 3")
    return handled, gaps


def landlock(writable):
    """Deny this process and all it starts every write outside `writable` (folders)."""
    import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    abi = landlock_abi()
    handled, gaps = _rights(abi)
    libc = _libc()
    attr = RulesetAttr(handled)
    ruleset = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _failed("landlock_create_ruleset")
    rules = [(path, handled) for path in writable]
    if os.path.isdir(SHARED_MEMORY):
        rules.append((SHARED_MEMORY, handled))
    for folder in (DEVICES, PROCESSES):  # written in place, never a file created or removed there
        if os.path.isdir(folder):
            rules.append((folder, handled & (FS_WRITE_FILE | FS_TRUNCATE)))
    try:
        for path, allowed in rules:
            try:
                fd = os.open(path, getattr(os, "O_PATH", 0o10000000) | os.O_CLOEXEC)
            except OSError as exc:
                raise Unconfinable("cannot open %s to allow writes beneath it (%s)" % (path, exc.strerror))
            try:
                rule = PathBeneath(allowed, fd)
                if libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                                ctypes.c_uint32(0)) != 0:
                    raise _failed("landlock_add_rule for %s" % path)
            finally:
                os.close(fd)
        _no_new_privileges()
        if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _failed("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return {"how": "landlock", "abi": abi, "gaps": gaps}


def _no_new_privileges():
    import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed
    if _libc().prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                     ctypes.c_ulong(0)) != 0:
        raise _failed("prctl(PR_SET_NO_NEW_PRIVS)")


def _unescape(field):
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts():
    """(mount point, its per-mount flags to keep) of every mount this process sees, in order."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) < 6:
                continue
            flags = 0
            for option in fields[5].split(","):
                flags |= KEPT_FLAGS.get(option, 0)
            out.append((_unescape(fields[4]), flags))
    return out


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def mount_namespace(writable):
    """Give this process a mount namespace of its own where only `writable` (and /dev/shm) can be
    written: each is bound onto itself (a mount of its own, writable), then every other mount is
    remounted read-only. Device files stay writable on a read-only mount."""
    import ctypes  # libc, through ctypes: loaded only where a confinement is applied or probed
    libc = _libc()
    if libc.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
        code = ctypes.get_errno()
        if code == errno.EPERM:
            raise Unconfinable("a mount namespace needs root (CAP_SYS_ADMIN)")
        raise _failed("unshare(CLONE_NEWNS)")
    if libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        raise _failed("making the mounts private")  # never let a change reach the host's namespace
    before = mounts()
    keep = list(writable) + ([SHARED_MEMORY] if os.path.isdir(SHARED_MEMORY) else [])
    for folder in keep:
        path = folder.encode()
        if libc.mount(path, path, None, ctypes.c_ulong(MS_BIND | MS_REC), None) != 0:
            raise _failed("binding %s" % folder)
    for point, flags in before:
        if point == PROCESSES or any(_inside(point, folder) for folder in keep):
            continue  # /proc as it was: its process files are written in place (see landlock)
        if libc.mount(None, point.encode(), None, ctypes.c_ulong(MS_REMOUNT | MS_BIND | MS_RDONLY | flags),
                      None) != 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.ENOTDIR):
                continue  # no longer reachable by its path: nothing can be written through it
            raise _failed("making %s read-only" % point)
    try:  # the folder this process is in, as the new mounts see it (its old mount is read-only now)
        os.chdir(os.getcwd())
    except OSError:
        pass
    _no_new_privileges()
    return {"how": "mount-namespace", "gaps": ["a process running as root can undo it (remount, or reach the "
                                               "host's mounts through /proc/PID/root)"]}


def apply(how, writable):
    """Confine this process with `how` to `writable`; a record of what was applied, or
    Unconfinable (why, one line) -- then nothing was changed that lets the user's code run."""
    if how not in MECHANISMS:
        raise Unconfinable("unknown confinement %r" % (how,))
    writable = [os.path.realpath(path) for path in writable]
    missing = [path for path in writable if not os.path.isdir(path)]
    if missing:
        raise Unconfinable("a folder to allow writes in is missing: %s" % missing[0])
    threads = _threads()
    if threads > 1:
        raise Unconfinable("the process already runs %d threads; it must be confined before it starts any"
                           % threads)
    record = landlock(writable) if how == "landlock" else mount_namespace(writable)
    record["writable"] = writable
    record["devices"] = ("device files under %s and the kernel's files under %s may be written in place, none "
                         "created or removed" % (DEVICES, PROCESSES))
    if os.geteuid() == 0:
        record["gaps"].append("running as root, the kernel's settings under /proc/sys can be written")
    if os.path.isdir(SHARED_MEMORY):
        record["shared_memory"] = SHARED_MEMORY
    record["no_new_privileges"] = True
    return record


def from_environ():
    """What the host asked of this cell (ENV_CONFINE), applied: its record, or None when it asked
    nothing. Unconfinable when it cannot be applied. The variable is removed: the user's code has
    no use for it."""
    asked = os.environ.pop(ENV_CONFINE, None)
    if not asked:
        return None
    try:
        spec = json.loads(asked)
        how, writable = spec["how"], [str(p) for p in spec["writable"]]
    except (ValueError, KeyError, TypeError):
        raise Unconfinable("the host's request is not {\"how\": ..., \"writable\": [...]}")
    return apply(how, writable)


def probe(how, folder):
    """Confine this process to FOLDER/inside and check that it holds: a write there succeeds, a
    removal, a new file and a new folder in FOLDER/outside are refused, and what is there can
    still be read. The record applied, or {"unavailable": why}."""
    inside, outside = os.path.join(folder, "inside"), os.path.join(folder, "outside")
    for path in (inside, outside):
        if not os.path.isdir(path):
            os.makedirs(path)
    victim = os.path.join(outside, "victim")
    with open(victim, "w") as fh:
        fh.write("kept")
    try:
        record = apply(how, [inside])
    except Unconfinable as exc:
        return {"unavailable": str(exc)}
    try:
        with open(os.path.join(inside, "written"), "w") as fh:
            fh.write("ok")
    except (IOError, OSError) as exc:
        return {"unavailable": "applied, but a write in the writable folder failed (%s)" % exc}
    attempts = (("remove a file outside", lambda: os.unlink(victim)),
                ("create a file outside", lambda: open(os.path.join(outside, "new"), "w").close()),
                ("create a folder outside", lambda: os.mkdir(os.path.join(outside, "made"))),
                ("open a file outside for writing", lambda: open(victim, "a").close()))
    for what, attempt in attempts:
        try:
            attempt()
        except (IOError, OSError) as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                return {"unavailable": "applied, but trying to %s failed with %s, not a refusal" % (what, exc)}
            continue
        return {"unavailable": "applied, but the confined process could still %s" % what}
    try:
        with open(victim) as fh:
            if fh.read() != "kept":
                return {"unavailable": "applied, but a file outside no longer reads as written"}
    except (IOError, OSError) as exc:
        return {"unavailable": "applied, but a file outside can no longer be read (%s)" % exc}
    return record


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: python -m workloads.confine HOW FOLDER\n")
        return 2
    sys.stdout.write(json.dumps(probe(argv[0], argv[1]), sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
