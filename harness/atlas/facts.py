"""The release-note truths the atlas is held to (``facts.yaml``), each with its source.

One file, two readers: `publish` names, beside a change between neighbouring rows, a release
whose notes changed the model's defaults (the change is then not the release's alone), and
`atlas audit` checks the published atlas against every fact. A fact found wrong is mended in the
file, with its new source -- never by editing the atlas to agree."""

from __future__ import annotations

from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from harness.atlas.rows import parse_version
from harness.errors import UserError

FACTS = Path(__file__).with_name("facts.yaml")  # the harness's own: release-note truths with their sources
FACT_KINDS = ("reports", "removed", "available", "defaults", "tagged")


def load_facts(path: Path = FACTS) -> list[dict]:
    """The facts file, checked: a fact of an unknown kind or without its source is the user's error."""
    try:
        facts = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: not a readable facts file ({type(exc).__name__})") from None
    if not isinstance(facts, list):
        raise UserError(f"{path}: a list of facts expected")
    for i, fact in enumerate(facts):
        if not isinstance(fact, dict) or fact.get("kind") not in FACT_KINDS or not fact.get("source"):
            raise UserError(f"{path}: fact {i + 1} ({fact.get('id') if isinstance(fact, dict) else fact!r}): "
                            f"needs a kind ({', '.join(FACT_KINDS)}) and a source")
        if not fact.get("releases") and not fact.get("release"):
            raise UserError(f"{path}: fact {fact.get('id')}: names neither `release` nor `releases`")
        try:
            SpecifierSet(str(fact.get("releases", "")))
        except InvalidSpecifier:
            raise UserError(f"{path}: fact {fact.get('id')}: releases {fact.get('releases')!r} is no version range")
    return facts


def pinned_alike(names, before: dict, after: dict) -> bool:
    """Whether both sides pinned every one of `names` (layer arguments), each to the same value."""
    return all(n in before and n in after and before[n] == after[n] for n in names)


def defaults_crossed(facts: list[dict], package_moves: dict[str, tuple], model: str,
                     pinned: tuple[dict, dict] = ({}, {})) -> list[dict]:
    """The `defaults` facts a change crosses: a release of a package that moved between the two
    rows (``{package: (before, after)}`` as versions), whose notes changed `model`'s defaults --
    unless the cells on both sides pinned every one of those arguments to the same value
    (`pinned`: each side's `layer_args`): then both built the same model, and the change is the
    release's own."""
    out = []
    for fact in facts:
        if fact["kind"] != "defaults" or model not in fact.get("models", ()):
            continue
        if fact.get("names") and pinned_alike(fact["names"], *pinned):
            continue
        lo, hi = (parse_version(v) for v in package_moves.get(fact["package"], (None, None)))
        at = parse_version(fact["release"])
        if None not in (lo, hi, at) and lo < at <= hi:
            out.append(fact)
    return out
