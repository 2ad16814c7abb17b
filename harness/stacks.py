"""What the host must know about TensorFlow / Keras versions, in one place.

Which Keras API a pin set means, which pip package names to install, which
pip an old interpreter needs, how environments are named. The in-environment
twin of this module is ``harness/workloads/compat.py``.
"""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.version import Version

# pip releases that still run on old interpreters (newer ones refuse to install).
PIP_FOR_PYTHON = {
    (3, 5): "pip==20.3.4",
    (3, 6): "pip==21.3.1",
    (3, 7): "pip==24.0",
    (3, 8): "pip==24.3.1",
}
KERAS3_BACKENDS = ("tensorflow", "jax", "torch")


def python_tuple(python: str) -> tuple[int, int]:
    major, minor = python.split(".")[:2]
    return int(major), int(minor)


def pip_requirement(python: str) -> str:
    return PIP_FOR_PYTHON.get(python_tuple(python), "pip")


def api(tensorflow: str | None, keras: str | None) -> str:
    """The Keras API a cell uses.

    No keras pin means the Keras that TensorFlow bundles (``tf.keras``);
    a Keras 3 pin means Keras 3 on its backend; any other keras pin means
    standalone Keras 2.x on whatever TensorFlow is installed.
    """
    if keras is None:
        return "tf.keras"
    return "keras3" if Version(keras).major >= 3 else "keras"


def tensorflow_package(tensorflow: str, device: str) -> str:
    """The pip distribution that provides TensorFlow for this device.

    TF 1.x: ``tensorflow`` is the CPU build, ``tensorflow-gpu`` the CUDA one.
    TF 2.x: ``tensorflow-cpu`` keeps CPU images small; GPU builds use
    ``tensorflow[and-cuda]`` from 2.14 on (CUDA from pip wheels), plain
    ``tensorflow`` before (CUDA from the base image).
    """
    v = Version(tensorflow)
    if v.major == 1:
        return "tensorflow-gpu" if device == "gpu" else "tensorflow"
    if device == "gpu":
        return "tensorflow[and-cuda]" if v >= Version("2.14") else "tensorflow"
    return "tensorflow-cpu"


def requirements(tensorflow: str | None, keras: str | None, backend: str | None,
                 device: str, packages: list[str]) -> list[str]:
    """Pip requirement strings for an environment, in install order."""
    reqs = []
    if tensorflow:
        reqs.append(f"{tensorflow_package(tensorflow, device)}=={tensorflow}")
    if keras:
        reqs.append(f"keras=={keras}")
    if api(tensorflow, keras) == "keras3" and backend == "jax":
        reqs.append(jax_requirement(device, packages))
    if api(tensorflow, keras) == "keras3" and backend == "torch" and device == "cpu":
        reqs.append("torch")
    reqs.extend(packages)
    return reqs


def jax_requirement(device: str, packages: list[str]) -> str:
    """JAX with its CUDA from pip wheels on a GPU: the extra depends on the pinned JAX.

    From 0.4.22 on, ``jax[cuda12]`` pulls ``jax-cuda12-plugin`` and the nvidia-*
    wheels from PyPI (later releases add ``cuda13``, which needs a driver >= 580;
    cuda12 runs on more of the GPU nodes people have). Before, JAX offered
    ``cuda12_pip``, whose ``jaxlib==X+cuda12.cudnn89`` lives on JAX's own index,
    not PyPI: pip then says it cannot find it, and the environment is
    `unavailable` with that reason.
    """
    if device != "gpu":
        return "jax"
    pinned = next((r for r in (Requirement(p) for p in packages) if r.name == "jax"), None)
    exact = [s.version for s in pinned.specifier if s.operator == "=="] if pinned else []
    if exact and Version(exact[0]) < Version("0.4.22"):
        return "jax[cuda12_pip]"
    return "jax[cuda12]"


def short_version(version: str) -> str:
    """'1.12.0' -> '1.12', '1.10.1' -> '1.10.1' (ids stay short, never ambiguous)."""
    return version[:-2] if version.endswith(".0") and version.count(".") == 2 else version


def environment_name(tensorflow: str | None, keras: str | None, backend: str | None, device: str) -> str:
    parts = []
    if tensorflow:
        parts.append(f"tf{short_version(tensorflow)}")
    if keras:
        parts.append(f"keras{keras}")
    if backend and backend != "tensorflow":
        parts.append(backend)
    if device == "gpu":
        parts.append("gpu")
    return "-".join(parts)
