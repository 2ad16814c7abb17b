"""The warm launcher's preload: import the stack once, under watch, and judge whether the
process can still fork.

fork copies only the calling thread: a lock another thread held stays locked forever in the
child, and a device context does not survive a fork at all. So the stack is imported here
with every thread start charged to the module whose import started it (a refusal names the
library, not only a count), the threads of libraries that prepare for a fork themselves
recognised (OpenBLAS, jemalloc: `_ForkAware`), and the device runtimes the imports may have
started looked for (`_touched`). workloads/forkserver.py says ``{"ready": ...}`` only when
both come back clean.

Python 3.5 syntax, standard library only (plus what the preload names).
"""
import builtins
import importlib
import os
import sys
from importlib import machinery

from . import compat


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        # deferred: only where /proc is missing, so the launcher imports threading no earlier than its stack does
        import threading
        return threading.active_count()


def _touched():
    """Names of device runtimes the imports started (none may be, before a fork)."""
    found = []
    mods = sys.modules
    if "jax" in mods:
        try:
            # the framework's own module, looked at only once the preload imported the framework
            from jax._src import xla_bridge
            if getattr(xla_bridge, "_backends", None):
                found.append("jax backend")
        except Exception:  # noqa: BLE001 - a private module that may move: not knowing is not a yes
            pass
    if "tensorflow" in mods:
        try:
            # the framework's own module, looked at only once the preload imported the framework
            from tensorflow.python.eager import context
            ctx = getattr(context, "_context", None)
            if ctx is not None and getattr(ctx, "_context_handle", None) is not None:
                found.append("tensorflow eager context")
        except Exception:  # noqa: BLE001 - TF 1 has no eager context to look at
            pass
    if "torch" in mods:
        try:
            if mods["torch"].cuda.is_initialized():
                found.append("torch cuda")
        except Exception:  # noqa: BLE001
            pass
    return found


def _blas():
    """Import the BLAS users first (numpy, and scipy.linalg, which Keras 3 on JAX imports), so
    their pools start under the watch before anything else does."""
    for name in ("numpy", "scipy.linalg"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def preload(spec):
    """Import what the environment's cells will import, and nothing that starts a device.
    Returns the thread count a fork may find: the process's own plus the fork-aware threads
    the imports started (see _ForkAware)."""
    compat.set_variables(spec.get("api"), spec.get("backend"), spec.get("device_kind", "cpu"),
                         int(spec.get("device_count", 1)))
    start = _threads()
    with _ThreadWatch() as watch, _ForkAware() as aware, compat.stack_bytecode():
        if spec.get("imports"):
            _blas()
        for name in spec.get("imports") or []:
            if name == "tensorflow.keras":  # a lazy proxy on TF 2.x: touch it so Keras really loads
                sys.modules["tensorflow"].keras.layers  # noqa: B018 - the access is the point
                continue
            watch.load(importlib.import_module, name)
    STARTERS[:] = watch.starters
    KEPT[:] = aware.judge()
    return start + sum(n for _, n in KEPT)


STARTERS = []  # (module, threads it started) found while preloading: named in a refusal
KEPT = []      # (library, threads): fork-aware threads the imports started; allowed, and said


class _ForkAware(object):
    """Threads a fork may leave behind, because their library prepares for it.

    fork copies only the calling thread, so a lock another thread holds stays locked in the
    child. Two libraries common in the stacks' environments look after that themselves with
    pthread_atfork handlers: OpenBLAS (numpy's and scipy's copies, and the copy OpenCV ships,
    which Keras imports when installed) stops its worker pool before a fork and starts a new
    one on first use; jemalloc (pyarrow's, which pandas imports) takes its locks around the fork
    and turns background purging off in the child. Their threads are recognised by what
    started them, seen the moment they start: the loading of an extension module that mapped
    an OpenBLAS library, or a thread jemalloc named jemalloc_bg_thd. Any other is refused.
    """

    def __init__(self):
        self.kept = []
        self._started = []   # (threads, libraries mapped meanwhile) per extension load that started some
        self._before = {}    # module name -> (threads, libraries) when its loading began
        self._charged = set()  # threads already charged to a load (an outer load sees an inner's too)

    def __enter__(self):
        self._loader = machinery.ExtensionFileLoader
        self._steps = (self._loader.create_module, self._loader.exec_module)
        aware, (create, execute) = self, self._steps

        # One extension load is create_module (dlopen, its libraries, their constructors) then
        # exec_module (the module's own body): one look before the first and one after the
        # second. A load whose exec never comes leaves its threads unexplained: refused.
        def create_module(loader, spec):
            aware._before[spec.name] = (_tasks(), _libraries())
            return create(loader, spec)

        def exec_module(loader, module):
            try:
                return execute(loader, module)
            finally:
                aware._after(module.__name__)

        self._loader.create_module, self._loader.exec_module = create_module, exec_module
        return self

    def _after(self, name):
        if name not in self._before:
            return
        tasks, libraries = self._before.pop(name)
        started = [t for t in _tasks() if t not in tasks and t not in self._charged]
        if started:
            self._charged.update(started)
            self._started.append((started, [lib for lib in _libraries() if lib not in libraries]))

    def judge(self):
        """Which of the started threads are fork-aware: judged once the imports are done, since a
        thread names itself only after it starts."""
        for started, mapped in self._started:
            jemalloc = [t for t in started if _thread_name(t) == "jemalloc_bg_thd"]
            if jemalloc:
                self.kept.append(("jemalloc", len(jemalloc)))
            blas = [os.path.basename(lib) for lib in mapped if "openblas" in os.path.basename(lib).lower()]
            rest = len(started) - len(jemalloc)
            if rest and blas:
                self.kept.append((blas[0], rest))
        return self.kept

    def __exit__(self, *exc):
        self._loader.create_module, self._loader.exec_module = self._steps
        return False


def _tasks():
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def _thread_name(task):
    try:
        with open("/proc/self/task/%s/comm" % task) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return ""


def _libraries():
    """The shared libraries mapped into this process (read only around extension loads)."""
    found = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.rstrip("\n").split(None, 5)[-1]
                if ".so" in path:
                    found.add(path)
    except (IOError, OSError):
        pass
    return found


class _ThreadWatch(object):
    """Which module's import started threads: a refusal that names them ("cv2 started 15",
    "pyarrow started 1": optional libraries that Keras imports when they are installed) tells
    the user what to leave out of the environment for warm cells, instead of only a count."""

    def __init__(self):
        self.starters = []
        self._stack = []

    def __enter__(self):
        self._original = builtins.__import__
        self._last = _threads()
        watch = self

        def traced(name, *args, **kwargs):
            return watch.load(watch._original, name, *args, **kwargs)

        builtins.__import__ = traced
        return self

    def load(self, importer, name, *args, **kwargs):
        """Import `name` with `importer`, and charge any thread started meanwhile to the outermost
        module of the import chain that is not the stack itself (that names the library)."""
        self._stack.append(name)
        try:
            return importer(name, *args, **kwargs)
        finally:
            chain = [n for n in self._stack if n and n.split(".")[0] not in _STACK_ROOTS]
            self._stack.pop()
            now = _threads()
            if now > self._last:
                self.starters.append(((chain[0] if chain else name).split(".")[0], now - self._last))
            self._last = now

    def __exit__(self, *exc):
        builtins.__import__ = self._original
        return False


_STACK_ROOTS = ("keras", "tensorflow", "tf_keras", "jax", "jaxlib", "torch", "numpy", "importlib")
