"""Warm launch: import the stack once, fork a fresh child per cell (asv's forkserver).

    python -m workloads.forkserver SOCKET PRELOAD.json [WORKLOADS]

The host starts one server per environment and per set of everything a cell
process reads at import (its variables: the host keys servers by them), with
exactly the variables its cells get; what is read only when a device starts
(which GPUs) each request's ``env`` sets in the fork. The server imports the
stack -- modules only: no TF session or context, no device listing, no JAX
backend -- and then checks that the imports started no thread and touched
no device (workloads/preload.py). Only then does it say ``{"ready": ...}``
on stdout; otherwise it says ``{"refused": why}`` and exits, and the host
runs that stack's cells in a fresh process as before. (fork copies only the
calling thread: a lock another thread held stays locked forever in the
child; a device context does not survive a fork at all.)

Each connection to SOCKET is one cell: the host sends one JSON line (spec,
outdir, log files, cores, memory limit, a backstop), the server forks and
answers ``{"pid": N}``, and ``{"exit": CODE}`` when the child ends (CODE as
subprocess reports it: negative for a signal). The child enters the
cell's cgroup (when the host made one), starts its own session and becomes
the cell's subreaper (workloads/reaper.py), as a fresh cell's first process
is; the cell itself runs in a second fork below it, dies with it
(PR_SET_PDEATHSIG) and runs ``workloads.run.main`` as ``python -m workloads`` does. A host that closes
the connection has given the cell up: its subreaper gets SIGTERM and kills all of it. The server ends
its children and exits when its stdin reaches end-of-file: that pipe is the
host's lifeline, so a harness killed with -9 leaves no process behind.

In a container (engines/docker_warm.py) the server is its container's only
tenant and PRELOAD says so: the lifeline is then a connection on SOCKET
(``{"lifeline": true}``; a container's stdin is not the host's), and after
each cell the server ends every process of the container that is not its
own (the cell's leftovers that escaped its subreaper: what a fresh
container's end would kill) and empties the scratch folders of what the
cell left there, so the next cell starts in the container a fresh cell
would. The exit message then names what was swept.

Python 3.5 syntax, standard library only (plus what PRELOAD names).
"""
import errno
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback

from . import reaper
from .preload import KEPT, STARTERS, _threads, _touched, preload


def _say(message):
    sys.stdout.write(json.dumps(message, sort_keys=True) + "\n")
    sys.stdout.flush()


def _pdeathsig(sig):
    try:
        # in the forked child only: the server loads no ctypes of its own before a fork
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - the server's own clean-up still ends the child
        pass


def _join(procs):
    """Enter the cell's cgroup (the host made it) before anything else, so all the cell starts
    is born there; the host sees it if this fails."""
    if procs:
        try:
            with open(procs, "w") as fh:
                fh.write("0")
        except (IOError, OSError):
            pass


def _child(request, keep_out):
    """In the forked child: become the cell's subreaper (workloads/reaper.py), fork the cell
    below it, end what the cell leaves running; never return."""
    _join(request.get("cgroup"))
    try:
        os.setsid()
        _pdeathsig(signal.SIGKILL)
        for sock in keep_out:  # the server's sockets: closed as objects, so no later close hits a reused fd
            sock.close()
        os.chdir(request["cwd"])  # the cell's folder: what tells a leftover cell whose it is (store.py)
        subreaper = reaper.become_subreaper()
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # held until supervise can act on it
        pid = os.fork()
    except BaseException:  # noqa: BLE001 - what Python would print for an uncaught exception
        traceback.print_exc()
        os._exit(1)
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        _cell(request, [])
    for sig in (signal.SIGCHLD, signal.SIGALRM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    reaper.supervise(pid, request.get("reaped") or os.path.join(request["outdir"], "reaped.json"),
                     float(request.get("grace") or 3), subreaper)


def _cell(request, keep_out):
    """In the cell's own process: become a cell process, run the cell, never return."""
    code = 1
    try:
        _pdeathsig(signal.SIGKILL)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sock in keep_out:  # the server's sockets: closed as objects, so no later close hits a reused fd
            sock.close()
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        if request.get("cpus") and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, request["cpus"])
        if request.get("memory"):
            # in the cell, after the fork: only a cell with a memory limit needs it
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (int(request["memory"]), int(request["memory"])))
        if request.get("backstop"):
            signal.alarm(int(request["backstop"]))  # ends the cell if nobody else does
        os.environ.update(request.get("env") or {})
        if (request.get("env") or {}).get("HOME"):  # a home of the cell's own, made here if new
            os.makedirs(request["env"]["HOME"], mode=0o700, exist_ok=True)
        if "tempfile" in sys.modules:  # an import before the fork may have settled the temp folder
            sys.modules["tempfile"].tempdir = None
        sys.argv = [sys.argv[0], request["spec"], request["outdir"]]
        # imported in the cell, after the fork, as `python -m workloads` imports it: its T_PROCESS
        # marks the cell's start, and the server preloads the stack only
        from . import run
        code = run.main([request["spec"], request["outdir"]])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - what Python would print for an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _status(raw):
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


def _send(conn, message):
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except (OSError, IOError):
        pass  # the host went away: the child's group was or will be killed


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _give_up(pid):
    """End a cell: SIGTERM to its subreaper kills the cell and all it started, in any session."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass


LIFELINE_WAIT = 60.0  # seconds a tenant server waits for its lifeline before it gives up


def _sweep():
    """End every process of this (container's) PID namespace but its init and this server: run
    only between cells, when nothing else of ours is alive. Returns what was killed."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            found.append(reaper.describe(int(name)))
    for proc in found:
        try:
            os.kill(proc["pid"], signal.SIGKILL)
        except OSError:
            pass
        proc["signal"] = "SIGKILL"
    return found


def _listing(folders):
    return dict((folder, set(os.listdir(folder)) if os.path.isdir(folder) else set()) for folder in folders)


def _wipe(kept):
    """Remove what a cell added to the scratch folders (names there when the server was ready stay)."""
    for folder, names in kept.items():
        for name in (os.listdir(folder) if os.path.isdir(folder) else []):
            if name not in names:
                path = os.path.join(folder, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    try:
                        os.unlink(path)
                    except OSError:
                        pass


class Server(object):
    def __init__(self, path, tenant=False, scratch=()):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.reading = {}    # connection -> bytes received (no full request yet)
        self.children = {}   # pid -> connection
        self.given_up = set()  # connections whose host gave their cell up
        self.running = True
        self.tenant = tenant          # the only tenant of a container: lifeline on the socket, sweep after cells
        self.lifeline = None
        self.kept = _listing(scratch)  # the scratch folders' names now: a cell's additions are removed
        self.since = time.time()

    def shutdown(self, *_):
        self.running = False

    def serve(self):
        signal.signal(signal.SIGTERM, self.shutdown)
        while self.running:
            if not self.tenant:
                line = [sys.stdin]
            elif self.lifeline is not None:
                line = [self.lifeline]
            elif time.time() - self.since > LIFELINE_WAIT:
                break  # the host never took the lifeline up: it is gone
            else:
                line = []
            watched = [self.listener] + line + list(self.reading) + \
                [c for c in self.children.values() if c not in self.given_up]
            try:
                ready = select.select(watched, [], [], 0.05)[0]
            except (OSError, IOError, select.error) as exc:
                if getattr(exc, "errno", None) == errno.EINTR or (exc.args and exc.args[0] == errno.EINTR):
                    continue
                raise
            for item in ready:
                if item is sys.stdin:
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.running = False  # the host is gone
                elif item is self.lifeline:
                    if not item.recv(4096):
                        self.running = False  # the host is gone
                elif item is self.listener:
                    conn = self.listener.accept()[0]
                    self.reading[conn] = b""
                elif item in self.reading:
                    self._read(item)
                else:  # a cell's connection: the host closed it (or its sending half): it gave the cell up
                    for pid, conn in list(self.children.items()):
                        if conn is item and not item.recv(4096):
                            _give_up(pid)
                            self.given_up.add(conn)  # its exit is still sent, if the host listens
            self._reap()
        for pid in list(self.children):
            _give_up(pid)
        deadline = time.time() + 5
        while self.children and time.time() < deadline:
            self._reap()
            time.sleep(0.02)
        for pid in list(self.children):  # a subreaper that did not end in time: its group, at once
            _kill_group(pid)
        self._reap(block=True)

    def _read(self, conn):
        data = conn.recv(65536)
        if not data:
            del self.reading[conn]
            conn.close()
            return
        self.reading[conn] += data
        if b"\n" not in self.reading[conn]:
            return
        request = json.loads(self.reading.pop(conn).split(b"\n", 1)[0].decode())
        if request.get("lifeline"):
            self.lifeline = conn
            return
        keep_out = [self.listener] + list(self.reading) + list(self.children.values()) + \
            ([self.lifeline] if self.lifeline is not None else [])
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            conn.close()
            _child(request, keep_out)
        self.children[pid] = conn
        _send(conn, {"pid": pid})

    def _reap(self, block=False):
        while self.children:
            try:
                pid, raw = os.waitpid(-1, 0 if block else os.WNOHANG)
            except OSError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                message = {"exit": _status(raw)}
                if self.tenant and not self.children:
                    message["swept"] = _sweep()
                    _wipe(self.kept)
                _send(conn, message)
                self.given_up.discard(conn)
                conn.close()


def main(argv):
    path, preload_path = argv[:2]  # a third argument only names whose server this is
    try:
        return _main(path, preload_path)
    finally:
        _leave(path, preload_path)


def _leave(path, preload_path):
    """Remove what the host made for this server -- its socket, the preload file beside it,
    the home its imports saw (cellenv.own_home: `home` beside them), and their folder if nothing
    else is in it -- since a host killed with -9 cannot."""
    folder = os.path.dirname(os.path.abspath(path))
    for name in (path, preload_path):
        if os.path.dirname(os.path.abspath(name)) == folder:
            try:
                os.unlink(name)
            except OSError:
                pass
    shutil.rmtree(os.path.join(folder, "home"), ignore_errors=True)
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _main(path, preload_path):
    with open(preload_path) as fh:
        spec = json.load(fh)
    try:
        allowed = preload(spec)
    except BaseException as exc:  # noqa: BLE001 - any failure: the cells run fresh and meet it there
        _say({"refused": "preloading failed: %s: %s" % (type(exc).__name__, str(exc)[:300])})
        return 0
    threads, touched = _threads(), _touched()
    if threads > allowed:
        named = ", ".join(["%s started %d" % pair for pair in STARTERS]
                          + (["fork-aware among them: " + ", ".join("%s %d" % pair for pair in KEPT)]
                             if KEPT else []))
        _say({"refused": "importing the stack started %d thread(s) that do not prepare for a fork (only "
              "OpenBLAS's and jemalloc's do)%s; fork would copy only one"
              % (threads - allowed, " (%s)" % named if named else "")})
        return 0
    if touched:
        _say({"refused": "importing the stack started a device runtime: %s" % ", ".join(touched)})
        return 0
    server = Server(path, tenant=bool(spec.get("tenant")), scratch=spec.get("scratch") or ())
    _say({"ready": True, "pid": os.getpid(), "modules": len(sys.modules),
          "kept": ["%s: %d" % pair for pair in KEPT]})
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
