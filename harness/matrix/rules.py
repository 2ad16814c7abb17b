"""Which of the include / exclude / expect rules match which cells: the rules
checked as written, then matched by bit masks in time linear in the cells."""

from __future__ import annotations

import fnmatch
import re

from harness import status
from harness.cells import Environment
from harness.matrix.checker import _Checker, _key, _show
from harness.matrix.schema import EXPECT_KEYS, MAX_RULES, RULE_KEYS, VALUE_KEYS
from harness.status import values


class _Rules:
    """Which of a list of rules (include, exclude or expect) match which cells,
    in time linear in the cells, whatever the number of rules.

    A rule matches a cell when, for each field it names, the cell's value fits
    one of its glob patterns. Each field takes few distinct values (a handful
    of environments, batch sizes, repeats), so each pattern is compiled once
    and tried once per distinct value, giving per value a bit mask of the rules
    it satisfies; a cell's matching rules are then the AND of its fields'
    masks. Checking every rule against every cell instead cost cells x rules x
    patterns, hours for a matrix well within the size limits.
    """

    def __init__(self, rules: list[dict], domains: dict[str, list]):
        self.rules = rules
        everything = (1 << len(rules)) - 1
        self.masks: dict[str, dict] = {}
        for key, seen in domains.items():
            named = []  # (bit, pattern) for the rules that name this field
            for bit, rule in enumerate(rules):
                if key in rule:
                    options = rule[key] if isinstance(rule[key], list) else [rule[key]]
                    named.append((bit, re.compile("|".join(f"(?:{fnmatch.translate(str(o))})" for o in options))
                                  if options else None))
            free = everything & ~sum(1 << bit for bit, _ in named)  # rules that do not name the field
            self.masks[key] = {value: free | sum(1 << bit for bit, pattern in named
                                                 if pattern is not None and pattern.match(str(value)))
                               for value in seen}

    @staticmethod
    def work(rule_lists: list[list[dict]], domains: dict[str, list]) -> int:
        """Pattern tests the masks cost: distinct values x patterns, per field."""
        total = 0
        for rules in rule_lists:
            for rule in rules:
                for key, want in rule.items():
                    if key in domains:
                        total += len(domains[key]) * (len(want) if isinstance(want, list) else 1)
        return total

    def mask(self, key: str, value) -> int:
        return self.masks[key][value]

    def first(self, mask: int) -> dict | None:
        return self.rules[(mask & -mask).bit_length() - 1] if mask else None

    def every(self, mask: int) -> list[dict]:
        """The matching rules, in order (an expectation's status rule and every value rule)."""
        out = []
        while mask:
            low = mask & -mask
            out.append(self.rules[low.bit_length() - 1])
            mask ^= low
        return out


def _rules(check: _Checker, raw: dict, key: str, allowed: dict) -> list[dict]:
    rules = raw.get(key, []) if isinstance(raw.get(key, []), list) else []
    if len(rules) > MAX_RULES:
        check.problem(key, f"at most {MAX_RULES} rules, got {len(rules)}")
        return []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            check.problem(f"{key}[{i}]", f"expected a mapping, got {_show(rule)}")
            continue
        check.keys(f"{key}[{i}]", rule, allowed)
        for name, want in rule.items():
            if name in VALUE_KEYS:
                continue  # typed by keys(), checked by values.check
            options = want if isinstance(want, list) else [want]
            if not all(isinstance(o, (str, int)) and not isinstance(o, bool) for o in options):
                check.problem(f"{key}[{i}].{_key(name)}", f"expected strings or integers, got {_show(want)}")
            for o in options:
                check.text(f"{key}[{i}].{_key(name)}", o)
    return [r for r in rules if isinstance(r, dict)]


def _checked_rules(check: _Checker, raw: dict, environments: list[Environment]) -> tuple[list, list, list]:
    """include, exclude and expect as written; an expectation's status and value rules too
    (a value `same_as` names one of `environments`)."""
    includes = _rules(check, raw, "include", RULE_KEYS)
    excludes = _rules(check, raw, "exclude", RULE_KEYS)
    expects = _rules(check, raw, "expect", EXPECT_KEYS)
    for i, rule in enumerate(expects):
        if "metric" in rule:
            values.check(check, f"expect[{i}]", rule, [e.name for e in environments])
            if "status" not in rule:
                continue
        if rule.get("status") not in status.ALL:
            check.problem(f"expect[{i}].status", f"expected one of {', '.join(status.ALL)}, "
                          f"got {_show(rule.get('status'))}")
    return includes, excludes, expects
