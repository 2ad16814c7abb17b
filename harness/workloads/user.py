"""The user's own code, inside the cell: a model factory, or a script that is the cell.

The host stages the user's folder beside this package (``<root>/user/<hash>/``,
``harness/usercode.py``); here it is imported or run with the environment's
own Python. Whatever goes wrong in it is reported with the user's file and
line (``where``), found from the user's own frames, never the harness's.

Python 3.5 syntax; the standard library and numpy only (the stack is reached
through ``compat``).
"""
import importlib
import inspect
import json
import os
import platform
import runpy
import sys
import traceback

from . import installed
from .protocol import ENV_INPUT, ENV_METRICS, ENV_OUTPUT, ENV_SPEC, INPUTS_DIR, METRICS_FILE, OUTPUT_DIR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds `workloads` and `user`


class UserCodeError(Exception):
    """The user's code broke a rule the harness can name (no model returned, data of the
    wrong shape); `where` is the user's file and line to look at."""

    def __init__(self, message, where=None):
        Exception.__init__(self, message)
        self.where = where


def code_dir(spec):
    return os.path.join(ROOT, spec["workload"]["code"]["dir"])


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def where_of(exc, folder):
    """'file.py:LINE in function' of the deepest frame of the user's code in the exception's
    traceback (then in what it was raised from), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, SyntaxError) and exc.filename and _inside(exc.filename, folder):
            return "%s:%s" % (os.path.relpath(os.path.realpath(exc.filename), os.path.realpath(folder)),
                              exc.lineno)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f[0], folder)]
        if frames:
            filename, line, function = frames[-1][0], frames[-1][1], frames[-1][2]
            rel = os.path.relpath(os.path.realpath(filename), os.path.realpath(folder))
            return "%s:%d in %s" % (rel, line, function)
        exc = exc.__cause__ or exc.__context__
    return None


def _defined_at(fn, folder):
    """Where the user defined `fn`, for an error about what it returned."""
    try:
        code = fn.__code__
        return "%s:%d in %s" % (os.path.relpath(os.path.realpath(code.co_filename), os.path.realpath(folder)),
                                code.co_firstlineno, fn.__name__)
    except (AttributeError, ValueError):
        return None


def prepare_environ(spec, outdir):
    """The variables the user's code reads: its output folder, the producers' files, the
    metrics file and the spec. Set in this process, so a script sees them in os.environ."""
    output = os.path.join(outdir, OUTPUT_DIR)
    if not os.path.isdir(output):
        os.makedirs(output)
    os.environ[ENV_OUTPUT] = output
    os.environ[ENV_METRICS] = os.path.join(outdir, METRICS_FILE)
    os.environ[ENV_SPEC] = os.path.join(outdir, "spec.json")
    for i, need in enumerate([n for n in spec.get("needs") or [] if n.get("files", True)]):
        path = os.path.join(outdir, INPUTS_DIR, need["as"])
        name = "".join(ch if ch.isalnum() else "_" for ch in need["as"].upper())
        os.environ[ENV_INPUT + "_" + name] = path
        if i == 0:
            os.environ[ENV_INPUT] = path


def reported_metrics(outdir):
    """What the user's code reported (JSON lines {"name", "value"}): the last number per name,
    and every line that was not one (kept as notes, never a crash)."""
    values, notes = {}, []
    path = os.path.join(outdir, METRICS_FILE)
    if not os.path.exists(path):
        return values, notes
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                name, value = item["name"], item["value"]
            except (ValueError, KeyError, TypeError):
                notes.append("line %d is not {\"name\": ..., \"value\": NUMBER}" % n)
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(name, str):
                notes.append("line %d: %r is not a named number" % (n, line.strip()[:80]))
                continue
            values[name] = value
    return values, notes


def _entry(folder, entry):
    module, _, attr = entry.partition(":")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod = importlib.import_module(module)
    fn = getattr(mod, attr, None)
    if fn is None:
        raise UserCodeError("%s has no '%s'" % (module, attr), "%s" % os.path.relpath(
            os.path.realpath(mod.__file__), os.path.realpath(folder)))
    return fn


def _call(fn, stack, params, batch_size=None, entry=None, folder=None):
    """Call a factory with the matrix's params, and with the cell's Keras module as `keras`
    when it asks for one (the portable way: the same factory on standalone Keras 2.2,
    tf.keras and Keras 3), and the cell's batch size as `batch_size` when it asks (a data
    function that batches its own feed).

    A workload's `params` go to both build() and data(); a function that takes neither a
    param by name nor **params is told so by name here, before Python's bare TypeError
    ("got an unexpected keyword argument") can hide which rule it broke."""
    kwargs = dict(params)
    try:
        accepted = inspect.signature(fn).parameters
        known = True
    except (TypeError, ValueError):  # a builtin or a C callable: no signature to read, let the call say
        accepted, known = {}, False
    if known and not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        refused = sorted(k for k in kwargs if k not in accepted or accepted[k].kind == accepted[k].POSITIONAL_ONLY)
        if refused:
            name = entry or getattr(fn, "__name__", "the function")
            raise UserCodeError(
                "%s takes no parameter %s, but the workload's params (%s) go to both build() and data(): "
                "accept it by name (def %s(..., %s=None)) or take the rest as **params"
                % (name, ", ".join("'%s'" % k for k in refused), ", ".join(sorted(kwargs)),
                   getattr(fn, "__name__", "fn"), refused[0]),
                _defined_at(fn, folder) if folder else None)
    if "keras" in accepted and "keras" not in kwargs:
        kwargs["keras"] = stack.keras
    if batch_size is not None and "batch_size" in accepted and "batch_size" not in kwargs:
        kwargs["batch_size"] = batch_size
    return fn(**kwargs)


def _default_loss(model, y, where):
    """The loss when neither the matrix (`loss:`) nor the factory (a compiled model) named one:
    categorical cross-entropy for one-hot labels, its sparse form for class ids (integers, of
    shape (n,) or (n, 1)) under an output of more than one class -- what any Keras would fail
    on with "`target` and `output` must have the same shape". Only labels that are whole
    numbers within the output's classes are taken as ids; other labels that do not fit the
    output are refused here with the key that settles it."""
    import numpy as np  # deferred: a script cell imports this module, and numpy is the stack's
    out = getattr(model, "output_shape", None)
    if y is None or not isinstance(out, tuple) or not out or not isinstance(out[-1], int):
        return "categorical_crossentropy"
    classes = out[-1]
    y = np.asarray(y)
    ids = y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)
    if classes > 1 and ids and y.size and (y.dtype.kind in "iu" or (y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0))):
        if y.min() >= 0 and y.max() < classes:
            return "sparse_categorical_crossentropy"
        raise UserCodeError("the labels look like class ids (%s to %s) but the model has %d outputs; set the "
                            "workload's 'loss:' if they are not" % (y.min(), y.max(), classes), where)
    fits = len(y.shape) == len(out) and all(w is None or w == h for w, h in zip(out[1:], y.shape[1:]))
    if y.ndim >= 1 and not fits and not (ids and classes == 1):
        raise UserCodeError("the labels have shape %s and the model's output %s, and no loss was named: "
                            "set the workload's 'loss:' (e.g. mse) or return labels of the output's shape"
                            % (tuple(y.shape), out), where)
    return "categorical_crossentropy"


class Feed(object):
    """The user's own batched data, given to fit as it is: a tf.data.Dataset, or a Keras
    Sequence (PyDataset on Keras 3). `rows` is what one pass yields (counted once before
    fit, so samples per second mean what they mean for arrays); `first_x` is the first
    batch's input, the engagement witness's probe and the shape check's subject."""

    def __init__(self, source, rows, first_x):
        self.source, self.rows, self.first_x = source, rows, first_x


def _is_feed(value):
    """A dataset (an element_spec; output_types on TF 1.x) or a Sequence (indexable with a
    length, no shape)."""
    if hasattr(value, "element_spec") or hasattr(value, "output_types"):
        return True
    return (hasattr(value, "__getitem__") and hasattr(value, "__len__") and not hasattr(value, "shape")
            and not isinstance(value, (tuple, list, dict, str, bytes)))


def _is_part(value):
    """Whether a data function's value is one part (training or validation: a pair, a feed, or
    a generator to refuse), not the x or y of (x, y)."""
    return isinstance(value, (tuple, list)) or _is_feed(value) or hasattr(value, "__next__")


def _batches(source):
    if hasattr(source, "element_spec"):
        for batch in source:
            yield batch
    else:
        for i in range(len(source)):
            yield source[i]


def _first_leaf(value):
    """The first array of a batch's input (x may be a list or mapping of inputs)."""
    while isinstance(value, (tuple, list, dict)):
        if not value:
            return None
        value = value[sorted(value)[0]] if isinstance(value, dict) else value[0]
    return value


def _feed(source, what, where):
    """A Feed for the user's `source`, its rows counted in one pass."""
    if hasattr(source, "__next__") and not hasattr(source, "__len__"):
        raise UserCodeError("the %s data is a generator, which has no length: return a keras.utils.Sequence "
                            "(PyDataset on Keras 3) or a tf.data.Dataset" % what, where)
    if hasattr(source, "output_types") and not hasattr(source, "element_spec"):
        raise UserCodeError("the %s data is a TF 1.x tf.data.Dataset: a dataset feed is read eagerly (TF 2, "
                            "Keras 3); on TF 1.x return arrays or a keras.utils.Sequence" % what, where)
    import numpy as np  # deferred: a script cell imports this module, and numpy is the stack's
    rows, first = 0, None
    try:
        for batch in _batches(source):
            x = _first_leaf(batch[0] if isinstance(batch, (tuple, list)) else batch)
            if x is None:
                raise UserCodeError("a %s batch has no input" % what, where)
            x = np.asarray(x)
            if first is None:
                first = x
            rows += len(x)
    except RuntimeError as exc:  # a dataset outside eager execution (TF 1.15 with eager off)
        if not hasattr(source, "element_spec") or "eager" not in str(exc):
            raise
        raise UserCodeError("the %s tf.data.Dataset cannot be read eagerly here (%s); on TF 1.x return arrays "
                            "or a keras.utils.Sequence" % (what, exc), where)
    if first is None:
        raise UserCodeError("the %s data yields no batch" % what, where)
    return Feed(source, rows, first)


def _as_splits(data, where):
    """(train, validation) from what a data function returned: ((x, y), (x_val, y_val)), a
    mapping with "train" and "validation", or (x, y) alone (the last 20% become validation).
    Each of train and validation may instead be a batched feed (tf.data.Dataset, Sequence /
    PyDataset): a Feed, passed to fit as it is."""
    import numpy as np  # deferred: a script cell imports this module, and numpy is the stack's
    if isinstance(data, dict):
        if "train" not in data or "validation" not in data:
            raise UserCodeError("data returned a mapping without 'train' and 'validation'", where)
        data = (data["train"], data["validation"])
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise UserCodeError("data returned %s; expected ((x, y), (x_val, y_val)), (x, y), or a feed "
                            "(tf.data.Dataset, Sequence) for each" % type(data).__name__, where)
    first, second = data
    if _is_part(first) and _is_part(second):
        train, val = first, second
    else:
        x, y = np.asarray(first), np.asarray(second)
        n_val = int(round(len(x) * 0.2))
        train, val = (x[:len(x) - n_val], y[:len(y) - n_val]), (x[len(x) - n_val:], y[len(y) - n_val:])
    out = []
    for what, pair in (("training", train), ("validation", val)):
        if not isinstance(pair, (tuple, list)):
            out.append(_feed(pair, what, where))
            continue
        if len(pair) != 2:
            raise UserCodeError("the %s data is not a pair (x, y)" % what, where)
        x, y = np.asarray(pair[0]), np.asarray(pair[1])
        if x.ndim == 0 or len(x) == 0:
            raise UserCodeError("the %s x is empty" % what, where)
        if len(x) != len(y):
            raise UserCodeError("the %s x has %d rows and y has %d" % (what, len(x), len(y)), where)
        out.append((x, y))
    return out[0], out[1]


def _shape(value):
    try:
        return tuple(value)
    except TypeError:
        return None


def factory(stack, workload, spec):
    """`model: user`: (model, (train, validation), loss) from the user's build and data."""
    folder = code_dir(spec)
    params = workload.get("params") or {}
    build = _entry(folder, workload["build"])
    model = _call(build, stack, params, entry=workload["build"], folder=folder)
    if model is None or not hasattr(model, "fit") or not hasattr(model, "count_params"):
        raise UserCodeError("%s returned %s, not a Keras model" % (workload["build"], type(model).__name__),
                            _defined_at(build, folder))
    data_fn = _entry(folder, workload["data"])
    where = _defined_at(data_fn, folder)
    train, val = _as_splits(_call(data_fn, stack, params, int(spec["batch_size"]), entry=workload["data"],
                                  folder=folder), where)
    x = train.first_x if isinstance(train, Feed) else train[0]
    wanted = _shape(getattr(model, "input_shape", None) or ())
    if wanted and not isinstance(wanted[0], tuple):  # one input: check its shape past the batch axis
        have = tuple(x.shape[1:])
        if len(have) != len(wanted) - 1 or any(w is not None and w != h for w, h in zip(wanted[1:], have)):
            raise UserCodeError("%s gave x of shape %s, but the model built by %s takes %s"
                                % (workload["data"], tuple(x.shape), workload["build"], wanted), where)
    own = getattr(model, "loss", None)  # a model the factory compiled keeps its loss (a name)
    loss = workload.get("loss") or (own if isinstance(own, str) else None) or \
        _default_loss(model, None if isinstance(train, Feed) else train[1], where)
    return model, (train, val), loss


def _seen_without_importing(spec):
    """The stack a script cell ran on, with the fields and values a built-in cell of the same
    environment records (``installed.stack_versions``), so the report labels the environment
    one way. Nothing is imported here: a script that did not import TensorFlow must not pay
    for it, and a broken stack must not hide the script's end."""
    seen = {"python": platform.python_version()}
    try:
        seen.update(installed.stack_versions(spec))
    except Exception as exc:  # noqa: BLE001 - a version note must not fail the cell: say what failed
        seen["versions_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
    for name in ("jax", "torch"):
        mod = sys.modules.get(name)
        if mod is not None:
            seen[name] = getattr(mod, "__version__", None)
    return seen


class ScriptExit(Exception):
    """A script called sys.exit with a failure status."""

    def __init__(self, code, where):
        Exception.__init__(self, "the script exited with status %s" % (code,))
        self.code, self.where = code, where


def run_script(spec, log, record, outdir):
    """`script:`: run the user's script as __main__, with its arguments, in the cell's folder.
    A SystemExit with a failure status is an error of the script; 0 / None is ok."""
    workload = spec["workload"]
    folder = code_dir(spec)
    path = os.path.join(folder, workload["script"])
    args = [str(a) for a in workload.get("args") or []]
    log.emit("script", script=workload["script"], args=args)
    sys.argv = [path] + args
    sys.path.insert(0, os.path.dirname(path))
    os.chdir(outdir)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            if not isinstance(code, int):
                sys.stderr.write("%s\n" % (code,))
            raise ScriptExit(code, where_of(exc, folder)) from None
    finally:
        record["seen"] = _seen_without_importing(spec)
        values, notes = reported_metrics(outdir)
        record["metrics"] = values
        if notes:
            record["metric_notes"] = notes[:20]
