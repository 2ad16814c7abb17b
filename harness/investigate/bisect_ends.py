"""The releases a bisect searches, as the user names them: the command line's ends, checked.

Kept apart from the search (``bisect_search``): a user names the ends three ways (--good/--bad in
either order, --old/--new, --range) and every one is checked here, once, before anything loads
-- `reduce --package` and the watch's bisect take the same ends through `bounds`.
"""

from __future__ import annotations

import math

from packaging.version import InvalidVersion, Version

from harness.errors import UserError
from harness.index import releases
from harness.index.nightly import nightly_of
from harness.investigate.bisect_search import BROKE, MENDED


def checked(args) -> str | None:
    """The command line's own checks, before anything loads: the criteria are numbers in range,
    one way of naming the bounds (`ends`), and the nightly distribution to search below them (or None)."""
    for name in ("accuracy_drop", "speed_drop"):
        value = getattr(args, name)
        if value is not None and (not math.isfinite(value) or value < 0 or (name == "speed_drop" and value >= 100)):
            raise UserError(f"--{name.replace('_', '-')} expects a number >= 0"
                            + (" and < 100" if name == "speed_drop" else "") + f", got {value}")
    if args.spec and (args.good or args.bad or args.old or args.new):
        raise UserError("give either --range or --good/--bad (or --old/--new), not both")
    if (args.good or args.bad) and (args.old or args.new):
        raise UserError("name the ends one way: --good and --bad, or --old and --new")
    ends(args)
    nightly = nightly_of(args.package, args.nightly) if args.nightly else None
    if nightly and args.executor == "slurm":
        raise UserError("--nightly searches on this host: leave out --executor slurm")
    return nightly


def ends(args) -> tuple[str | None, str | None, str | None]:
    """The two releases the command line names, older first, and the direction its words claim.

    --old/--new name the ends by age and claim nothing: what they do decides. --good/--bad name
    them by what the user believes they do, in either order: a good release newer than the bad
    one asks where a break was mended. Either way the search goes where the ends' outcomes point
    (`search`); a claim they contradict is said, not obeyed. (None, None, None) for --range."""
    if args.spec:
        return None, None, None
    flags, first, second = (("--old", "--new"), args.old, args.new) if (args.old or args.new) \
        else (("--good", "--bad"), args.good, args.bad)
    if not first or not second:
        raise UserError("give --good and --bad (in either order), --old and --new, or --range")
    for flag, value in zip(flags, (first, second), strict=True):
        try:
            Version(value)
        except InvalidVersion:
            raise UserError(f"{flag} {value!r} is not a version (PEP 440), e.g. '1.26.4'") from None
    if Version(first) == Version(second):
        raise UserError(f"{flags[0]} {first} and {flags[1]} {second} are the same release: nothing lies between")
    if flags[0] == "--old":
        if Version(first) > Version(second):
            raise UserError(f"--old {first} must be older than --new {second}")
        return first, second, None
    return (first, second, BROKE) if Version(first) < Version(second) else (second, first, MENDED)


def bounds(package: str, python: str, *, good: str | None, bad: str | None, spec: str | None, pre: bool,
           resolver: releases.Resolver) -> list[str]:
    """The releases to search, oldest first: those of `spec`, or from `good` (the older end) to `bad`
    inclusive. The command line's ends come through `ends`, older first, whatever they are called."""
    if not releases.NAME_RE.fullmatch(package):
        raise UserError(f"--package {package!r} is not a package name (letters, digits, '.', '_', '-')")
    for flag, value in (("--good", good), ("--bad", bad)):
        try:
            if value is not None:
                Version(value)
        except InvalidVersion:
            raise UserError(f"{flag} {value!r} is not a version (PEP 440), e.g. '1.26.4'") from None
    if spec is None:
        if not good or not bad:
            raise UserError("give --good and --bad, or --range")
        if Version(good) >= Version(bad):
            raise UserError(f"--good {good} must be older than --bad {bad}")
        spec = f">={good},<={bad}"
    if releases.parse_range(spec) is None:
        raise UserError(f"--range {spec!r} is not a range (PEP 440), e.g. '>=1.26,<2.1'")
    try:
        found = resolver.expand(package, spec, python, releases.Options(pre=pre))
    except releases.ReleasesUnavailable as exc:
        raise UserError(f"cannot list the releases of {package}: {exc}") from None
    # releases without a file for this Python, and yanked ones, are tried too: pip's reason skips them
    listed = sorted({*found.versions, *found.skipped}, key=Version)
    for end in (good, bad):
        if end and end not in listed:
            raise UserError(f"{package} {end} is not a release on {found.index} (releases in range: "
                            f"{', '.join(listed[:12]) or 'none'})")
    if len(listed) < 2:
        raise UserError(f"{package} {spec}: fewer than two releases to search ({', '.join(listed) or 'none'})")
    return listed
