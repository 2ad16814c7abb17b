"""The project's own toolchain: what its nox sessions and CI install, and how it is watched.

``lockfile``: the lock (``lock.txt``) read and selected with the standard library only, so
the noxfile and CI can use it before anything is installed. ``resolve``: ``nox -s lock``,
which makes it with the harness's release-date cut-off. ``latest``: ``nox -s tests-latest``,
the suite against the newest releases, and the upstream release that broke a test, found
with the harness's own ``bisect``.
"""
