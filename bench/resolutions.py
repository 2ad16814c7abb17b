"""Same answers: the versions uv resolves for every environment of the project's matrices, against
the versions the recipe before uv (pip) resolves for it today.

    python bench/resolutions.py [MATRIX ...] [--cache DIR] [--host-config] [--retry-failed]
                                [--python X.Y=PATH ...]

Every ``*.yaml`` under ``matrices/`` and ``examples/`` (or the MATRIX files named) is loaded as the
harness loads it -- a version range expands through the index, each of its environments with its
cut-off -- and each distinct environment (its Python, requirements, ``force`` pins and cut-off) is
resolved both ways, without building it where that can be avoided:

- **uv**: exactly what the harness runs (``installer.options``, ``installer.requirements``, in
  ``installer.variables()``), with ``--dry-run``, in a virtualenv made as the harness makes one,
  once per Python: ``installer.create``, then the setuptools wheel ``installer.seed`` names,
  installed as ``installer.populate`` installs it. The answer is what that virtualenv holds, less
  what uv would remove, plus what it would install; then the ``force`` pins as the harness
  installs them (``--no-deps``), dry-run too: each forced release replaces its package. An answer
  kept from a run whose seed was another is made again.
- **pip**: the recipe before uv. ``python -m venv``, then ``pip install --upgrade`` the pip that
  Python runs (``stacks.pip_requirement``), once per Python; then ``pip install --dry-run --report
  --ignore-installed`` of the requirements and, ``--no-deps``, of the ``force`` pins. Under a cut-off
  pip is given ``cutoff.pip_arguments`` (pip's own ``--uploaded-prior-to``, or the loopback index for
  pips older than 26.0); without one ``--isolated --index-url <the user's index>`` with its CA
  bundle and proxy, where the recipe before uv read the user's whole pip configuration (its extra
  indexes, find-links folders and constraint files, which uv is not given: ``--host-config`` resolves
  each environment without a cut-off that way too, and prints what that changes separately).
  ``--ignore-installed`` resolves from nothing; the recipe's virtualenv held the setuptools
  ``venv`` put there (the interpreter's bundled one, Python < 3.12), which pip kept where it met the
  requirements, so where the answer holds a setuptools other than that one, pip resolves again
  without ``--ignore-installed`` in that virtualenv: the environment the recipe made. pip 21.3.1
  (Python 3.6) has no ``--dry-run``: there the recipe builds a throw-away virtualenv, and ``pip
  freeze --all`` is its answer.

The two sets of ``name==version`` (canonical names) are compared. pip itself is left out: both
recipes install the newest pip the interpreter runs as of the day of the build (``installer.TOOLS``),
whatever the cut-off. A build tool (``installer.BUILD_TOOLS``: setuptools) that uv resolves as of
a later day than a cut-off older than that rule's floor, the harness's build-tools rule, is not
counted as a difference, but listed. Every other difference is, each with its reason where this
bench knows it: a seed, pip's (the harness seeded nothing) or the harness's (one that ``venv``
does not seed). Printed: the counts; every environment that differs (matrix and name, Python,
cut-off, each package with uv's and pip's version and the reason); every resolution that failed,
with its cause in one line; uv against pip from nothing (the resolvers alone, Python >= 3.7); and
with ``--host-config`` what the user's whole pip configuration changes. Sorted, so two runs over
the same index print the same. Progress goes to stderr.

Each environment's answers are kept as JSON in ``--cache`` (by default a folder in the system's
temp folder that a later run finds again), so an interrupted run resumes where it stopped; a
failed resolution is kept too, and tried again with ``--retry-failed``. One resolution at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

from harness import stacks  # noqa: E402
from harness.environments import installer, interpreters  # noqa: E402
from harness.index.cutoff import pip_arguments  # noqa: E402
from harness.index.releases import pip_settings  # noqa: E402
from harness.matrix import load  # noqa: E402

FOLDERS = ("matrices", "examples")
TIMEOUT = 3600  # one resolution, seconds: a 3.6 build fetches TensorFlow
FORMAT = 1  # bump when a cached answer's meaning changes
PIP_QUIET = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
_UV_LINE = re.compile(r"^ \+ (\S+?)==(\S+)$")
_UV_GONE = re.compile(r"^ - (\S+?)==(\S+)$")


# --- what to resolve ------------------------------------------------------------------------------

def matrix_files(named: list[str]) -> list[Path]:
    if named:
        return [Path(p) for p in named]
    return sorted(p.relative_to(ROOT) for folder in FOLDERS for p in (ROOT / folder).rglob("*.yaml"))


def key_of(env) -> tuple:
    return env.python, tuple(env.requirements), tuple(env.force), env.uploaded_before


def digest(key: tuple) -> str:
    return hashlib.sha256(json.dumps([FORMAT, *key]).encode()).hexdigest()[:20]


def environments(files: list[Path]) -> tuple[dict[tuple, dict], list[str]]:
    """The distinct environments of `files` (key -> one of them and where each copy is), and the
    files that did not load, each with why."""
    found: dict[tuple, dict] = {}
    broken = []
    for path in files:
        try:
            matrix = load(ROOT / path)
        except Exception as exc:  # noqa: BLE001 - a matrix that does not load is a line of the report
            broken.append(f"{path}: {' '.join(str(exc).split())[:300]}")
            continue
        for env in matrix.environments:
            entry = found.setdefault(key_of(env), {"env": env, "where": []})
            entry["where"].append(f"{path}: {env.name}")
    for entry in found.values():
        entry["where"].sort()
    return dict(sorted(found.items(), key=lambda kv: order(kv[0]))), broken


def order(key: tuple) -> tuple:
    python, requirements, force, cutoff = key
    return stacks.python_tuple(python), cutoff or "", requirements, force


# --- running the installers ----------------------------------------------------------------------

class Failed(Exception):
    """A resolution that failed; its message is the cause in one line."""


def call(args: list[str], env: dict, what: str) -> str:
    """Run `args`; their output (stdout and stderr together), or Failed with the cause in one line
    (``installer.failure``, which reads uv's and pip's ways of saying it)."""
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failed(f"{what}: no answer in {TIMEOUT} s") from None
    if proc.returncode != 0:
        raise Failed(f"{what} failed: {installer.failure(proc.stdout)}")
    return proc.stdout


def pins(lines, pattern=None) -> dict[str, str]:
    """name==version lines (uv's dry-run, pip freeze) as {canonical name: version}."""
    out = {}
    for line in lines:
        if pattern:
            match = pattern.match(line.rstrip())
            if match:
                out[canonicalize_name(match.group(1))] = match.group(2)
        else:
            name, sep, version = line.strip().partition("==")
            if sep and not name.startswith("#"):
                out[canonicalize_name(name)] = version
    return out


class Tools:
    """The virtualenvs the resolutions run against, made once per Python in a work folder: a bare
    uv one, and pip's as the recipe before uv made it (``python -m venv``, pip upgraded)."""

    def __init__(self, work: Path, pythons: dict[str, str]):
        self.work, self.pythons = work, pythons
        self.made: dict[tuple[str, str], str] = {}

    def interpreter(self, python: str) -> str:
        found = interpreters.find(python, self.pythons)
        if not found:
            raise Failed(f"no Python {python} interpreter on this host")
        return found[0]

    def seed(self, python: str) -> str | None:
        """The setuptools wheel the harness installs first into a new virtualenv of `python`, as
        ``python -m venv`` seeded it (``installer.seed``), or None."""
        if ("seed", python) not in self.made:
            self.made["seed", python] = installer.seed(self.interpreter(python))
        return self.made["seed", python]

    def uv_python(self, python: str) -> tuple[str, dict[str, str]]:
        """A virtualenv as the harness starts each one (``installer.create``, then the seeded
        setuptools as ``installer.populate`` installs it), and what it holds."""
        if ("uv", python) not in self.made:
            folder = self.work / f"uv-{python}"
            call(installer.create(self.interpreter(python), folder), installer.variables(), "uv venv")
            py = str(folder / "bin" / "python")
            seeded = self.seed(python)
            if seeded:
                call([installer.uv(), "pip", "install", "--python", py, "--no-config", "--offline", "--no-deps",
                      seeded], installer.variables(), "seeding setuptools")
            listed = call([installer.uv(), "pip", "list", "--python", py, "--format", "json", "--quiet"],
                          installer.variables(), "uv pip list")
            holds = {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed)}
            self.made["uv", python] = (py, holds)
        return self.made["uv", python]

    def pip_python(self, python: str) -> str:
        """A virtualenv as the recipe before uv started each one: ``python -m venv``, then pip
        upgraded to the one that Python runs."""
        if ("pip", python) not in self.made:
            folder = self.work / f"pip-{python}"
            self.made["pip", python] = make_pip_venv(self.interpreter(python), folder)
        return self.made["pip", python]


def make_pip_venv(interpreter: str, folder: Path, host_config: bool = False) -> str:
    variables = {**os.environ, **PIP_QUIET}
    call([interpreter, "-m", "venv", str(folder)], variables, "python -m venv")
    py = str(folder / "bin" / "python")
    full = interpreters.probe(py) or ""
    call([py, "-m", "pip", "install", "--upgrade", *plain_index(host_config), stacks.pip_requirement(full)],
         variables, "pip install --upgrade pip")
    return py


def plain_index(host_config: bool) -> list[str]:
    """pip's index arguments without a cut-off: the user's index, CA bundle and proxy alone
    (``--isolated``), or with `host_config` the user's whole pip configuration beside that index,
    as the recipe before uv ran pip."""
    settings = pip_settings()
    if host_config:
        return ["--disable-pip-version-check", "--index-url", settings.index]
    return ["--isolated", "--disable-pip-version-check", "--index-url", settings.index,
            *(["--cert", settings.cert] if settings.cert else []),
            *(["--proxy", settings.proxy] if settings.proxy else [])]


@contextlib.contextmanager
def pip_index(env, py: str, host_config: bool = False):
    """pip's index arguments for `env` run by the pip of `py`."""
    if env.uploaded_before:
        with pip_arguments(env.uploaded_before, py) as (args, _via):
            yield ["--disable-pip-version-check", *args]
    else:
        yield plain_index(host_config)


# --- the two answers ------------------------------------------------------------------------------

def resolve_uv(env, tools: Tools) -> dict:
    """uv's answer: what the virtualenv holds after the harness's installs, dry-run: what it held
    (the seeded setuptools), less what uv would remove, plus what it would install."""
    py, holds = tools.uv_python(env.python)
    base = [installer.uv(), "pip", "install", "--python", py, *installer.options(env), "--dry-run"]
    said = call([*base, *installer.requirements(env)], installer.variables(), "uv pip install").splitlines()
    out = {n: v for n, v in holds.items() if n not in pins(said, _UV_GONE)}
    out.update(pins(said, _UV_LINE))
    if env.force:
        said = call([*base, "--no-deps", *env.force], installer.variables(), "uv pip install --no-deps")
        out.update(pins(said.splitlines(), _UV_LINE))
    seeded = tools.seed(env.python)
    return {"packages": dict(sorted(out.items())), "seeded": Path(seeded).name if seeded else None}


def report(py: str, args: list[str], work: Path, *, ignore_installed: bool = True) -> dict[str, str]:
    """pip's ``--dry-run --report``: what it would install, {name: version}."""
    path = work / "report.json"
    path.unlink(missing_ok=True)
    call([py, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(path),
          *(["--ignore-installed"] if ignore_installed else []), *args], {**os.environ, **PIP_QUIET},
         "pip install")
    data = json.loads(path.read_text())
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in data["install"]}


def installed(py: str) -> dict[str, str]:
    out = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                         env={**os.environ, **PIP_QUIET})
    return pins(out.stdout.splitlines())


def resolve_pip(env, tools: Tools, work: Path, host_config: bool = False) -> dict:
    """pip's answer: `packages`, the resolution from nothing (``--ignore-installed``) where pip can
    dry-run, and `environment`, what the recipe's virtualenv held after it (its seeded setuptools
    kept where they met the requirements)."""
    if stacks.python_tuple(env.python) < (3, 7):
        return build_pip(env, tools, work, host_config)
    py = tools.pip_python(env.python)
    seeded = installed(py)
    with pip_index(env, py, host_config) as index:
        packages = report(py, [*index, *env.requirements], work)
        forced = report(py, ["--no-deps", *index, *env.force], work) if env.force else {}
        packages.update(forced)
        packages.setdefault("pip", seeded.get("pip", "?"))
        kept = {n: v for n, v in seeded.items() if n != "pip"}
        if any(n in packages and packages[n] != v for n, v in kept.items()):
            # the recipe's virtualenv had these already: pip kept each that met the requirements
            environment = {**seeded, **report(py, [*index, *env.requirements], work, ignore_installed=False)}
        else:
            environment = {**kept, **packages}
        environment.update(forced)
    return {"packages": dict(sorted(packages.items())), "environment": dict(sorted(environment.items())),
            "seeded": dict(sorted(kept.items()))}


def build_pip(env, tools: Tools, work: Path, host_config: bool) -> dict:
    """The recipe before uv, whole, for a pip without ``--dry-run``: a throw-away virtualenv."""
    folder = work / "build"
    shutil.rmtree(folder, ignore_errors=True)
    try:
        py = make_pip_venv(tools.interpreter(env.python), folder, host_config)
        seeded = {n: v for n, v in installed(py).items() if n != "pip"}
        variables = {**os.environ, **PIP_QUIET}
        with pip_index(env, py, host_config) as index:
            call([py, "-m", "pip", "install", *index, *env.requirements], variables, "pip install")
            if env.force:
                call([py, "-m", "pip", "install", "--no-deps", *index, *env.force], variables,
                     "pip install --no-deps")
        environment = installed(py)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"packages": None, "environment": dict(sorted(environment.items())), "seeded": dict(sorted(seeded.items()))}


# --- comparing ------------------------------------------------------------------------------------

def same_version(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return a == b or Version(a) == Version(b)
    except InvalidVersion:
        return False


def build_tools_rule(env, name: str, uv: str | None, pip: str | None) -> bool:
    """uv resolved build tool `name` as of a later day than the cut-off (``installer.BUILD_TOOLS``)."""
    floor = installer.BUILD_TOOLS.get(name)
    if not (floor and env.uploaded_before and env.uploaded_before < floor and uv):
        return False
    try:
        return pip is None or Version(uv) > Version(pip)
    except InvalidVersion:
        return False


BUILD_TOOLS_RULE = "the build-tools rule: uv resolves it as of a later day than the cut-off"
SEED_KEPT = "venv's seed: pip kept the interpreter's bundled release, which met the requirements"
SEED_ONLY = "venv's seed: the interpreter's bundled release, which nothing requires"
SEED_EXTRA = "the harness's seed: a setuptools wheel that python -m venv does not seed for this interpreter"


def compare(env, uv: dict[str, str], pip: dict, uv_seed: str | None = None) -> list[tuple]:
    """What differs between uv's answer and the environment pip's recipe made: (package, uv, pip,
    rule) each, `rule` the harness's rule or a seed that explains it, or None. `uv_seed`: the wheel
    the harness seeded uv's virtualenv with, where it did; then pip's seed explains nothing, and a
    seeded release that pip's virtualenv never had is the harness's seed."""
    theirs, seeded = pip["environment"], ({} if uv_seed else pip["seeded"])
    ours = {}
    if uv_seed:
        with contextlib.suppress(ValueError):
            name, version, *_ = parse_wheel_filename(uv_seed)
            ours = {canonicalize_name(name): str(version)}
    out = []
    for name in sorted(set(uv) | set(theirs)):
        a, b = uv.get(name), theirs.get(name)
        if name in installer.TOOLS or same_version(a, b):
            continue
        if build_tools_rule(env, name, a, b):
            rule = BUILD_TOOLS_RULE
        elif b is not None and same_version(seeded.get(name), b):
            rule = SEED_ONLY if a is None else SEED_KEPT
        elif same_version(ours.get(name), a) and name not in pip["seeded"]:
            rule = SEED_EXTRA
        else:
            rule = None
        out.append((name, a, b, rule))
    return out


def host_differences(isolated: dict, configured: dict) -> list[tuple]:
    a, b = isolated["environment"], configured["environment"]
    return [(n, a.get(n), b.get(n)) for n in sorted(set(a) | set(b))
            if n not in installer.TOOLS and not same_version(a.get(n), b.get(n))]


# --- the run --------------------------------------------------------------------------------------

def answer(kind: str, fn, cached: dict, retry_failed: bool, valid=None) -> tuple[dict, bool]:
    """`cached[kind]` where `valid(it)` (if given) says it still answers, or a new answer from `fn()`
    ({"packages": ...} or {"error": ...}, with its seconds); and whether it is new."""
    old = cached.get(kind)
    if old and not (retry_failed and "error" in old) and (valid is None or valid(old)):
        return old, False
    started = time.monotonic()
    try:
        new = fn()
    except Failed as exc:
        new = {"error": str(exc)}
    new.update(seconds=round(time.monotonic() - started, 1),
               resolved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return new, True


def cell(text) -> str:
    return str(text).replace("|", "\\|") if text is not None else "--"


def describe(entry: dict) -> str:
    where = entry["where"]
    return where[0] + (f" (and {len(where) - 1} more)" if len(where) > 1 else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", nargs="*", help="matrix files (default: every *.yaml under matrices/ and examples/)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "harness-resolutions",
                        help="where each environment's answers are kept (default: %(default)s)")
    parser.add_argument("--host-config", action="store_true",
                        help="also resolve each environment without a cut-off with the user's whole pip "
                             "configuration, as the recipe before uv did, and print what that changes")
    parser.add_argument("--retry-failed", action="store_true", help="resolve again what failed before")
    parser.add_argument("--python", action="append", default=[], metavar="X.Y=PATH")
    args = parser.parse_args()
    started = time.monotonic()
    files = matrix_files(args.matrix)
    found, broken = environments(files)
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"{len(files)} matrices, {len(found)} distinct environments; answers kept in {args.cache}",
          file=sys.stderr, flush=True)
    rows, nothing_rows, failures, host_rows = [], [], [], []
    nothing_compared = host_compared = 0
    counts = {"identical": 0, "build tools": 0, "differ": 0, "unknown": 0, "failed": 0}
    with tempfile.TemporaryDirectory(prefix="resolutions-") as tmp:
        tools = Tools(Path(tmp), dict(p.split("=", 1) for p in args.python))
        for i, (key, entry) in enumerate(found.items(), 1):
            env = entry["env"]
            path = args.cache / f"{digest(key)}.json"
            cached = json.loads(path.read_text()) if path.exists() else {}
            kinds = {"uv": functools.partial(resolve_uv, env, tools),
                     "pip": functools.partial(resolve_pip, env, tools, Path(tmp))}
            if args.host_config and not env.uploaded_before:
                kinds["pip_host_config"] = functools.partial(resolve_pip, env, tools, Path(tmp), host_config=True)
            said = []
            # an answer of uv's from before the harness seeded setuptools as it does now is made again
            seed = tools.seed(env.python)
            checks = {"uv": lambda old, seed=seed: old.get("seeded") == (Path(seed).name if seed else None)}
            for kind, fn in kinds.items():
                got, new = answer(kind, fn, cached, args.retry_failed, checks.get(kind))
                cached[kind] = got
                if new:
                    cached["key"] = list(key)
                    part = path.with_suffix(".part")
                    part.write_text(json.dumps(cached, indent=1, sort_keys=True))
                    os.replace(part, path)
                said.append(f"{kind} {'failed' if 'error' in got else 'ok'} {got['seconds']} s"
                            f"{'' if new else ' (kept)'}")
            uv, pip = cached["uv"], cached["pip"]
            label = (describe(entry), env.python, env.uploaded_before or "--")
            if "error" in uv or "error" in pip:
                counts["failed"] += 1
                failures.extend((*label, kind, cached[kind]["error"]) for kind in ("uv", "pip")
                                if "error" in cached[kind])
                verdict = "failed"
            else:
                diff = compare(env, uv["packages"], pip, uv.get("seeded"))
                rows.extend((*label, *d) for d in diff)
                differ = [d for d in diff if d[3] != BUILD_TOOLS_RULE]
                verdict = "differ" if differ else "build tools" if diff else "identical"
                counts[verdict] += 1
                counts["unknown"] += any(d[3] is None for d in differ)
                if pip["packages"] is not None:
                    nothing_compared += 1
                    nothing = {"environment": pip["packages"], "seeded": {}}
                    skip = set(pip["seeded"]) if uv.get("seeded") else set()  # a seed's, both sides
                    nothing_rows.extend((*label, *d[:3]) for d in compare(env, uv["packages"], nothing)
                                        if d[3] != BUILD_TOOLS_RULE and d[0] not in skip)
                if diff:
                    verdict += f" ({', '.join(sorted(d[0] for d in diff))})"
            other = cached.get("pip_host_config") if "pip_host_config" in kinds else None
            if other:
                host_compared += 1
                if "error" in other or "error" in pip:
                    if ("error" in other) != ("error" in pip):
                        host_rows.append((*label, "(resolution)", pip.get("error", "resolved"),
                                          other.get("error", "resolved")))
                else:
                    host_rows.extend((*label, *d) for d in host_differences(pip, other))
            print(f"[{i}/{len(found)}] {describe(entry)} (Python {env.python}, cut-off "
                  f"{env.uploaded_before or 'none'}): {'; '.join(said)}: {verdict}", file=sys.stderr, flush=True)

    print(f"# {installer.version()} against the recipe before uv (pip), {time.strftime('%Y-%m-%d')}\n")
    print(f"{len(files)} matrices, {len(found)} distinct environments: "
          f"{counts['identical'] + counts['build tools']} identical ({counts['build tools']} of them but for a "
          f"build tool the build-tools rule resolves later), {counts['differ']} differing ({counts['unknown']} "
          f"with a difference this bench names no reason for), {counts['failed']} failed (pip itself left out)\n")
    if broken:
        print("## matrices that did not load\n")
        print("\n".join(f"- {b}" for b in broken) + "\n")
    tables = [
        ("versions that differ, each with its reason where this bench knows it", rows,
         ("package", "uv", "pip", "reason")),
        ("failed resolutions", failures, ("installer", "why")),
        (f"uv against pip from nothing (--ignore-installed; the {nothing_compared} environments on Python >= 3.7): "
         "the resolvers alone, the seeded setuptools aside", nothing_rows, ("package", "uv", "pip")),
    ]
    grouped: dict[tuple, int] = {}
    for row in rows:
        if row[6] is not None:
            group = (row[6], row[3], row[1], cell(row[4]), cell(row[5]))
            grouped[group] = grouped.get(group, 0) + 1
    print("## the differences whose reason this bench knows, grouped\n")
    print("| reason | package | Python | uv | pip | environments |\n|---|---|---|---|---|---|" if grouped else "none")
    for group, count in sorted(grouped.items(), key=lambda kv: (kv[0][:2], stacks.python_tuple(kv[0][2]), kv[0][3:])):
        print("| " + " | ".join(map(cell, (*group, count))) + " |")
    print()
    if args.host_config:
        tables.append((f"pip with the user's whole pip configuration against pip isolated (the {host_compared} "
                       "environments without a cut-off)", host_rows, ("package", "pip isolated", "pip configured")))
    for title, table, heads in tables:
        print(f"## {title}\n")
        if not table:
            print("none\n")
            continue
        print("| environment | Python | cut-off | " + " | ".join(heads) + " |")
        print("|" + "---|" * (3 + len(heads)))
        for row in sorted(table, key=lambda r: tuple(cell(c) for c in r)):
            print("| " + " | ".join(cell(c) for c in row) + " |")
        print()
    print(f"took {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
