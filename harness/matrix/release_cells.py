"""The cell a release search tests: a matrix cell with one package pinned to another release.

Made the way a range in the matrix makes it (the pin in the same place, the same name), so a
release the search tests and the same release of `run` are one cell with one result; and
rebuilt the same way by a Slurm task from its submission's record (`derivation`), which is why
it lives below both the search (`bisect`) and the executors."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness import stacks
from harness.cells import Cell, Environment
from harness.index import releases


def _field_of(env: Environment, package: str) -> str:
    name = canonicalize_name(package)
    if name == "tensorflow" and env.tensorflow:
        return "tensorflow"
    if name == canonicalize_name(stacks.keras_package(env.api) or "keras") and env.keras:
        return "keras"
    return "packages"


def _token(package: str, version: str, fld: str) -> str:
    if fld == "tensorflow":
        return f"tf{stacks.short_version(version)}"
    if fld == "keras":
        return f"keras{version}"
    return f"{package}{version}"


def current_version(env: Environment, package: str) -> str | None:
    fld = _field_of(env, package)
    if fld != "packages":
        return getattr(env, fld)
    for text in env.packages:
        req = Requirement(text)
        if canonicalize_name(req.name) == canonicalize_name(package):
            exact = [s.version for s in req.specifier if s.operator == "=="]
            return exact[0] if exact else None
    return None


def with_release(env: Environment, package: str, version: str, cutoff: str | None) -> Environment:
    """`env` with `package` pinned to `version` (its name saying so), resolving as of `cutoff`.

    Made the way a range in the matrix makes it (the pin in the same place, the same
    name, the matrix's range recorded when the release lies in it), so that a release
    the bisect tests and the same release of `run` are one cell with one result."""
    fld = _field_of(env, package)
    old = current_version(env, package)
    if fld == "packages":
        packages = list(env.packages)
        at = next((i for i, p in enumerate(packages)
                   if canonicalize_name(Requirement(p).name) == canonicalize_name(package)), None)
        if at is None:
            packages.append(f"{package}=={version}")
        else:
            packages[at] = f"{package}=={version}"
        new = dataclasses.replace(env, packages=tuple(packages))
    else:
        new = dataclasses.replace(env, **{fld: version})
    tokens = env.name.split("-")
    mine = _token(package, old, fld) if old else None
    token = _token(package, version, fld)
    tokens = [token if t == mine else t for t in tokens] if mine in tokens else [*tokens, token]
    ranges = []
    for name, spec, chosen in env.ranges or ((package, "bisect", version),):
        if canonicalize_name(name) == canonicalize_name(package):
            inside = spec != "bisect" and releases.parse_range(spec).contains(version, prereleases=True)
            ranges.append((name, spec if inside else "bisect", version))
        else:
            ranges.append((name, spec, chosen))
    if not any(canonicalize_name(r[0]) == canonicalize_name(package) for r in ranges):
        ranges.append((package, "bisect", version))
    return dataclasses.replace(new, name="-".join(tokens), uploaded_before=cutoff, ranges=tuple(ranges))


def open_stack(env: Environment, package: str) -> str:
    """Which release series `env` lies on along `package`: a digest of everything that decides
    what the environment is -- its Python, every other pin and forced pin, the Keras API and
    backend, the device and base image, its variables -- with `package`'s release left open.

    Never its name: names are for people, and one series may be named several ways (a range
    over ``tensorflow:`` names 2.10.1 ``tf2.10.1`` but 2.11.0 ``tf2.11``; a user's ``name:``
    gives another form again). Nor its cut-off, which moves with the release, or the range's
    text, which a user may widen without starting the series again."""
    fld = _field_of(env, package)

    def opened(pins: tuple[str, ...]) -> list[str]:
        return [f"{canonicalize_name(package)}==*"
                if canonicalize_name(Requirement(p).name) == canonicalize_name(package) else p for p in pins]
    spec = {"python": env.python, "tensorflow": env.tensorflow, "keras": env.keras, "backend": env.backend,
            "packages": opened(env.packages), "force": opened(env.force), "device": env.device,
            "base_image": env.base_image, "keras_api": env.api, "tensorflow_package": env.tensorflow_package,
            "env": [list(kv) for kv in env.env],
            "other releases": sorted([p, v] for p, _, v in env.ranges
                                     if canonicalize_name(p) != canonicalize_name(package))}
    if fld != "packages":
        spec[fld] = "*"
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def with_nightly(env: Environment, package: str, nightly: str, version: str, cutoff: str | None) -> Environment:
    """`env` with `package` replaced by one build of its nightly distribution (`nightly`, e.g.
    keras-nightly, which installs the same module): in TensorFlow's place (its package named),
    beside the Keras API the environment had (keras-nightly is Keras 3 whatever its number), or
    for the package's own pin. Named with the build in place of the release."""
    fld = _field_of(env, package)
    pin = f"{nightly}=={version}"
    if fld == "tensorflow":
        new = dataclasses.replace(env, tensorflow=version, tensorflow_package=nightly)
    elif fld == "keras":
        new = dataclasses.replace(env, keras=None, keras_api=env.api, packages=(*env.packages, pin))
    else:
        kept = [p for p in env.packages if canonicalize_name(Requirement(p).name) != canonicalize_name(package)]
        new = dataclasses.replace(env, packages=(*kept, pin))
    old = current_version(env, package)
    mine = _token(package, old, fld) if old else None
    tokens = env.name.split("-")
    token = f"{nightly}{version}"
    tokens = [token if t == mine else t for t in tokens] if mine in tokens else [*tokens, token]
    ranges = [r for r in env.ranges if canonicalize_name(r[0]) != canonicalize_name(package)]
    return dataclasses.replace(new, name="-".join(tokens), uploaded_before=cutoff,
                               ranges=(*ranges, (nightly, "nightly", version)))


def derived_cell(base: Cell, package: str, version: str, cutoff: str | None, repeat: int,
                 nightly: str | None = None) -> Cell:
    """`base` (a cell of the matrix) with `package` at `version` (or, with `nightly`, that build of
    its nightly distribution), resolving as of `cutoff`: the cell a search tests. One definition
    for the search and for a Slurm task, which rebuilds the cell from the matrix it loads and its
    submission's record (`derivation`)."""
    env = (with_nightly(base.environment, package, nightly, version, None) if nightly
           else with_release(base.environment, package, version, None))
    env = dataclasses.replace(env, uploaded_before=cutoff)
    return dataclasses.replace(base, environment=env, repeat=repeat, expect=_values_only(base.expect))


def derivation(cell: Cell, base: Cell, package: str, version: str) -> dict:
    """What a Slurm task needs to rebuild `cell` with `derived_cell`."""
    return {"base": base.id, "package": package, "version": version, "cutoff": cell.environment.uploaded_before,
            "repeat": cell.repeat}


def _values_only(expect: dict | None) -> dict | None:
    """What of a cell's `expect:` a search keeps: the values it must give (a release that gives
    another is bad, see `judge`), not a status -- the search's yardstick is the good end's status."""
    if not expect or not expect.get("values"):
        return None
    return {"values": expect["values"], "why": expect.get("why")}
