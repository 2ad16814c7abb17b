"""Version ranges (``harness.index.releases``): an environment whose tensorflow,
keras or packages name a range becomes one environment per release in it
(every combination), each named for its releases and, with ``releases:
{cutoff: true}``, installed as of its upload time.

Bounded (MAX_RANGES, MAX_RANGE_ENVIRONMENTS) because each range may ask the
package index, and each release is a whole environment to build.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from harness.cells import Environment
from harness.index import releases
from harness.matrix.checker import _Checker, _is_type, _key, _show
from harness.matrix.environment import _environment
from harness.matrix.schema import (
    MAX_RANGE_ENVIRONMENTS,
    MAX_RANGES,
    MAX_REQUIREMENT,
    PYTHON_RE,
    RANGE_EXAMPLE,
    RELEASES_KEYS,
    WATCH_KEYS,
)


def _release_options(check: _Checker, raw) -> releases.Options:
    if not isinstance(raw, dict):
        return releases.Options()
    check.keys("releases", raw, RELEASES_KEYS)
    every = raw.get("every", "patch")
    if every not in releases.EVERY:
        check.problem("releases.every", f"expected one of {', '.join(releases.EVERY)}, got {_show(every)}")
    if "margin_days" in raw:
        check.bounded("releases.margin_days", raw["margin_days"], 0, 3650)
    pick = {k: raw[k] for k in RELEASES_KEYS if k in raw and _is_type(raw[k], RELEASES_KEYS[k])}
    if pick.get("every") not in (None, *releases.EVERY):
        pick.pop("every")
    return releases.Options(**pick)


def _watch_options(check: _Checker, raw) -> None:
    """`watch: {pre: true}`: when `harness watch` expands the ranges (its resolver says
    `watching`), pre-releases count too -- rc's, and the dev releases that are all nightly packages
    such as tf-nightly publish; `run`, `list` and `bisect` keep `releases:` as written.
    `watch: {nightly: true}` (or a nightly distribution's name): a new break the watch bisects is
    followed below the releases into the nightly builds (`bisect --nightly`)."""
    if raw is None or not isinstance(raw, dict):
        return  # absent; a non-mapping is reported by the top-level type check
    check.keys("watch", raw, WATCH_KEYS)
    if raw.get("pre") is True and getattr(check.resolver, "watching", False):
        check.release_options = dataclasses.replace(check.release_options, pre=True)
    nightly = raw.get("nightly")
    if isinstance(nightly, str):
        check.name("watch.nightly", nightly)
    check.watch_nightly = "auto" if nightly is True else (nightly if isinstance(nightly, str) else None)


def _ranges_of(check: _Checker, where: str, raw: dict) -> list[tuple[str, int | None, str, str]]:
    """The ranges an environment asks to expand: (field, index in packages, package, range)."""
    found = []
    for fld in ("tensorflow", "keras"):
        value = raw.get(fld)
        if releases.is_range(value):
            if len(value) > MAX_REQUIREMENT or releases.parse_range(value) is None:
                check.problem(f"{where}.{fld}", f"{_show(value)} is not a version or a range (PEP 440), "
                              f"{RANGE_EXAMPLE}")
            else:
                package = "tf_keras" if fld == "keras" and raw.get("keras_api") == "tf_keras" else fld
                found.append((fld, None, package, value))
    packages = raw.get("packages")
    for i, entry in enumerate(packages if isinstance(packages, list) else []):
        if not isinstance(entry, dict):
            continue
        at = f"{where}.packages[{i}]"
        if len(entry) != 1:
            check.problem(at, f"a range is one package and its range, e.g. {{numpy: '>=1.26,<2.1'}}; "
                              f"got {_show(entry)}")
            continue
        name, spec = next(iter(entry.items()))
        if not isinstance(name, str) or not releases.NAME_RE.fullmatch(name):
            check.problem(at, f"{_show(name)} is not a package name")
        elif not isinstance(spec, str) or len(spec) > MAX_REQUIREMENT or not releases.is_range(spec) \
                or releases.parse_range(spec) is None:
            check.problem(f"{at}.{_key(name)}", f"{_show(spec)} is not a range (PEP 440), e.g. '>=1.26,<2.1'")
        else:
            found.append(("packages", i, name, spec))
    return found


def _short(package: str) -> str:
    return {"tensorflow": "tf", "tf_keras": "tf_keras"}.get(package, package)


def _environments(check: _Checker, where: str, raw: dict) -> list[Environment] | Environment | None:
    """One environment, or one per release of each range it holds (every combination)."""
    before = len(check.problems)
    ranges = _ranges_of(check, where, raw)
    if not ranges:
        return _environment(check, where, raw) if len(check.problems) == before else None
    python = raw.get("python")
    if len(check.problems) > before or not isinstance(python, str) or not PYTHON_RE.fullmatch(python):
        placeholder = {k: ("1.0" if releases.is_range(v) else v) for k, v in raw.items() if k != "packages"}
        _environment(check, where, placeholder)  # reports what else is wrong (the python, keys)
        return None
    check.ranges += len(ranges)
    if check.ranges > MAX_RANGES:
        check.problem(where, f"at most {MAX_RANGES} version ranges in one matrix (each may ask the package index)")
        return None
    resolver = check.resolver = check.resolver or releases.Resolver()
    options = check.release_options
    lists, waiting = [], False
    for fld, index, package, spec in ranges:
        at = f"{where}.{fld}" + (f"[{index}]" if index is not None else "")
        try:
            found = resolver.expand(package, spec, python, options)
        except releases.ReleasesUnavailable as exc:
            check.problem(at, f"cannot list the releases of {package}: {exc}")
            continue
        if not found.versions and getattr(resolver, "watching", False) and not found.skipped:
            # a watch of a range with no release yet (a future major, a replayed date before the
            # first): nothing to run for this environment today, which is no error (expand.py)
            resolver.not_yet.append(f"{package} {spec}")
            waiting = True
            continue
        if not found.versions:
            why = "; ".join(f"{v}: {r}" for v, r in list(found.skipped.items())[:3])  # all yanked
            check.problem(at, f"no release of {package} in {spec} for Python {python} on {found.index}"
                              + (f" ({why})" if why else ""))
            continue
        lists.append([(fld, index, package, spec, v) for v in found.versions])
    if len(check.problems) > before:
        return None
    if waiting:
        return []
    count = math.prod(len(options) for options in lists)
    check.expanded += count
    if check.expanded > MAX_RANGE_ENVIRONMENTS:
        check.problem(where, f"the version ranges expand to more than {MAX_RANGE_ENVIRONMENTS} environments "
                             f"({count} here); narrow them, or use releases: {{every: minor}}")
        return None
    out = []
    for combo in itertools.product(*lists):
        new = dict(raw)
        packages = list(raw.get("packages") or [])
        for fld, index, package, _spec, version in combo:
            if fld == "packages":
                packages[index] = f"{package}=={version}"
            else:
                new[fld] = version
        if "packages" in raw:
            new["packages"] = packages
        # the name says which release: the derived name has tf / keras already, a given one has nothing
        tags = [f"{_short(p)}{v}" for fld, _, p, _, v in combo if fld == "packages" or "name" in raw]
        if "name" in raw and isinstance(raw["name"], str):
            new["name"] = "-".join([raw["name"], *tags])
        env = _environment(check, where, new)
        if env is None:
            return None
        if "name" not in raw and tags:
            name = "-".join([env.name, *tags])
            check.name(where, name, derived=True)
            env = dataclasses.replace(env, name=name)
        cutoff = None
        if options.cutoff:
            cutoff = releases.cutoff_of([resolver.uploaded(p, v) for p, v in releases.exact_pins(env)],
                                        options.margin_days)
        out.append(dataclasses.replace(env, ranges=tuple((p, releases.range_text(s), v)
                                                         for _, _, p, s, v in combo),
                                       uploaded_before=cutoff))
    return out
