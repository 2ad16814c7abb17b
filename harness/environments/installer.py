"""Every environment's packages are installed by uv, and this module is the one place that says how.

A TensorFlow virtualenv took pip 30-50 s to build here, most of it pip's own work; uv builds the
same one in seconds from an empty cache and in about one from a warm one (``bench/installers.py``).
uv also does by itself what the harness used to write by hand around pip:

- **the cut-off** -- ``--exclude-newer`` resolves as of a moment for every interpreter, old or new,
  where pips older than 26.0 needed a loopback index that listed only older files;
- **the download cache** -- uv's cache (``<harness cache>/uv``, shared by every build), where a
  loopback index kept wheels for pip;
- **one copy on disk** -- uv hard-links installed files from its cache, where the harness hard-linked
  identical files between virtualenvs after each build.

What the harness still decides, and so says here:

- **what uv reads.** An environment must resolve from what its record names, so uv is given the
  index, CA bundle and proxy of the *user's pip* (``pipsettings``: what the harness has
  always resolved against) and nothing else: no uv configuration file (``--no-config``), none of the
  caller's ``UV_*`` variables, no interpreter downloads. Extra indexes and find-links folders of pip's
  configuration are not applied: files from them carry no upload time a cut-off could judge, and
  uv's rules for several indexes are not pip's.
- **the build tools under a cut-off.** A release of 2018 often comes as an sdist whose build needs
  setuptools >= 40.8.0 (February 2019: the floor PEP 517 sets for a project without
  ``pyproject.toml``); resolved as of 2018 there is none. So setuptools alone is resolved as of the
  later of the cut-off and that release's day (``BUILD_TOOLS``), and the record says so. setuptools
  the environment itself needs comes from the same resolution.
- **a warm build needs no network where the answer cannot change.** Behind a proxy that drops the
  index's caching headers uv asks the index again for every page it has (seconds per build); an
  environment under a cut-off whose every page uv fetched after that cut-off (its cache is younger
  than the cut-off: ``CREATED``) resolves the same from the cache alone, so it is installed
  ``--offline`` first, and online only where that fails. An environment without a cut-off resolves
  as of today, online.
- **setuptools as ``python -m venv`` left it.** A virtualenv that ``python -m venv`` made held the
  interpreter's own setuptools (65.5.0 for Python 3.10-3.11, 40.6.2 for 3.6; none from 3.12 on), and
  pip kept it where it met the requirements -- TensorFlow 2.x's TensorBoard asks for any setuptools
  >= 41. uv makes a bare virtualenv, and would resolve today's setuptools, which no longer has
  ``pkg_resources``: old code that imports it would break where it ran before. So the interpreter's
  bundled setuptools is installed first (``SEED``), and the resolution keeps it where it fits.
- **pip in every environment.** ``python -m venv`` put pip in each environment; users open a shell in
  one and install, so pip is installed with the requirements: the newest release the interpreter
  runs (``stacks.pip_requirement``), as of the day of the build whatever the cut-off (``TOOLS``) --
  it is the user's tool, not part of the stack a cell measures, and the record says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import parse_wheel_filename

from harness import stacks
from harness.errors import EnvironmentUnavailable
from harness.files.paths import cache_dir
from harness.index.pipsettings import pip_settings
from harness.results.evidence import tail

# setuptools 40.8.0 (uploaded 2019-02-05): the first that PEP 517's default build requirement for a
# project without pyproject.toml accepts ("setuptools>=40.8.0"); an earlier cut-off lifts setuptools to it
BUILD_TOOLS = {"setuptools": "2019-02-06T00:00:00Z"}
# Installed as of the day of the build, never a cut-off: the user's tools in the environment
TOOLS = ("pip",)
# Interpreters uv serves (it refuses older ones); an environment on an older Python is unsupported here
OLDEST_PYTHON = (3, 6)


@functools.lru_cache(maxsize=1)
def uv() -> str:
    """The uv executable: the ``uv`` package installed beside the harness (the project's lock pins
    it), else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin  # optional: the uv package; without it, the uv on PATH
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise EnvironmentUnavailable("uv is not installed beside the harness nor on PATH: it builds every environment "
                               "(pip install uv, or install the harness from its lock: nox -s matrix --install-only)")


@functools.lru_cache(maxsize=1)
def version() -> str:
    """uv's version, as its records name it ("uv 0.13.8")."""
    out = subprocess.run([uv(), "--version"], capture_output=True, text=True, env=variables())
    return " ".join(out.stdout.split()[:2]) if out.returncode == 0 else "uv (version unknown)"


CREATED = ".harness-created"  # in uv's cache: when the harness made it (ISO 8601 UTC)
CACHE_VARIABLE = "HARNESS_UV_CACHE"
# written into each virtualenv the harness builds: its provenance, and the uv cache it was installed
# from (removal.built_from finds an environment's by it)
MARKER = "harness-env.json"


def cache() -> Path:
    """uv's cache: ``$HARNESS_UV_CACHE``, else ``uv`` in the harness's cache. The variable lets
    several harness caches share one (a test suite's temporary caches: one download, one copy on
    disk); it is the harness's own, never the user's uv cache, whose pages may predate a cut-off.
    Made on first use with the moment it was made (``CREATED``), which tells whether every page
    in it was fetched after a cut-off."""
    folder = Path(os.environ[CACHE_VARIABLE]) if os.environ.get(CACHE_VARIABLE) else cache_dir() / "uv"
    marker = folder / CREATED
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            with open(marker, "x") as fh:
                fh.write(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return folder


def fetched_after(moment: str) -> bool:
    """Whether everything in uv's cache was fetched after `moment` (the cache is younger)."""
    try:
        return (cache() / CREATED).read_text().strip() > moment
    except OSError:
        return False


def variables() -> dict[str, str]:
    """The environment uv runs in: the caller's, less every ``UV_*`` variable, with the user's pip CA
    bundle and proxy (the module's docstring) and the harness's cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    settings = pip_settings()
    if settings.cert:
        env["SSL_CERT_FILE"] = settings.cert
    if settings.proxy:
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = settings.proxy
    env.update(UV_CACHE_DIR=str(cache()), UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    return env


def _excepted(uploaded_before: str) -> dict[str, str]:
    """The packages resolved as of another moment than the cut-off, and that moment."""
    today = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = {p: floor for p, floor in BUILD_TOOLS.items() if floor > uploaded_before}
    out.update({p: today for p in TOOLS})
    return dict(sorted(out.items()))


def cutoff_options(uploaded_before: str) -> list[str]:
    """uv options that resolve as of `uploaded_before`, build tools and the user's tools excepted
    (``BUILD_TOOLS``, ``TOOLS``)."""
    options = ["--exclude-newer", uploaded_before]
    for package, moment in _excepted(uploaded_before).items():
        options += ["--exclude-newer-package", f"{package}={moment}"]
    return options


def options(env) -> list[str]:
    """What every install of `env`'s packages is given: the index, and its cut-off if it has one."""
    cutoff = getattr(env, "uploaded_before", None)
    return ["--no-config", "--index-url", pip_settings().index, *(cutoff_options(cutoff) if cutoff else [])]


def note(env) -> dict:
    """What an environment's provenance says of its install: the installer, the index, and, under a
    cut-off, the moment, the ranges that set it and the build tools resolved otherwise."""
    out: dict = {"installer": version(), "index": pip_settings().index}
    cutoff = getattr(env, "uploaded_before", None)
    if cutoff:
        why = {p: "the first setuptools that builds an sdist the PEP 517 way came later" for p in BUILD_TOOLS}
        why.update({p: "the user's tool in the environment, not part of the stack" for p in TOOLS})
        out["cutoff"] = {"uploaded_before": cutoff, "ranges": [list(r) for r in env.ranges],
                         "index": pip_settings().index, "via": f"{version()} --exclude-newer",
                         "excepted": {p: {"as_of": moment, "why": why[p]}
                                      for p, moment in _excepted(cutoff).items()}}
    return out


def supported(python: str) -> str | None:
    """Why uv cannot build for this Python version, or None."""
    if stacks.python_tuple(python) < OLDEST_PYTHON:
        return (f"Python {python}: uv, which builds every environment, serves Python "
                f">= {'.'.join(map(str, OLDEST_PYTHON))}")
    return None


# Prints the setuptools wheel `python -m venv` would seed with this interpreter (ensurepip's bundled
# one, or a Debian interpreter's /usr/share/python-wheels; none from Python 3.12 on, where venv seeds
# pip alone), or nothing: run by the environment's interpreter, on the host or in an image build
# (images/venv/Dockerfile), Python 3.6 and up
SEED = ("import glob, os, sys\n"
        "found = []\n"
        "if sys.version_info < (3, 12):  # from 3.12 on, venv seeds no setuptools\n"
        "    try:\n"
        "        import ensurepip\n"
        "        found = glob.glob(os.path.join(os.path.dirname(ensurepip.__file__), '_bundled', 'setuptools-*.whl'))\n"
        "    except ImportError:\n"
        "        pass\n"
        "    found = found or glob.glob('/usr/share/python-wheels/setuptools-*.whl')\n"
        "print(sorted(found)[-1] if found else '')\n")


def seed(interpreter: str) -> str | None:
    """The setuptools wheel `python -m venv` would seed with `interpreter` (``SEED``), or None."""
    out = subprocess.run([interpreter, "-I", "-c", SEED], capture_output=True, text=True, timeout=60)
    found = out.stdout.strip() if out.returncode == 0 else ""
    return found or None


def requirements(env) -> list[str]:
    """What a resolution installs: pip (the module's docstring), then the environment's pins."""
    return [stacks.pip_requirement(env.python), *env.requirements]


def create(interpreter: str, folder: Path) -> list[str]:
    """The command that makes a virtualenv at `folder` for `interpreter`: relocatable, since it is
    built beside its place and moved there whole when it is complete."""
    return [uv(), "venv", "--quiet", "--no-config", "--relocatable", "--python", interpreter, str(folder)]


def install(python: str, env, *, forced: bool = False, offline: bool = False) -> list[str]:
    """The command that installs `env`'s requirements (or, `forced`, its ``force`` pins, without
    their dependencies) into the environment of `python`."""
    what = list(env.force) if forced else requirements(env)
    return [uv(), "pip", "install", "--python", python, *options(env), *(["--offline"] if offline else []),
            *(["--no-deps"] if forced else []), *what]


def run(args: list[str], log, log_path: Path, what: str) -> None:
    """Run an installer command with its output in the build's log; a failure is
    EnvironmentUnavailable with its cause in one line (``failure``)."""
    log.write(f"$ {' '.join(args)}\n")
    log.flush()
    proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, env=variables())
    if proc.returncode != 0:
        log.flush()
        text = tail(log_path, 6000)
        raise EnvironmentUnavailable(f"{what} failed: {failure(text)}", text)


def populate(python: str, env, log, log_path: Path, seeded: str | None = None) -> bool:
    """Install `env`'s packages into the environment of `python`: the setuptools `seeded` first (a
    local wheel, ``seed``), then the rest, from uv's cache alone first where that gives the same
    answer (the module's docstring), else online. Returns whether it was offline."""
    if seeded:
        run([uv(), "pip", "install", "--python", python, "--no-config", "--offline", "--no-deps", seeded],
            log, log_path, "seeding setuptools")
    cutoff = getattr(env, "uploaded_before", None)
    offline = bool(cutoff) and fetched_after(cutoff)
    if offline:
        try:
            run(install(python, env, offline=True), log, log_path, "uv pip install --offline")
        except EnvironmentUnavailable:
            log.write("(not all of it in uv's cache: online)\n")
            offline = False
    if not offline:
        try:
            run(install(python, env), log, log_path, "uv pip install")
        except EnvironmentUnavailable:
            # uv trusts a cached index page for its max-age (PyPI's: 10 minutes), and a release the
            # harness just found (a watch, a bisect's newest end) may be newer than that page: once
            # more, the pinned packages' pages asked again; a failure then is the answer
            pinned = _exact_pins(requirements(env))
            if not pinned:
                raise
            log.write("(once more, the pinned packages' index pages asked again: uv's copy may predate them)\n")
            run([*install(python, env), *(f"--refresh-package={name}" for name in pinned)], log, log_path,
                "uv pip install")
    if env.force:
        run(install(python, env, forced=True, offline=offline), log, log_path, "uv pip install --no-deps")
    return offline


def _exact_pins(reqs: list[str]) -> list[str]:
    """The names of the requirements pinned to one version (``name==1.2.3``, extras dropped)."""
    names = []
    for text in reqs:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(text)
            if any(spec.operator == "==" for spec in req.specifier):
                names.append(req.name)
    return names


_BUILDKIT_PREFIX = re.compile(r"^#\d+ [\d.]+ ")
_NOT_THE_CAUSE = ("executor failed", "process ", "failed to solve", "ResolutionImpossible", "Ignored the following")


def failure(log: str) -> str:
    """Why an install failed, in one line, from a venv log or a BuildKit build log.

    uv says it as ``error: ...`` with its reasons on the ``cause:`` lines under it (and their
    continuations), then ``hint:`` lines; the cause is what a user acts on, so it is kept whole.
    pip (the images whose interpreter uv does not serve) says it on ERROR lines: its first names
    the conflict ("Cannot install A and B ..."), its last is a generic ResolutionImpossible link,
    and BuildKit adds its own wrappers after that; the lines under "The conflict is caused by:"
    are kept.
    """
    lines = [_BUILDKIT_PREFIX.sub("", line).rstrip() for line in log.splitlines()]
    # the last: a log may hold an earlier attempt's (the offline one before the online one)
    uv_error = next((i for i in reversed(range(len(lines))) if lines[i].startswith("error: ")), None)
    if uv_error is not None:
        said, cause = [lines[uv_error][len("error: "):].strip()], False
        for line in lines[uv_error + 1:]:
            if line.lstrip().startswith("cause:"):
                cause = True
                said.append(line.split("cause:", 1)[1].strip())
            elif cause and line.startswith("    ") and line.strip():
                said.append(line.strip())
            elif line.strip():
                break
        return (said[0] + (": " + " ".join(said[1:]) if said[1:] else ""))[:400]
    errors = [line.split("ERROR: ", 1)[1].strip() for line in lines if "ERROR: " in line]
    cause = next((e for e in errors if not e.startswith(_NOT_THE_CAUSE)), None)
    if cause is None:
        cause = errors[-1] if errors else next((ln for ln in reversed(lines) if ln.strip()), "the install failed")
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        because = []
        for line in lines[start:]:
            if not line.startswith("    "):
                break
            because.append(line.strip())
        if because:
            cause += " (" + "; ".join(because) + ")"
    return cause[:400]


def freeze(python: str) -> str:
    """What the environment of `python` holds, a ``name==version`` line each (its record)."""
    out = subprocess.run([uv(), "pip", "freeze", "--python", python], capture_output=True, text=True,
                         env=variables())
    if out.returncode != 0:
        raise EnvironmentUnavailable(f"uv pip freeze failed: {out.stderr.strip()[-300:]}", out.stderr)
    return plain_pins(out.stdout)


_LOCAL_WHEEL = re.compile(r"^(\S+) @ file://\S*/([^/\s]+\.whl)\s*$")


def plain_pins(freeze_text: str) -> str:
    """A freeze with each package installed from a local wheel (the seeded setuptools: ``SEED``)
    written as ``name==version``, as pip freeze writes it: a lock names releases any index has, never a
    path of the machine that built it."""
    lines = []
    for line in freeze_text.splitlines():
        match = _LOCAL_WHEEL.match(line)
        if match:
            with contextlib.suppress(ValueError):
                line = f"{match.group(1)}=={parse_wheel_filename(match.group(2))[1]}"
        lines.append(line)
    return "\n".join(lines) + ("\n" if freeze_text.endswith("\n") else "")

