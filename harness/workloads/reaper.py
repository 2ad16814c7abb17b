"""Every process of a cell ends with the cell: a subreaper between the harness and the cell.

    python -m workloads.reaper REPORT GRACE -- CMD [ARG...]

Linux gives an orphan to its nearest living ancestor that asked to be a child subreaper
(prctl PR_SET_CHILD_SUBREAPER), not to init. This process asks, then runs CMD: whatever CMD
leaves running -- a daemon made by a double fork, a child in a session of its own (setsid),
a child that ignores SIGTERM -- is below this process when CMD ends, whatever session or
process group it moved to. Those are the cell's leftovers: each gets SIGTERM, GRACE seconds
to end, then SIGKILL; REPORT (JSON) names them; then this process ends as CMD did (the same
exit status, or the same signal), so the host reads the cell's own ending.

A SIGTERM to this process means the cell is given up (a timeout, a hang, an interrupted run,
the harness's death through PR_SET_PDEATHSIG): CMD and everything below it get SIGKILL at
once, and this process ends by SIGKILL as the whole cell used to.

The warm launcher (workloads/forkserver.py) uses `supervise` in its forked child the same way,
with the cell running in a second fork below it.

Python 3.5 syntax, standard library only: it runs on the cell's own interpreter (and inside
containers), and the host never imports it (tests/test_boundary.py).
"""
import json
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
ARGV_SHOWN = 200  # characters of a leftover's command line kept in the report


def become_subreaper():
    """Ask the kernel for the cell's orphans; False where it cannot (not Linux)."""
    try:
        # libc, through ctypes, loaded in a cell's subreaper only: a warm launcher imports this module and forks
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no prctl: a wrapper that still ends its own children
        return False


def _stat(pid):
    """(parent pid, state letter) of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    rest = text[text.rfind(")") + 2:].split()  # the name may hold spaces and brackets
    return (int(rest[1]), rest[0]) if len(rest) > 1 else None


def below(root):
    """Every live process descended from `root` (not `root` itself), parents first."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _stat(int(name))
            if found and found[1] != "Z":
                children.setdefault(found[0], []).append(int(name))
    out, todo = [], [root]
    while todo:
        for pid in sorted(children.get(todo.pop(0), [])):
            out.append(pid)
            todo.append(pid)
    return out


def alive(pid):
    found = _stat(pid)
    return found is not None and found[1] != "Z"


def describe(pid):
    """A leftover as the report names it: its number, its name and its command line."""
    out = {"pid": pid, "name": None, "argv": None}
    try:
        with open("/proc/%d/comm" % pid, "rb") as fh:
            out["name"] = fh.read().decode("utf-8", "replace").strip()
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            out["argv"] = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:ARGV_SHOWN]
    except (IOError, OSError):
        pass
    return out


def reap():
    """Collect the exit of every child that has ended (orphans become ours to collect)."""
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except OSError:
            return
        if pid == 0:
            return


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def sweep(root, grace):
    """End every process below `root`: SIGTERM, up to `grace` s, then SIGKILL -- again until none
    is left (a leftover may start another while it ends). Returns (ended, survivors): what each
    was and the signal that ended it; survivors only if SIGKILL itself did not end them in time."""
    ended = {}
    deadline = give_up = None
    while True:
        reap()
        found = below(root)
        if not found:
            return sorted(ended.values(), key=lambda p: p["pid"]), []
        now = time.time()
        if deadline is None:
            deadline, give_up = now + grace, now + grace + 10
        for pid in found:
            if pid not in ended:
                ended[pid] = describe(pid)
                ended[pid]["signal"] = "SIGTERM"
                _signal(pid, signal.SIGTERM)
            if now >= deadline and ended[pid]["signal"] != "SIGKILL":
                ended[pid]["signal"] = "SIGKILL"  # it outlived SIGTERM's grace (or came after it)
                _signal(pid, signal.SIGKILL)
        if now >= give_up:
            return (sorted((p for p in ended.values() if p["pid"] not in found), key=lambda p: p["pid"]),
                    [describe(pid) for pid in found])
        time.sleep(0.05)


def kill_all(root):
    """SIGKILL everything below `root` at once (the cell is given up), until nothing is left."""
    give_up = time.time() + 10
    while time.time() < give_up:
        reap()
        found = below(root)
        if not found:
            return
        for pid in found:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.02)


class _GiveUp(Exception):
    pass


def _give_up(*_):
    raise _GiveUp()


def supervise(child, report, grace, subreaper):
    """Wait for `child` (this process's child, the cell), collecting orphans meanwhile; then end
    its leftovers and write `report`. Never returns: ends this process as the cell ended."""
    raw = None
    signal.signal(signal.SIGTERM, _give_up)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        while raw is None:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                raw = status
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the sweep below is short and bounded
        ended, survivors = sweep(os.getpid(), grace)
        _write(report, {"how": "subreaper" if subreaper else "children", "grace_seconds": grace,
                        "processes": ended, "survivors": survivors})
    except _GiveUp:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_all(os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)
    except OSError as exc:  # no child to wait for: nothing can have been left below us
        _write(report, {"how": "subreaper", "grace_seconds": grace, "processes": [], "survivors": [],
                        "problem": str(exc)})
        raw = 1 << 8
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(raw):  # end by the same signal, so the host reads the cell's own ending
        sig = os.WTERMSIG(raw)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(raw))


def _write(path, data):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(data, fh, sort_keys=True)
        os.rename(tmp, path)
    except (IOError, OSError):
        pass  # the host then says it could not tell


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: python -m workloads.reaper REPORT GRACE -- CMD [ARG...]\n")
        return 2
    report, grace, cmd = argv[0], float(argv[1]), argv[3:]
    subreaper = become_subreaper()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # held until supervise can act on it
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            sys.stderr.write("cannot run %s: %s\n" % (cmd[0], exc))
            sys.stderr.flush()
        finally:
            os._exit(127)
    supervise(pid, report, grace, subreaper)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
