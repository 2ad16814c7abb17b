"""Run one cell: import the stack, build, wrap, train, and record what happened.

What this process writes is evidence for the host, which decides the status:
``events.jsonl`` as it goes (so a crash keeps the epochs that finished) and
``workload.json`` at the end (only if Python is still in control). A death
that writes neither is classified on the host from the exit status.
"""
import faulthandler
import json
import os
import sys
import time
import traceback

from . import compat, confine, user
from .compat import Unsupported, metric
from .events import EventLog, write_json_atomic
from .protocol import EVENTS_FILE, EXIT_ERROR, EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, STANDBY_FILE, WORKLOAD_FILE

T_PROCESS = time.time()


def _epoch_logger(stack, log, record, n_train):
    Base = stack.callback_base()

    class EpochLogger(Base):
        """Times each epoch's training part: from epoch begin to the last batch's
        end, so validation is not counted in samples per second."""

        def on_train_begin(self, logs=None):
            if "first_epoch_begin" not in record["timing"]:
                record["timing"]["startup_seconds"] = round(time.time() - T_PROCESS, 4)
                record["timing"]["first_epoch_begin"] = time.time()

        def on_epoch_begin(self, epoch, logs=None):
            self._begin = time.time()
            self._last_batch = None

        def on_batch_end(self, batch, logs=None):
            self._last_batch = time.time()

        def on_train_batch_end(self, batch, logs=None):
            self._last_batch = time.time()

        def on_epoch_end(self, epoch, logs=None):
            end = time.time()
            logs = logs or {}
            train_end = self._last_batch or end
            seconds = train_end - self._begin
            entry = {
                "epoch": epoch + 1,
                "seconds": round(seconds, 4),
                "epoch_seconds": round(end - self._begin, 4),
                "samples_per_sec": round(n_train / seconds, 2) if seconds > 0 else None,
                "loss": metric(logs, "loss"),
                "accuracy": metric(logs, "accuracy"),
                "val_loss": metric(logs, "val_loss"),
                "val_accuracy": metric(logs, "val_accuracy"),
            }
            record["epochs"].append(entry)
            log.emit("epoch", **entry)

    return EpochLogger()


def _phase(record, name):
    """Seconds since the process began, at the end of each start-up phase."""
    record["timing"].setdefault("phases", {})[name] = round(time.time() - T_PROCESS, 4)


def _stand_by(outdir, log, record):
    """Wait here, prepared, while the host says the cell's GPUs are still another cell's (the
    standby file, harness/standby.py); nothing before this point trains. A no-op otherwise."""
    flag = os.path.join(outdir, STANDBY_FILE)
    if not os.path.exists(flag):
        return
    mark = time.time()
    log.emit("standby")
    while os.path.exists(flag):
        time.sleep(0.005)
    went = time.time()
    record["timing"]["standby"] = {"prepared_seconds": round(mark - T_PROCESS, 4),
                                   "waited_seconds": round(went - mark, 4)}
    log.emit("go", waited=round(went - mark, 4))


def _confine(record):
    """Confine this process's writes as the host asked (workloads/confine.py), before anything of
    the user's runs: a cell that cannot be confined as asked is `unsupported` and runs nothing."""
    try:
        applied = confine.from_environ()
    except confine.Unconfinable as exc:
        raise Unsupported("the confinement the harness asked for could not be applied: %s" % exc)
    if applied is not None:
        record["confinement"] = applied


def _idle(workload, log):
    """Hold the cell's devices for a while and finish: scheduling without a framework."""
    deadline = time.time() + float(workload.get("seconds", 1.0))
    while time.time() < deadline:
        log.emit("idle")
        time.sleep(min(0.5, max(0.0, deadline - time.time())))


def _train(spec, log, record, outdir):
    workload = spec["workload"]
    if workload["model"] in ("script", "user"):
        user.prepare_environ(spec, outdir)
        if workload["model"] == "script":  # the user's script is the cell: no stack imported here
            _stand_by(outdir, log, record)  # where its GPU work begins is the script's own business
            user.run_script(spec, log, record, outdir)
            return
    if workload["model"] == "fault":  # before any third-party import: a bare Python is enough
        # deferred: faults imports ctypes at its top, which only a planted fault needs
        from . import faults
        faults.plant(workload["fault"], log, workload.get("message"))
    if workload["model"] == "idle":
        _stand_by(outdir, log, record)
        _idle(workload, log)
        return
    # the stack's side, which a fault, idle or script cell never imports: models imports numpy
    # (workloads/data.py), and a cell compiles each module from source (its bytecode is off)
    from . import ahead, engagement, models, wrappers
    from .warmth import Watch
    stack = compat.load(spec)
    warmth = Watch(stack)
    record["timing"]["import_seconds"] = round(time.time() - T_PROCESS, 4)
    _phase(record, "imports")
    record["seen"] = stack.seen()
    _phase(record, "devices")
    stack.check_keras(spec)  # the Keras asked is the one that runs, or the cell is an error
    log.emit("devices", devices=record["seen"]["devices"], gpus=record["seen"]["gpus"])
    trained_from = int(spec.get("training_seed", spec["seed"]))  # the data is always drawn with "seed"
    stack.seed(trained_from)
    par = spec["parallelism"]
    plan = wrappers.Plan(stack, par, trap=workload.get("trap"))
    record["placement"] = plan.devices
    with plan.scope():
        if workload["model"] == "user":
            model, (train, val), loss = user.factory(stack, workload, spec)
        else:
            model, (train, val), loss = models.build(stack, workload, int(spec["seed"]))
        _phase(record, "data_and_model")
        record["parameters"] = int(model.count_params())
        if workload.get("diverge"):  # `harness diverge`: the model layer by layer, not a training run
            from . import layerwise  # a diverge cell's only: the others need not compile it
            _stand_by(outdir, log, record)
            layerwise.run(stack, plan, spec, model, train, loss, log, record, outdir)
            return
        trainable = plan.wrap(model)
        trainable.compile(optimizer=stack.adam(float(workload.get("learning_rate", 0.001))),
                          loss=plan.loss(loss), metrics=["accuracy"], **plan.compile_options)
    _phase(record, "compiled")
    batch = int(spec["batch_size"])
    fit, rows, probe = _inputs(stack, train, val, batch, par.get("feed", "arrays"), trained_from)
    programs = ahead.prepare(stack, trainable, fit, outdir, warmth)  # only while it stands by
    if programs is not None:
        record["timing"]["programs_ahead"] = programs
    _stand_by(outdir, log, record)
    record["samples"] = {"train": rows[0], "validation": rows[1]}
    log.emit("fit", parameters=record["parameters"], samples=record["samples"],
             feed="user" if _user_feed(train) else par.get("feed", "arrays"))
    fit.update(epochs=int(spec["epochs"]), verbose=0, callbacks=[_epoch_logger(stack, log, record, rows[0])])
    warmth.fit_begins()
    try:
        trainable.fit(**fit)
    except Exception as exc:  # noqa: BLE001 - re-raised, explained where the cell explains it
        why = indivisible(exc, par, batch, rows[0], rows[1])
        if why is None:
            raise
        raise BatchNotDivisible(why)  # the framework's error stays in the chain, as the context
    _phase(record, "trained")
    record["engagement"] = engagement.collect(stack, plan, trainable, probe, len(probe))
    last = record["epochs"][-1] if record["epochs"] else {}
    record["metrics"] = dict((k, last.get(k)) for k in ("loss", "accuracy", "val_loss", "val_accuracy"))
    record["warmth"] = warmth.report()


def _user_feed(data):
    return isinstance(data, user.Feed)


def _inputs(stack, train, val, batch, feed, seed):
    """fit's data arguments, the rows of a pass (training, validation) and a batch of x for
    the engagement witness. Arrays are batched by the cell (through tf.data with `feed:
    dataset`); the user's own feed (user.Feed) goes to fit as it is, batched as the user
    batched it."""
    if _user_feed(train):
        fit = {"x": train.source}
        rows, probe = train.rows, train.first_x
    else:
        x, y = train
        rows, probe = int(len(x)), x[:batch]
        if feed == "dataset":
            fit = {"x": stack.dataset(x, y, batch, seed, shuffle=True)}
        else:
            fit = {"x": x, "y": y, "batch_size": batch, "shuffle": True}
    if _user_feed(val):
        fit["validation_data"], val_rows = val.source, val.rows
    elif feed == "dataset" and not _user_feed(train):
        fit["validation_data"], val_rows = stack.dataset(val[0], val[1], batch, seed, shuffle=False), int(len(val[0]))
    else:
        fit["validation_data"], val_rows = tuple(val), int(len(val[0]))
    return fit, (rows, val_rows), probe


class BatchNotDivisible(Exception):
    """A data-parallel fit failed because a batch cannot be split evenly over the devices.

    JAX says so as an IndivisibleError whose text names the sharding of one input
    tensor, so one cause became a family per tensor rank (the GRU's 3-D input, the
    convnet's 4-D one) and the text never said which batch or why. The cell knows:
    its rows, batch and devices give the reason, in words, with the numbers.
    """


def indivisible(exc, par, batch, rows_train, rows_val):
    """Why a data_parallel fit's `exc` happened, from the cell; None when it is not that."""
    devices = int(par.get("devices") or 1)
    if type(exc).__name__ != "IndivisibleError" or par.get("wrapper") != "data_parallel" or devices < 2:
        return None
    if batch % devices:
        return "a batch of %d rows is not divisible over %d devices" % (batch, devices)
    for what, rows in (("training", rows_train), ("validation", rows_val)):
        last = rows % batch
        if last % devices:
            return ("the last %s batch of %d rows is not divisible over %d devices (%d %s rows, batch %d)"
                    % (what, last, devices, rows, what, batch))
    return None


def _type_name(exc):
    return type(exc).__module__ + "." + type(exc).__name__


def _text(exc):
    try:
        return str(exc)
    except Exception as failed:  # noqa: BLE001 - a __str__ that raises must not hide the error
        return "<str() failed: %s>" % type(failed).__name__


def _clip(text, limit=6000):
    """Keep a long message's head and tail: TF puts the op's own error last, after a stack."""
    if len(text) <= limit:
        return text
    return text[:limit // 3] + "\n[... %d characters ...]\n" % (len(text) - limit) + text[-(limit * 2 // 3):]


def _chain(exc, limit=10):
    """The exception and what it was raised from, outermost first: `link` says how each is tied
    to the next ("cause": raise ... from; "context": raised while handling it). The host picks
    the root cause from this, past wrappers' re-raises."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen and len(chain) < limit:
        seen.add(id(exc))
        if exc.__cause__ is not None:
            link, inner = "cause", exc.__cause__
        elif exc.__context__ is not None and not exc.__suppress_context__:
            link, inner = "context", exc.__context__
        else:
            link, inner = None, None
        chain.append({"type": _type_name(exc), "message": _clip(_text(exc)), "link": link})
        exc = inner
    return chain


def _user_where(spec, exc):
    if spec["workload"].get("code") is None:
        return None
    return getattr(exc, "where", None) or user.where_of(exc, user.code_dir(spec))


def main(argv):
    faulthandler.enable()
    if len(argv) != 2:
        sys.stderr.write("usage: python -m workloads SPEC.json OUTDIR\n")
        return EXIT_USAGE
    spec_path, outdir = argv[0], os.path.abspath(argv[1])  # a user's script may change the directory
    with open(spec_path) as fh:
        spec = json.load(fh)
    log = EventLog(os.path.join(outdir, EVENTS_FILE))
    affinity = getattr(os, "sched_getaffinity", None)
    log.emit("start", cell=spec["cell"], pid=os.getpid(),
             cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
             cpus=len(affinity(0)) if affinity else None)
    record = {"cell": spec["cell"], "seen": {}, "epochs": [], "metrics": {}, "timing": {},
              "outcome": "ok", "error": None}
    code = EXIT_OK
    try:
        _confine(record)
        _train(spec, log, record, outdir)
    except Exception as exc:  # noqa: BLE001 - every exception is evidence, recorded below
        if isinstance(exc, Unsupported):
            record["outcome"] = "unsupported"
            record["reason"] = str(exc)
            code = EXIT_UNSUPPORTED
        else:
            tb = traceback.format_exc()
            sys.stderr.write(tb)
            record["outcome"] = "error"
            record["error"] = {"type": _type_name(exc), "message": _text(exc), "traceback": tb[-6000:],
                               "chain": _chain(exc)}
            where = _user_where(spec, exc)
            if where:  # the user's own file and line, not the harness's
                record["error"]["where"] = where
            code = EXIT_ERROR
    record["timing"]["total_seconds"] = round(time.time() - T_PROCESS, 4)
    record["timing"].pop("first_epoch_begin", None)
    log.emit("end", outcome=record["outcome"])
    log.close()
    write_json_atomic(os.path.join(outdir, WORKLOAD_FILE), record)
    sys.stdout.flush()
    sys.stderr.flush()
    return code
