"""Below releases: the nights between the two releases on either side of a change.

Between two releases of TensorFlow or Keras lie weeks of commits, and the package index holds a
build of the main branch for (nearly) every night: tf-nightly, keras-nightly, tf-keras-nightly.
After a release bisect, `bisect --nightly` searches those builds, as of the same cut-off, for the
first night that changed the cells the way the releases did -- the first bad night of a break,
the first good night of a mend (cargo-bisect-rustc's releases -> nightlies -> commits, one step
of it): the window then holds a day of commits, and the upstream repository's history for those
dates is where the change is (`history_url`).

The window is every build uploaded after the release before the change (the last good of a break,
the last bad of a mend) and before the first one after it, plus the last build before it and the
first after it, so the search has a night on each side of the change. A change that reached the
release through a release branch (a cherry-pick made before the older release, or a change of the
branch alone) has no such pair of nights: the search then says which end night does not do what
its release does, and why that can be.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.errors import UserError
from harness.index import releases

# The nightly distribution of each package that has one, and the repository it is built from.
NIGHTLIES = {"tensorflow": "tf-nightly", "keras": "keras-nightly", "tf-keras": "tf-keras-nightly"}
REPOSITORIES = {"tensorflow": "https://github.com/tensorflow/tensorflow",
                "keras": "https://github.com/keras-team/keras",
                "tf-keras": "https://github.com/keras-team/tf-keras"}


@dataclass(frozen=True)
class Window:
    package: str
    nightly: str
    old: str             # the release before the change (last good of a break, last bad of a mend)
    new: str             # the first release after it
    since: str           # its upload time
    until: str
    nights: list[str]    # the builds to search, in the order they were uploaded
    uploaded: dict       # build -> upload time, for those builds

    def day(self, night: str) -> str:
        return (self.uploaded.get(night) or "")[:10]


def nightly_of(package: str, asked: str | None) -> str:
    """The nightly distribution to search: the one asked, or the package's own."""
    if asked and asked != "auto":
        if not releases.NAME_RE.fullmatch(asked):
            raise UserError(f"--nightly {asked!r} is not a package name")
        return asked
    name = NIGHTLIES.get(canonicalize_name(package))
    if name is None:
        raise UserError(f"{package} has no nightly distribution this harness knows ({', '.join(NIGHTLIES)} do); "
                        "name one: --nightly PACKAGE")
    return name


def window(package: str, nightly: str, old: str, new: str, python: str, *, offline: bool = False,
           as_of: str | None = None) -> Window:
    """The nightly builds between releases `old` and `new` of `package` (see the module's doc)."""
    since, until = releases.uploaded(package, old, offline=offline), releases.uploaded(package, new, offline=offline)
    if not since or not until:
        raise UserError(f"the index gives no upload time for {package} {old if not since else new}: "
                        "no nightly window can be placed")
    try:
        project = releases.project(nightly, offline=offline)
    except releases.ReleasesUnavailable as exc:
        raise UserError(f"cannot list the builds of {nightly}: {exc}") from None
    if as_of:
        project = project.as_of(as_of)
    uploaded = {}
    for version in project.releases():
        when = project.uploaded(str(version))
        if when and not project.why_not(version, python):
            uploaded[str(version)] = when
    inside = sorted((v for v, t in uploaded.items() if since < t < until), key=lambda v: (uploaded[v], _order(v)))
    before = sorted((v for v, t in uploaded.items() if t <= since), key=lambda v: uploaded[v])
    after = sorted((v for v, t in uploaded.items() if t >= until), key=lambda v: uploaded[v])
    nights = ([before[-1]] if before else []) + inside + ([after[0]] if after else [])
    if not inside:
        raise UserError(f"no build of {nightly} for Python {python} was uploaded between {package} {old} "
                        f"({since[:10]}) and {new} ({until[:10]}): there is no night to search")
    return Window(package, nightly, old, new, since, until, nights, {n: uploaded[n] for n in nights})


def _order(version: str):
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def history_url(package: str, since: str, until: str) -> str | None:
    """The upstream repository's commits between two days (inclusive), where there is one."""
    repo = REPOSITORIES.get(canonicalize_name(package))
    if not repo:
        return None
    return f"{repo}/commits/master?since={since[:10]}&until={until[:10]}"
