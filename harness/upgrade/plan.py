"""The matrix an upgrade runs: the user's pins as one environment, their script or model factory
as the workload, and, for a package that moves with companions (TensorFlow with TensorBoard and
Keras 2, JAX with jaxlib), an environment with those left open, so that a newer release is not
held to a companion pinned for the old one. Written to a file beside the report, so that every
command the report gives (`bisect`, `reduce`, `run`) runs the very cells it ran."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.errors import UserError
from harness.upgrade.project import STACK, Pins

BASELINE = "baseline"
# What a release of the key is resolved with, not held at the old pin: its companions
COMPANIONS = {"tensorflow": ("tensorboard", "tensorflow-estimator", "tensorflow-io-gcs-filesystem", "keras",
                             "tf-keras", "ml-dtypes", "tensorboard-data-server"),
              "tensorflow-cpu": ("tensorboard", "tensorflow-estimator", "tensorflow-io-gcs-filesystem", "keras",
                                 "tf-keras", "ml-dtypes", "tensorboard-data-server"),
              "jax": ("jaxlib",), "torch": ("torchvision", "torchaudio", "triton")}
TIMEOUTS = {"wall": 900, "progress": 600}


def environment(pins: Pins, python: str, searched: list[str]) -> dict:
    """The baseline environment: TensorFlow and Keras in the matrix's own fields (so a release
    search moves them as a range would), everything else as `packages:` pins. Of a lock, only the
    ML stack and the packages searched are held; the rest resolves with them."""
    p = dict(pins.pins)
    if pins.lock:
        p = {n: v for n, v in p.items() if n in STACK or n in searched}
    env: dict = {"name": BASELINE, "python": python}
    tf = next((n for n in ("tensorflow", "tensorflow-cpu") if n in p), None)
    if tf:
        env["tensorflow"], env["tensorflow_package"] = p.pop(tf), tf
        if "tf-keras" in p:
            env["keras_api"], env["keras"] = "tf_keras", p.pop("tf-keras")
    if "keras" in p and Version(p["keras"]).major >= 3:
        env["keras"] = p.pop("keras")
        backend = "tensorflow" if tf else "jax" if "jax" in p else "torch" if "torch" in p else None
        if backend is None:
            raise UserError(f"{pins.source}: Keras {env['keras']} without tensorflow, jax or torch pinned: "
                            "which backend does it run on?")
        env["backend"] = backend
    elif "keras" in p and tf and "keras" not in searched:
        p.pop("keras")  # Keras 2 beside TensorFlow: TensorFlow's companion, resolved with it
    env["packages"] = [f"{pins.spelled(n)}=={v}" for n, v in p.items()]
    return env


def opened(env: dict, package: str) -> dict:
    """`env` with `package`'s companions left open (the same environment when it pins none)."""
    drop = {canonicalize_name(c) for c in COMPANIONS.get(canonicalize_name(package), ())}
    kept = [r for r in env["packages"] if canonicalize_name(r.split("==")[0]) not in drop]
    if kept == env["packages"]:
        return env
    return {**env, "name": f"open-{canonicalize_name(package)}", "packages": kept}


def workload(folder: Path, script: str | None, args: list[str], factory: str | None, data: str | None) -> dict:
    """The user's workload, in the forms a matrix takes: a script, or a model factory."""
    if script and factory:
        raise UserError("give --script or --factory (with --data), not both")
    if script:
        path = (folder / script) if not Path(script).is_absolute() else Path(script)
        if not path.is_file():
            raise UserError(f"--script {script}: no such file (relative to {folder})")
        return {"name": path.stem, "script": str(path.resolve()), "path": str(folder.resolve()),
                **({"args": list(args)} if args else {})}
    if factory:
        if not data:
            raise UserError("--factory needs --data (module:function giving the data)")
        return {"name": "model", "model": "user", "path": str(folder.resolve()), "build": factory, "data": data}
    raise UserError("name the workload: --script FILE (your training script) or --factory MODULE:FUNCTION "
                    "--data MODULE:FUNCTION (your model factory)")


def matrix_doc(name: str, envs: list[dict], works: list[dict], repeats: int | None,
               settings: dict | None = None, source: str = "the project's pins and its workload") -> dict:
    """The matrix: these environments and workloads; `settings` (a matrix cell's batch sizes,
    parallelism, timeouts, ...) in place of the defaults."""
    raw = {"name": name, "description": f"written by harness upgrade: {source}",
           "environments": envs, "workloads": works, "timeouts": TIMEOUTS}
    if repeats:
        raw["repeats"] = repeats
    raw.update(settings or {})
    return raw
