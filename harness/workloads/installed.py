"""The stack's versions as the environment holds them, read without importing the stack.

A ``script:`` cell runs the user's script and nothing else: importing TensorFlow to ask
its version would cost the cell seconds it did not ask for, and could change what the
script sees (a session created, devices claimed, a log level set). Yet its result must
name the stack with the same fields and values as a cell of a built-in model on the same
environment (:meth:`compat.Stack.seen`), or the report labels one environment two ways.
So the versions come from what is installed: a module the script did import gives its
own ``__version__`` (as in a built-in cell); otherwise the distribution's metadata
(``importlib.metadata`` on Python 3.8+, the ``*.dist-info`` / ``*.egg-info`` folders on
the path before that), and, for the Keras that TensorFlow < 2.6 carries inside itself,
the version written in its source.

Which Keras "the Keras version" is follows the environment's API, as in
``Stack.keras_version``:

* ``standalone`` and ``keras3``: the ``keras`` distribution;
* ``tf_keras``: the ``tf_keras`` distribution (TF_USE_LEGACY_KERAS points tf.keras at it);
* ``tf.keras``: on TF >= 2.6 the ``keras`` distribution TensorFlow loads (``tf_keras``
  where TF_USE_LEGACY_KERAS is set on TF >= 2.16); before 2.6 there is no separate
  distribution and the version is the one TensorFlow's own ``tf.keras.__version__``
  reports -- ``2.4.0`` on TF 2.3/2.4, ``2.3.0-tf`` on TF 2.2, ``2.1.6-tf`` on TF 1.12 --
  so a label reads "tf.keras 2.4.0" for either kind of cell, never TensorFlow's version
  in its place. TF 2.0-2.2 write two versions, one for TF 2 behaviour (on by default
  from 2.0) and one for TF 1 behaviour; the default one is taken.

Python 3.5 syntax, standard library only.
"""
import importlib.util
import os
import re
import sys

# The distributions that provide `import tensorflow`, the environment's own first.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                            "tensorflow-macos", "intel-tensorflow", "tf-nightly", "tf-nightly-cpu")
_ASSIGNED = re.compile(r"""^\s*__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def _normal(name):
    """PEP 503 normal form: Keras_Applications, keras-applications and keras.applications are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_version(names):
    """The version of the first of these distributions that is installed, or None."""
    try:
        from importlib import metadata  # novermin - 3.8+, and the folders are read below it
    except ImportError:  # Python < 3.8
        metadata = None
    for name in names:
        if metadata is not None:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        found = _scanned_version(name)
        if found:
            return found
    return None


def _scanned_version(name):
    """A distribution's version from its metadata folder on sys.path (what pip writes:
    ``<name>-<version>.dist-info``, ``<name>-<version>-py3.6.egg-info``)."""
    wanted = _normal(name)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            stem, ext = os.path.splitext(item)
            if ext not in (".dist-info", ".egg-info") or "-" not in stem:
                continue
            parts = stem.split("-")
            if _normal(parts[0]) == wanted:
                return _metadata_version(os.path.join(entry or ".", item)) or parts[1]
    return None


def _metadata_version(path):
    for name in ("METADATA", "PKG-INFO"):
        candidate = os.path.join(path, name) if os.path.isdir(path) else path
        try:
            with open(candidate) as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
        except (IOError, OSError, UnicodeDecodeError):
            continue
    return None


def _module_version(name):
    """The version of a module the script imported, or None when it was not imported."""
    mod = sys.modules.get(name)
    version = getattr(mod, "__version__", None) if mod is not None else None
    return str(version) if version else None


def _minor(version):
    parts = []
    for part in str(version).split(".")[:2]:
        digits = re.match(r"\d*", part).group(0)
        parts.append(int(digits or 0))
    return tuple(parts + [0, 0])[:2]


def tensorflow_version(spec):
    package = (spec.get("environment") or {}).get("tensorflow_package") or ""
    own = (package.split("[")[0],) if package else ()
    return _module_version("tensorflow") or distribution_version(own + TENSORFLOW_DISTRIBUTIONS)


def bundled_keras_version(tf_version):
    """The ``tf.keras.__version__`` of TensorFlow < 2.6, read from its source, not imported."""
    imported = _module_version("tensorflow.python.keras")
    if imported:
        return imported
    try:
        found = importlib.util.find_spec("tensorflow")  # a top-level name: found, not run
    except (ImportError, ValueError):
        return None
    folders = list(getattr(found, "submodule_search_locations", None) or []) if found else []
    for folder in folders:
        try:
            with open(os.path.join(folder, "python", "keras", "__init__.py")) as fh:
                assigned = _ASSIGNED.findall(fh.read())
        except (IOError, OSError, UnicodeDecodeError):
            continue
        if assigned:  # `if tf2.enabled(): <TF 2's> else: <TF 1's>`, or one assignment
            return assigned[0] if _minor(tf_version)[0] >= 2 else assigned[-1]
    return None


def _legacy_switch():
    return os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in ("1", "true", "yes")


def keras_version(api, tf_version):
    """The version of the Keras the API runs (see the module's docstring), or None."""
    if api == "tf_keras" or (api == "tf.keras" and tf_version and _minor(tf_version) >= (2, 16)
                             and _legacy_switch()):
        return _module_version("tf_keras") or distribution_version(("tf_keras",))
    if api == "tf.keras" and tf_version and _minor(tf_version) < (2, 6):
        return bundled_keras_version(tf_version)
    return _module_version("keras") or distribution_version(("keras",))


def stack_versions(spec):
    """The fields of ``Stack.seen`` that name the stack, with the same values a built-in
    cell of this environment records: TensorFlow where that cell would import it, the
    Keras of the environment's API, NumPy, the API and the backend."""
    api, backend = spec.get("api"), spec.get("backend")
    uses_tf = api != "keras3" or backend in (None, "tensorflow")  # as compat.Stack imports it
    tf_version = tensorflow_version(spec) if uses_tf else _module_version("tensorflow")
    return {
        "tensorflow": tf_version,
        "keras": keras_version(api, tf_version) if api else _module_version("keras"),
        "numpy": _module_version("numpy") or distribution_version(("numpy",)),
        "api": api,
        "backend": (backend or "tensorflow") if api == "keras3" else "tensorflow",
    }
