"""What the host must know about TensorFlow / Keras versions, in one place.

Which Keras API a pin set means, which pip package names to install, which
pip an old interpreter needs, how environments are named. The in-environment
twin of this module is ``harness/workloads/compat.py``.
"""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

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


# Which Keras the workload uses (the matrix's `keras_api`):
#   standalone -- `import keras`, the Keras 2.x package, on whatever TensorFlow is installed;
#   tf.keras   -- the Keras TensorFlow bundles (on TF >= 2.16 that is Keras 3);
#   tf_keras   -- the legacy Keras 2 on TF >= 2.16: the `tf_keras` package behind tf.keras,
#                 switched on by TF_USE_LEGACY_KERAS=1;
#   keras3     -- Keras 3 on its backend (KERAS_BACKEND).
KERAS_APIS = ("standalone", "tf.keras", "tf_keras", "keras3")
PLAIN = "none"  # the api of an environment without TensorFlow or Keras: Python and its packages
TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow[and-cuda]")
# Variables that decide which Keras a process loads: set from the environment's keras_api only,
# never inherited from whoever runs the harness (a stray TF_USE_LEGACY_KERAS=1 changes the answer).
KERAS_SWITCHES = ("KERAS_BACKEND", "TF_USE_LEGACY_KERAS")
# What a matrix's `env:` may not set: the harness owns these (interpreter and library lookup,
# the cell-process flags), or keras_api / backend says them.
RESERVED_VARIABLES = frozenset({
    "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONFAULTHANDLER", "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "LD_PRELOAD", "HOME", "VIRTUAL_ENV", *KERAS_SWITCHES})


# Variables that change which code a process loads (or runs at start), refused in `env:` by
# family rather than by name: a cell must run the stack its pins say, and a result must not
# depend on a variable that injected other code. The families: the dynamic loader's (LD_*,
# macOS's DYLD_*, and glibc's module and locale paths -- what glibc itself ignores for setuid
# programs); Python's start-up (PYTHON*, except the few that only change output or
# diagnostics, listed in the README); a shell's start-up files and exported functions.
_LOADER_FAMILIES = re.compile(r"(LD|DYLD|RTLD)_.*|GCONV_PATH|GETCONF_DIR|LOCPATH|NLSPATH|GLIBC_TUNABLES|MALLOC_TRACE"
                              r"|BASH_ENV|ENV|BASH_FUNC_.*|SHELLOPTS|PS4")
PYTHON_OUTPUT_VARIABLES = frozenset({"PYTHONWARNINGS", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDEVMODE",
                                     "PYTHONTRACEMALLOC", "PYTHONMALLOC"})


def loads_code(name: str) -> str | None:
    """Why `name` may not be set for a cell (it changes what code loads), or None."""
    if _LOADER_FAMILIES.fullmatch(name):
        return "it changes which libraries the process loads or what a shell runs at start"
    if name.startswith("PYTHON") and name not in PYTHON_OUTPUT_VARIABLES:
        return ("PYTHON* variables change what Python imports or runs at start (allowed: "
                + ", ".join(sorted(PYTHON_OUTPUT_VARIABLES)) + ")")
    return None


def is_keras3(keras: str | None) -> bool:
    """A Keras pin of the Keras 3 line (the version tests live here, nowhere else)."""
    return keras is not None and Version(keras).major >= 3


def is_tf1(tensorflow: str | None) -> bool:
    return tensorflow is not None and Version(tensorflow).major == 1


def api(tensorflow: str | None, keras: str | None) -> str:
    """The Keras API a cell uses when the matrix does not say (``keras_api``).

    No keras pin means the Keras that TensorFlow bundles (``tf.keras``);
    a Keras 3 pin means Keras 3 on its backend; any other keras pin means
    standalone Keras 2.x on whatever TensorFlow is installed; neither pin is a plain
    environment (``PLAIN``).
    """
    if keras is None and tensorflow is None:
        return PLAIN
    if keras is None:
        return "tf.keras"
    return "keras3" if is_keras3(keras) else "standalone"


def keras_package(keras_api: str) -> str | None:
    """The distribution whose version is "the Keras version" of an environment."""
    return {"standalone": "keras", "keras3": "keras", "tf_keras": "tf_keras"}.get(keras_api)


def forced_version(force: list[str] | tuple[str, ...], package: str | None) -> str | None:
    """The version a `force:` entry pins `package` to ("keras==2.2.4" -> "2.2.4"), if any."""
    for req in force:
        name, sep, version = req.partition("==")
        if package and sep and name.strip().lower().replace("-", "_") == package.replace("-", "_"):
            return version.strip()
    return None


def asked_keras_version(keras_api: str, keras: str | None, force: list[str] | tuple[str, ...]) -> str | None:
    """The Keras version an environment asks for: its `keras:` pin, or what `force:` installs."""
    package = keras_package(keras_api)
    return forced_version(force, package) or (keras if package else None)


def tensorflow_package(tensorflow: str, device: str, keras_api: str | None = None) -> str:
    """The pip distribution that provides TensorFlow for this device (the matrix's
    ``tensorflow_package`` overrides it).

    TF 1.x: ``tensorflow`` is the CPU build, ``tensorflow-gpu`` the CUDA one.
    TF 2.x: ``tensorflow-cpu`` keeps CPU images small; GPU builds use
    ``tensorflow[and-cuda]`` from 2.14 on (CUDA from pip wheels), plain
    ``tensorflow`` before (CUDA from the base image). tf_keras depends on
    ``tensorflow`` by name, so pip would install it over ``tensorflow-cpu``
    into the same folder: a tf_keras environment takes ``tensorflow``.
    """
    v = Version(tensorflow)
    if v.major == 1:
        return "tensorflow-gpu" if device == "gpu" else "tensorflow"
    if device == "gpu":
        return "tensorflow[and-cuda]" if v >= Version("2.14") else "tensorflow"
    return "tensorflow" if keras_api == "tf_keras" else "tensorflow-cpu"


def requirements(tensorflow: str | None, keras: str | None, backend: str | None,
                 device: str, packages: list[str], keras_api: str | None = None,
                 tf_package: str | None = None, force: list[str] | tuple[str, ...] = (),
                 dated: bool = False) -> list[str]:
    """Pip requirement strings for an environment, in install order (`force:` is installed
    after them with --no-deps, so a package it names is not asked of the resolver)."""
    chosen = keras_api or api(tensorflow, keras)
    reqs = []
    if tensorflow:
        reqs.append(f"{tf_package or tensorflow_package(tensorflow, device, chosen)}=={tensorflow}")
    package = keras_package(chosen)
    if package and not forced_version(force, package):
        if keras:
            reqs.append(f"{package}=={keras}")
        elif chosen == "tf_keras" and tensorflow:  # the release made for this TensorFlow
            reqs.append(f"tf_keras~={Version(tensorflow).major}.{Version(tensorflow).minor}.0")
    if chosen == "keras3" and backend == "jax":
        reqs.append(jax_requirement(device, packages, dated))
    if chosen == "keras3" and backend == "torch" and not _names(packages, "torch"):
        # the same on CPU and GPU: PyPI's Linux torch wheel carries its CUDA (nvidia-* wheels);
        # a GPU environment without it had no torch at all. A `packages:` pin of torch wins.
        reqs.append("torch")
    reqs.extend(packages)
    return reqs


def _names(packages: list[str] | tuple[str, ...], name: str) -> bool:
    """True when one of `packages` is a requirement of the distribution `name`."""
    return any(canonicalize_name(Requirement(p).name) == name for p in packages)


def jax_requirement(device: str, packages: list[str], dated: bool = False) -> str:
    """JAX with its CUDA from pip wheels on a GPU: the extra depends on the pinned JAX.

    From 0.4.22 on, ``jax[cuda12]`` pulls ``jax-cuda12-plugin`` and the nvidia-*
    wheels from PyPI (later releases add ``cuda13``, which needs a driver >= 580;
    cuda12 runs on more of the GPU nodes people have). Before, JAX offered
    ``cuda12_pip``, whose ``jaxlib==X+cuda12.cudnn89`` lives on JAX's own index,
    not PyPI: pip then says it cannot find it, and the environment is
    `unavailable` with that reason.
    """
    if device != "gpu":
        # Under a cut-off (harness.index.releases) JAX resolves as of a date, and JAX before the
        # 0.4.3x releases did not depend on jaxlib: `jax[cpu]` brings it for every release
        # (later JAX has no `cpu` extra and depends on jaxlib itself; pip only warns).
        return "jax[cpu]" if dated else "jax"
    pinned = next((r for r in (Requirement(p) for p in packages) if r.name == "jax"), None)
    exact = [s.version for s in pinned.specifier if s.operator == "=="] if pinned else []
    if exact and Version(exact[0]) < Version("0.4.22"):
        return "jax[cuda12_pip]"
    return "jax[cuda12]"


def short_version(version: str) -> str:
    """'1.12.0' -> '1.12', '1.10.1' -> '1.10.1' (ids stay short, never ambiguous)."""
    return version[:-2] if version.endswith(".0") and version.count(".") == 2 else version


def environment_name(tensorflow: str | None, keras: str | None, backend: str | None, device: str,
                     keras_api: str | None = None, tf_package: str | None = None,
                     python: str | None = None) -> str:
    """A readable default name: the pins, plus whatever differs from what the pins imply
    (a keras_api said explicitly, a TensorFlow distribution other than the default); a plain
    environment is named for its Python ("py3.11")."""
    default_api = api(tensorflow, keras)
    chosen = keras_api or default_api
    parts = [f"py{python}"] if chosen == PLAIN and python else []
    if tensorflow:
        parts.append(f"tf{short_version(tensorflow)}")
    if keras:
        parts.append(f"{'tf_keras' if chosen == 'tf_keras' else 'keras'}{keras}")
    if chosen != default_api and not (chosen == "tf_keras" and keras):
        parts.append(chosen)
    if tensorflow and tf_package and tf_package != tensorflow_package(tensorflow, device, chosen):
        parts.append(tf_package.replace("[and-cuda]", "-and-cuda"))
    if backend and backend != "tensorflow":
        parts.append(backend)
    if device == "gpu":
        parts.append("gpu")
    return "-".join(parts)


def release_key(version) -> tuple:
    """The one order of release numbers in the harness: PEP 440's (2.9 before 2.10, 2.16.0rc0 before
    2.16.0), and text that is no version -- a nightly's label, a "-" -- after every version, by its
    text. Every page, series and search that sorts releases takes this key, so no two of them list
    the same releases in two orders."""
    try:
        return (0, Version(str(version)), "")
    except InvalidVersion:
        return (1, Version("0"), str(version))
