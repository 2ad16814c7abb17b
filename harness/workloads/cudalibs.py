"""The CUDA side of the self-check (workloads/selfcheck.py), provable on any host, GPU or not:
which CUDA and cuDNN a framework was built for, and whether the libraries of exactly those
versions are here (the nvidia-* wheels, the image's /usr/local/cuda, the loader's path), load
(``ctypes.CDLL``) and report the versions they should.

The build information is read without importing the framework where that can fail for want of
a GPU: a TF 1.x GPU build needs the driver's libcuda.so.1 to import, so its versions come from
its files. Standard library only at module level.
"""
import ast
import ctypes
import glob
import os
import re
import sys

from .compat import major

# The CUDA libraries each framework links against; the version each must have
# comes from the framework's build info (see _wanted).
FAMILIES = {
    "tensorflow": ("cudart", "cublas", "cublasLt", "cudnn", "cufft", "curand", "cusolver", "cusparse"),
    "jax": ("cudart", "cublas", "cublasLt", "cudnn", "cufft", "cusolver", "cusparse"),
    "torch": ("cudart", "cublas", "cublasLt", "cudnn"),
}
# Where CUDA libraries live besides the nvidia-* wheels: the CUDA images' own
# folders and the usual system ones (the loader's cache covers the rest).
SYSTEM_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/extras/CUPTI/lib64",
               "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
# cuBLAS, cuFFT, cuRAND, cuSOLVER and cuSPARSE all report their version this way.
PROPERTY_GETTERS = {"cublas": "cublasGetProperty", "cufft": "cufftGetProperty", "curand": "curandGetProperty",
                    "cusolver": "cusolverGetProperty", "cusparse": "cusparseGetProperty"}


def first_line(exc):
    """The line that says what went wrong; TF 1.x wraps its ImportError in a traceback."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    telling = [ln for ln in lines if "cannot open shared object" in ln or "undefined symbol" in ln]
    line = telling[0] if telling else (lines[-1] if lines[0].startswith("Traceback") else lines[0])
    return line[:300]


def _package_dir(name):
    for folder in sys.path:
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return candidate
    return None


# -- what the framework was built for ----------------------------------------
def _tensorflow_build_info(module=None):
    """CUDA / cuDNN versions TensorFlow was built for.

    ``tf.sysconfig.get_build_info()`` when TensorFlow imported (TF >= 2.3);
    else tensorflow/python/platform/build_info.py read as text, since importing
    a TF 1.x GPU build needs the driver's libcuda.so.1, which a host without a
    GPU lacks; and where that file names no versions (TF 1.x), the CUDA
    libraries its own shared objects ask for, e.g. libcublas.so.9.0.
    """
    getter = getattr(getattr(module, "sysconfig", None), "get_build_info", None)
    if getter is not None:
        info = dict(getter())
        return {"cuda": info.get("cuda_version"), "cudnn": info.get("cudnn_version"),
                "is_cuda_build": bool(info.get("is_cuda_build")), "source": "tf.sysconfig.get_build_info()"}, None
    root = _package_dir("tensorflow")
    if root is None:
        return None, "tensorflow is not installed"
    path = os.path.join(root, "python", "platform", "build_info.py")
    try:
        with open(path) as fh:
            tree = ast.parse(fh.read())
    except (IOError, OSError, SyntaxError) as exc:
        return None, "cannot read %s: %s" % (path, first_line(exc))
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    info = values.get("build_info") if isinstance(values.get("build_info"), dict) else {}
    cuda = info.get("cuda_version") or values.get("cuda_version_number")
    cudnn = info.get("cudnn_version") or values.get("cudnn_version_number")
    built = {"cuda": str(cuda) if cuda else None, "cudnn": str(cudnn) if cudnn else None,
             "is_cuda_build": bool(info.get("is_cuda_build", values.get("is_cuda_build", bool(cuda)))),
             "source": "tensorflow/python/platform/build_info.py"}
    if built["is_cuda_build"] and not cuda:
        needed = _sonames_in(glob.glob(os.path.join(root, "libtensorflow_framework.so*"))
                             + glob.glob(os.path.join(root, "python", "_pywrap_tensorflow_internal.so")))
        built["needed"] = needed
        built["source"] = "the CUDA libraries TensorFlow's shared objects name"
        for name in needed:
            if name.startswith("libcudart.so."):
                built["cuda"] = name[len("libcudart.so."):]
            elif name.startswith("libcudnn.so."):
                built["cudnn"] = name[len("libcudnn.so."):]
    return built, None


SONAME = re.compile(b"lib(?:cudart|cublas|cublasLt|cudnn|cufft|curand|cusolver|cusparse)\\.so\\.[0-9]+(?:\\.[0-9]+)?")


def _sonames_in(paths):
    """CUDA sonames a shared object names (its DT_NEEDED entries are plain strings in it)."""
    found = set()
    for path in paths:
        try:
            with open(path, "rb") as fh:
                tail = b""
                while True:
                    chunk = fh.read(1 << 24)
                    if not chunk:
                        break
                    found.update(m.decode() for m in SONAME.findall(tail + chunk))
                    tail = chunk[-64:]
        except (IOError, OSError):
            continue
    return sorted(found)


def _jax_build_info():
    """Versions the CUDA plugin was compiled against (its ``*_build_version`` functions)."""
    for module in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jaxlib.cuda"):
        try:
            versions = __import__(module + "._versions", fromlist=["_versions"])
        except ImportError:
            continue
        built = {}
        for name in dir(versions):
            if name.endswith("_build_version"):
                try:
                    built[name[:-len("_build_version")]] = getattr(versions, name)()
                except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                    built[name[:-len("_build_version")]] = "error: %s" % first_line(exc)
        return {"cuda": _cuda_string(built.get("cuda_runtime") or built.get("cuda")),
                "cudnn": _cudnn_string(built.get("cudnn")), "is_cuda_build": True,
                "source": module + "._versions", "build_versions": built}, None
    return None, "no CUDA plugin for jaxlib is installed (jax_cuda12_plugin / jax_cuda13_plugin)"


def _torch_build_info():
    try:
        # the framework, imported only when its build is asked about
        import torch
    except Exception as exc:  # noqa: BLE001
        return None, "import torch failed: %s" % first_line(exc)
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - loading cuDNN is checked separately
        pass
    return {"cuda": torch.version.cuda, "cudnn": _cudnn_string(cudnn), "is_cuda_build": bool(torch.version.cuda),
            "source": "torch.version"}, None


def _cuda_string(value):
    """12020 -> '12.2'; strings pass."""
    if isinstance(value, int):
        return "%d.%d" % (value // 1000, (value % 1000) // 10)
    return value


def _cudnn_string(value):
    """90300 / 8904 -> '9.3.0' / '8.9.4'; strings pass."""
    if isinstance(value, int):
        major = value // 10000 if value >= 10000 else value // 1000
        rest = value % 10000 if value >= 10000 else value % 1000
        return "%d.%d.%d" % (major, rest // 100, rest % 100)
    return value


BUILD_INFO = {"tensorflow": _tensorflow_build_info, "jax": _jax_build_info, "torch": _torch_build_info}


def built_for(framework, module=None):
    """(what `framework` was built for, None), or (None, why not); `module`: the framework, where
    it imported (TensorFlow's own build info is read from it when it can be)."""
    return _tensorflow_build_info(module) if framework == "tensorflow" else BUILD_INFO[framework]()


# -- the libraries --------------------------------------------------------------
def _search_dirs():
    """nvidia-* wheel folders first (what pip installed), then LD_LIBRARY_PATH, then the system."""
    dirs = []
    for folder in sys.path:
        dirs.extend(sorted(glob.glob(os.path.join(folder or ".", "nvidia", "*", "lib"))))
    dirs.extend(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)
    dirs.extend(SYSTEM_DIRS)
    seen = []
    for d in dirs:
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def _wanted(family, built):
    """The file-name prefix a library must match, e.g. 'libcublas.so.9.0', 'libcudnn.so.8',
    'libcufft.so.' (math libraries other than cuBLAS carry their own major versions)."""
    cuda = built.get("cuda") or ""
    cudnn = str(built.get("cudnn") or "")
    if family == "cudnn":
        return "libcudnn.so." + cudnn.split(".")[0] if cudnn else "libcudnn.so."
    if family in ("cudart", "cublas", "cublasLt") and cuda:
        major = cuda.split(".")[0]
        if int(major) < 11:  # CUDA 9 / 10 libraries are named with major.minor
            return "lib%s.so.%s" % (family, ".".join(cuda.split(".")[:2]))
        if family == "cudart" and major == "11":
            return "libcudart.so.11.0"
        return "lib%s.so.%s" % (family, major)
    return "lib%s.so." % family


def _find(prefix, dirs):
    for d in dirs:
        start = prefix if prefix.endswith(".") else prefix + "."
        names = sorted(n for n in os.listdir(d) if n == prefix or n.startswith(start))
        if names:
            return os.path.join(d, names[0])
    return None


def _library_version(family, lib):
    try:
        if family == "cudart":
            value = ctypes.c_int()
            if lib.cudaRuntimeGetVersion(ctypes.byref(value)) == 0:
                return _cuda_string(value.value)
        elif family == "cublasLt":
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            value = int(lib.cublasLtGetVersion())
            return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
        elif family == "cudnn":
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            return _cudnn_string(int(lib.cudnnGetVersion()))
        elif family in PROPERTY_GETTERS:
            getter = getattr(lib, PROPERTY_GETTERS[family])
            parts = []
            for kind in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                value = ctypes.c_int()
                if getter(kind, ctypes.byref(value)) != 0:
                    return None
                parts.append(str(value.value))
            return ".".join(parts)
    except (AttributeError, OSError):
        return None
    return None


def check_libraries(families, built):
    """Find every library, then load them until no more load: a library whose
    dependency sits in another wheel's folder loads once that one is loaded
    (RTLD_GLOBAL), which is how the frameworks themselves order it."""
    dirs = _search_dirs()
    found = []
    cuda_major = major(built.get("cuda"))
    if built.get("needed"):  # the framework's own binaries say exactly which libraries it links
        named = set(n.split(".so")[0][len("lib"):] for n in built["needed"])
        families = [f for f in families if f in named]
    elif cuda_major and cuda_major < 11:
        families = [f for f in families if f != "cublasLt"]  # cuBLASLt came with CUDA 10.1, used from 11
    exact = dict((n.split(".so")[0][len("lib"):], n) for n in built.get("needed") or [])
    for family in families:
        prefix = exact.get(family) or _wanted(family, built)
        path = _find(prefix, dirs)
        found.append({"family": family, "wanted": prefix.rstrip("."), "path": path, "loaded": False,
                      "error": None if path else "not found"})
    for item in found:  # not in any folder: the loader's own cache may still know an exact soname
        if item["path"] is None and not item["wanted"].endswith(".so"):
            try:
                ctypes.CDLL(item["wanted"], mode=ctypes.RTLD_GLOBAL)
                item["path"], item["error"] = item["wanted"], None
            except OSError:
                pass
    handles = {}
    pending = [item for item in found if item["path"]]
    while pending:
        progress = False
        for item in list(pending):
            try:
                handles[item["family"]] = ctypes.CDLL(item["path"], mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                item["error"] = first_line(exc)
                continue
            item["loaded"], item["error"] = True, None
            pending.remove(item)
            progress = True
        if not progress:
            break
    for item in found:
        if item["loaded"]:
            item["real"] = os.path.basename(os.path.realpath(item["path"])) if os.sep in item["path"] else None
            item["version"] = _library_version(item["family"], handles[item["family"]])
    return found, dirs
