"""``python -m workloads.selfcheck --framework tensorflow|jax|torch``: can this GPU environment run?

Run at build time and before a matrix spends time on a GPU environment, so
that a broken CUDA stack is one `unavailable` line with the reason instead of
hundreds of cells failing the same way. Prints one JSON object (the last line
of stdout) and exits 0 when the environment is usable, 1 when it is not.

Without a GPU it checks what can be checked on any host: which CUDA and cuDNN
the framework was built for, that the libraries of exactly those versions
are present (from the nvidia-* wheels, the image's /usr/local/cuda, or the
loader's path), that they load (``ctypes.CDLL``), which versions they report,
and that the framework imports. With a GPU (a driver present) it also runs
one matmul, one convolution and one cuDNN RNN step; the caller's timeout
bounds them, since a CUDA build too old for the GPU can hang as well as fail.

Standard library only at module level: the framework is imported inside the
checks, so a broken framework is a finding, not a crash of the check. What
can be proved without a GPU (the build, the libraries) is workloads/cudalibs.py.
"""
import argparse
import glob
import json
import os
import platform
import sys
import time
import traceback

from .compat import nvidia_driver, stack_bytecode
from .cudalibs import FAMILIES, built_for, check_libraries, first_line


def _older(found, built):
    """'9.1.0' against '9.8.0' -> True; compared to the precision of the build info ('8' = any 8.x)."""
    def parts(v):
        return [int(p) if p.isdigit() else 0 for p in str(v).split(".")]
    wanted = parts(built)
    return parts(found)[:len(wanted)] < wanted


def _distribution_versions(prefixes):
    """Installed pip distributions whose name starts with one of the prefixes."""
    out = {}
    for folder in sys.path:
        for info in glob.glob(os.path.join(folder or ".", "*.dist-info")):
            base = os.path.basename(info)[:-len(".dist-info")]
            name, _, version = base.partition("-")
            key = name.lower().replace("_", "-")
            if key.startswith(prefixes) and key not in out:
                out[key] = version
    return out


# -- the framework --------------------------------------------------------------
def _import(framework):
    with stack_bytecode():  # the check is the environment's first import: its bytecode serves every cell
        if framework == "tensorflow":
            import tensorflow as module  # the framework, here: a broken one is a finding, not a crash
        elif framework == "jax":
            import jax as module  # the framework, here: a broken one is a finding, not a crash
        else:
            import torch as module  # the framework, here: a broken one is a finding, not a crash
    return module


def _tf_gpu_ops(tf):
    """matmul, conv2d and one cuDNN GRU step on the first GPU."""
    results = {}
    tf1 = not hasattr(tf, "function")

    def run(fn):
        if tf1:
            with tf.Graph().as_default():
                with tf.device("/gpu:0"):
                    out = fn()
                config = tf.ConfigProto(allow_soft_placement=False)
                config.gpu_options.allow_growth = True
                with tf.Session(config=config) as sess:
                    sess.run(tf.global_variables_initializer())
                    return sess.run(out)
        with tf.device("/GPU:0"):
            return fn().numpy()

    def matmul():
        x = tf.ones((256, 256))
        return tf.reduce_sum(tf.matmul(x, x))

    def conv():
        x = tf.ones((2, 16, 16, 3))
        k = tf.ones((3, 3, 3, 8))
        return tf.reduce_sum(tf.nn.conv2d(x, k, strides=[1, 1, 1, 1], padding="SAME"))

    def rnn():
        x = tf.ones((2, 4, 3))
        if tf1:
            layer = tf.keras.layers.CuDNNGRU(8)
        else:  # TF 2's GRU takes the cuDNN kernel on a GPU with its default arguments
            layer = tf.keras.layers.GRU(8)
        return tf.reduce_sum(layer(x))

    for name, fn in (("matmul", matmul), ("conv", conv), ("cudnn_rnn", rnn)):
        results[name] = _timed(lambda: run(fn))
    return results


def _jax_gpu_ops(jax):
    # the framework's own module, imported where the framework is (_import has imported jax)
    import jax.numpy as jnp
    gpu = jax.devices("gpu")[0]

    def matmul():
        x = jax.device_put(jnp.ones((256, 256)), gpu)
        return float(jnp.sum(x @ x))

    def conv():
        x = jax.device_put(jnp.ones((2, 3, 16, 16)), gpu)
        k = jax.device_put(jnp.ones((8, 3, 3, 3)), gpu)
        return float(jnp.sum(jax.lax.conv(x, k, (1, 1), "SAME")))

    def rnn():
        from jax.experimental import rnn as jrnn  # cuDNN's RNN, as jaxlib exposes it
        key = jax.random.PRNGKey(0)
        hidden, features, batch, steps = 8, 3, 2, 4
        weights = jax.device_put(jrnn.init_lstm_weight(key, features, hidden, 1, False), gpu)
        x = jax.device_put(jnp.ones((batch, steps, features)), gpu)
        h0 = jax.device_put(jnp.zeros((1, batch, hidden)), gpu)
        lengths = jax.device_put(jnp.full((batch,), steps, dtype=jnp.int32), gpu)
        y, _, _ = jrnn.lstm(x, h0, h0, weights, lengths, features, hidden, 1, 0.0, False)
        return float(jnp.sum(y))

    return {"matmul": _timed(matmul), "conv": _timed(conv), "cudnn_rnn": _timed(rnn)}


def _torch_gpu_ops(torch):
    dev = torch.device("cuda:0")

    def matmul():
        x = torch.ones(256, 256, device=dev)
        return float((x @ x).sum())

    def conv():
        return float(torch.nn.functional.conv2d(torch.ones(2, 3, 16, 16, device=dev),
                                                torch.ones(8, 3, 3, 3, device=dev), padding=1).sum())

    def rnn():
        layer = torch.nn.GRU(3, 8, batch_first=True).to(dev)
        return float(layer(torch.ones(2, 4, 3, device=dev))[0].sum())

    return {"matmul": _timed(matmul), "conv": _timed(conv), "cudnn_rnn": _timed(rnn)}


def _gpus(framework, module):
    if framework == "tensorflow":
        if hasattr(module, "config") and hasattr(module.config, "list_physical_devices"):
            return [d.name for d in module.config.list_physical_devices("GPU")]
        # the framework's own module (TF 1 lists its devices only there), imported by _import
        from tensorflow.python.client import device_lib
        return [d.name for d in device_lib.list_local_devices() if d.device_type == "GPU"]
    if framework == "jax":
        try:
            return [str(d) for d in module.devices("gpu")]
        except RuntimeError:
            return []
    return ["cuda:%d" % i for i in range(module.cuda.device_count())]


def _timed(fn):
    started = time.time()
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        return {"ok": False, "error": "%s: %s" % (type(exc).__name__, first_line(exc)),
                "seconds": round(time.time() - started, 3)}
    return {"ok": True, "value": float(value), "seconds": round(time.time() - started, 3)}


GPU_OPS = {"tensorflow": _tf_gpu_ops, "jax": _jax_gpu_ops, "torch": _torch_gpu_ops}


def selfcheck(framework, gpu="auto"):
    report = {"framework": framework, "python": platform.python_version(), "driver": nvidia_driver(),
              "problems": [], "notes": []}
    problems = report["problems"]
    report["packages"] = _distribution_versions((framework, "nvidia-", "jax", "jaxlib", "keras"))
    module = None
    try:
        module = _import(framework)
        report["imported"] = True
        report["version"] = getattr(module, "__version__", None)
    except Exception as exc:  # noqa: BLE001
        line = first_line(exc)
        name = type(exc).__name__
        message = line if line.startswith(name + ":") else "%s: %s" % (name, line)
        report["imported"] = False
        if "libcuda.so" in message and report["driver"] is None:
            report["notes"].append("import needs the NVIDIA driver's libcuda.so.1, which GPU hosts provide: %s"
                                   % message)
        else:
            problems.append("import %s failed: %s" % (framework, message))
            report["traceback"] = traceback.format_exc()[-3000:]
    built, why = built_for(framework, module)
    report["built_for"] = built
    if built is None:
        problems.append("no CUDA build information: %s" % why)
    elif not built.get("is_cuda_build"):
        problems.append("%s is not a CUDA build" % framework)
    if built and built.get("is_cuda_build"):
        libraries, dirs = check_libraries(FAMILIES[framework], built)
        report["libraries"] = libraries
        report["searched"] = dirs
        for item in libraries:
            built_version = {"cudart": built.get("cuda"), "cudnn": built.get("cudnn")}.get(item["family"])
            if item["loaded"] and built_version and item.get("version") and \
                    _older(item["version"], built_version):
                problems.append("%s is %s, older than the %s %s was built for" % (
                    item["wanted"], item["version"], built_version, framework))
            if item["path"] and not item["loaded"]:
                problems.append("%s does not load: %s" % (item["wanted"], item["error"]))
        missing = [item["wanted"] for item in libraries if not item["path"]]
        if missing:
            problems.insert(0, "not found: %s (looked in %s and the loader's cache)" % (
                ", ".join(missing), ", ".join(dirs)))
    report["gpus"] = []
    if gpu != "no" and report["driver"] is not None and module is not None:
        try:
            report["gpus"] = _gpus(framework, module)
        except Exception as exc:  # noqa: BLE001
            problems.append("listing GPUs failed: %s" % first_line(exc))
        if not report["gpus"]:
            problems.append("an NVIDIA driver (%s) is present but %s sees no GPU" % (report["driver"], framework))
        else:
            report["gpu_ops"] = GPU_OPS[framework](module)
            for name, outcome in sorted(report["gpu_ops"].items()):
                if not outcome["ok"]:
                    problems.append("GPU %s failed: %s" % (name, outcome["error"]))
    report["ok"] = not problems
    return report


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m workloads.selfcheck")
    parser.add_argument("--framework", choices=sorted(FAMILIES), required=True)
    parser.add_argument("--gpu", choices=("auto", "no"), default="auto",
                        help="auto: run the GPU operations when a driver is present")
    args = parser.parse_args(argv)
    report = selfcheck(args.framework, args.gpu)
    sys.stdout.write("\n" + json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
