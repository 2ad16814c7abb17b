"""Programs ahead: a cell standing by traces and compiles the steps fit will run, before its
GPUs are handed to it, so that its first epoch starts with no trace and no compile.

Why: on a warm GPU run a cell that stood by trains the moment it is handed its GPUs, and then its
first epoch runs longer than a steady one by what JAX spends tracing Keras's train step and
loading its program from the compile cache: 1.1-1.7 s in each of seed 000's two-GPU cells,
0.5-1.1 s in each one-GPU cell (2 x H100), the largest part of what a warm cell still holds its
GPUs for. The follower waits anyway; it can do that while it waits. Nothing runs on a GPU for
it: JAX's ahead-of-time path (``jit(f).lower(args).compile()``) leaves the traced step, its
lowering and its executable in the in-process caches that fit's first call looks in, so that
call only dispatches.

What it must not bend:

- **The training.** Building the model's state ahead (its optimizer's and metrics' variables)
  makes fit skip the look it takes at one batch of its own shuffled data to build them, and
  that look draws a permutation from NumPy's global generator. So the state is built here
  through an iterator shuffled as fit's is: the same draw, taken earlier, and fit's epochs draw
  what they drew before. The batch the steps are traced with comes from an unshuffled iterator
  (no draw). tests/test_programs_ahead.py runs a cell with and without this and finds the same
  losses, bit for bit; a Keras that test has not passed on is left alone (`VERIFIED`).
- **The GPU it waits on.** A compile that misses the cache autotunes kernels by timing them on
  the GPU, where another cell is training: the kernels chosen could differ from a compile
  alone. So the host allows this only for a cell whose programs an earlier warm run put in the
  compile cache (the standby file's word, `protocol.STANDBY_PROGRAMS`), and the result records
  the cache hits and misses it saw.
- Anything it cannot do (another stack, data the cell does not batch itself, an error) leaves
  the cell as it was; ``timing.programs_ahead`` says what was done, or why not.
"""
import os
import time

from .protocol import STANDBY_FILE, STANDBY_PROGRAMS

VERIFIED = ("3.15",)  # Keras major.minor where tests/test_programs_ahead.py found the same losses


def _allowed(outdir):
    """The cell still stands by, and the host says its programs are in the compile cache."""
    try:
        with open(os.path.join(outdir, STANDBY_FILE)) as fh:
            return fh.read().strip() == STANDBY_PROGRAMS
    except (IOError, OSError):  # no standby file: it is not standing by (or was handed its GPUs)
        return False


def why_not(stack, fit):
    """Why this cell's steps are not prepared ahead, or None."""
    if stack.api != "keras3" or stack.backend != "jax":
        return "only Keras 3 on JAX prepares its programs ahead"
    version = str(getattr(stack.keras, "__version__", ""))
    if ".".join(version.split(".")[:2]) not in VERIFIED:
        return "Keras %s is not among those verified to train the same with its programs ahead (%s)" % (
            version, ", ".join(VERIFIED))
    if "y" not in fit or "batch_size" not in fit:
        return "its data is not arrays that fit batches"
    return None


def prepare(stack, model, fit, outdir, watch):
    """Trace and compile the train (and test) steps `fit` (fit's keyword arguments) will run.
    Returns what ``timing.programs_ahead`` records, or None where the cell is not standing by
    with the host's leave."""
    if not _allowed(outdir):
        return None
    why = why_not(stack, fit)
    if why:
        return {"skipped": why}
    began, hits, misses = time.time(), watch.hits, watch.misses
    out = {}
    try:
        out["programs"] = _compile(model, fit)
    except Exception as exc:  # noqa: BLE001 - Keras internals that moved: fit does it all, as always
        out["skipped"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    out["seconds"] = round(time.time() - began, 4)
    if watch.listening:
        out.update(cache_hits=watch.hits - hits, cache_misses=watch.misses - misses)
    return out


def _compile(model, fit):
    # the framework's own module (Keras 3 on JAX): only a cell that compiles ahead reaches it
    from keras.src.backend.jax.trainer import JAXEpochIterator

    def batches(x, y, shuffle):
        return JAXEpochIterator(x=x, y=y, batch_size=fit["batch_size"], shuffle=shuffle,
                                steps_per_execution=model.steps_per_execution)

    def first(iterator):
        for _, _, data in iterator:
            return data[0] if isinstance(data, (list, tuple)) else next(data)

    # fit's own look at a batch, and its draw (see the module's docstring)
    model._symbolic_build(iterator=batches(fit["x"], fit["y"], fit.get("shuffle", True)))
    done = []
    model.make_train_function()
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True, purge_model_variables=False)
    _jitted(model.train_function).lower(state, first(batches(fit["x"], fit["y"], False))).compile()
    done.append("train")
    val = fit.get("validation_data")
    if isinstance(val, tuple) and len(val) == 2:
        model.make_test_function()
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                     metrics_variables=True, purge_model_variables=False)
        _jitted(model.test_function).lower(state, first(batches(val[0], val[1], False))).compile()
        done.append("test")
    return done


def _jitted(function):
    """The jitted step inside Keras's step function (it calls it once per batch)."""
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(getattr(value, "lower", None)) and callable(getattr(value, "trace", None)):
            return value
    raise LookupError("no jitted step in %r" % (function,))
