"""A tool that sorts version strings the way pip once did: with packaging's
LegacyVersion for strings that are not PEP 440 ("2013b", "1.0-custom").

packaging 22.0 removed LegacyVersion (and made parse() refuse such strings):
https://github.com/pypa/packaging/blob/main/CHANGELOG.rst (22.0, "Remove
LegacyVersion and LegacySpecifier", pypa/packaging#407). Python 3.5+ syntax.
"""
from packaging.version import LegacyVersion, Version  # ImportError from packaging 22.0 on


def key(text):
    try:
        return Version(text)
    except Exception:
        return LegacyVersion(text)


versions = sorted(["1.0", "2013b", "0.9", "1.0-custom"], key=key)
print("sorted:", versions)
