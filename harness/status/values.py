"""Value expectations: `expect:` about numbers, not only statuses.

A silent change in behaviour (a parameter count that differs across stacks, a
default learning rate that moved) is a finding only if something compares
it. An `expect:` rule with ``metric:`` does::

    expect:
      - {workload: gru-count, metric: parameters, equals: 12676}
      - {workload: my-ranker, metric: val_accuracy, same_as: tf2.15, within: 0.02}
      - {workload: issue-1234, metric: lr, equals: 0.01, relative: 0.001}

``equals`` compares with a number, ``same_as`` with the same cell (workload,
parallelism, batch, repeat) in another environment; ``within`` is an absolute
tolerance, ``relative`` one relative to the wanted value (default: exact).
The metric is looked up in the result's ``metrics`` (a script's reported
numbers, a trained model's accuracy), then its top level (``parameters``),
then ``timing``. A value that differs, or is missing, is a failed
expectation: printed by ``run``, listed by the report, and ``run`` exits 1.
Several value rules may match one cell; all of them are judged.

A cell that could not run here (``unsupported``: 2 GPUs asked, one present;
``unavailable``: its environment could not be had), or whose ``same_as`` peer
could not, has no number to compare: its rule is "not judged here" (``here``
False), listed apart and never a failure -- the host, not the code, is what
is missing, and the rule is judged where the cell can run.
"""

from __future__ import annotations

import math

from harness import names


def check(checker, where: str, rule: dict, environments: list[str]) -> None:
    """Validate one value rule (types were checked by the checker's keys())."""
    if not isinstance(rule.get("metric"), str) or not rule["metric"]:
        return
    has = [k for k in ("equals", "same_as") if k in rule]
    if len(has) != 1:
        checker.problem(where, "a value expectation needs exactly one of 'equals: NUMBER' or 'same_as: ENVIRONMENT'")
    for key in ("equals", "within", "relative"):
        value = rule.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                checker.problem(f"{where}.{key}", f"expected a finite number, got {value}")
            elif key != "equals" and value < 0:
                checker.problem(f"{where}.{key}", f"expected a tolerance >= 0, got {value}")
    same = rule.get("same_as")
    if isinstance(same, str):
        if names.problem(same) or same not in environments:
            checker.problem(f"{where}.same_as", f"no environment named {same!r} in this matrix "
                                                f"(there are: {', '.join(environments)})")


def expectation(rules) -> dict | None:
    """A cell's expectation from the rules that match it: the first status rule, and every
    value rule (under "values"). None when no rule matches."""
    status_rule, value_rules = None, []
    for rule in rules:
        if "metric" in rule:
            value_rules.append({k: rule[k] for k in ("metric", "equals", "within", "relative", "same_as", "why")
                                if k in rule})
        elif status_rule is None:
            status_rule = rule
    if status_rule is None and not value_rules:
        return None
    out = dict(status_rule or {})
    for key in ("metric", "equals", "within", "relative", "same_as"):
        out.pop(key, None)
    if value_rules:
        out["values"] = value_rules
    return out


def value_of(result: dict, metric: str):
    """The number a result holds under `metric`, or None."""
    candidates = ((result.get("metrics") or {}).get(metric), result.get(metric),
                  (result.get("timing") or {}).get(metric))  # .get: a result.json dict or a result model
    for value in candidates:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None


def peer_id(cell_id: str, environment: str) -> str:
    """The same cell in another environment (the environment is the id's first part)."""
    return environment + "/" + cell_id.split("/", 1)[1]


def judge(rules: list[dict], result: dict, peer=None, not_run: tuple = ()) -> list[dict]:
    """Each value rule with what was found: {metric, want, got, met, detail}. `peer(cell_id)`
    returns another stored result (or None); `met` is None while a peer has no result yet.
    A result (or peer) whose status is in `not_run` (status.NOT_RUN, passed by status.judge,
    which owns the vocabulary) is not judged here (`here` False)."""
    out = []
    for rule in rules:
        metric = rule["metric"]
        got = value_of(result, metric)
        entry = {"metric": metric, "got": got, "why": rule.get("why")}
        if result.get("status") in not_run:
            entry.update(want=rule.get("equals"), met=None, here=False,
                         detail=f"not judged here: {_not_run(result)}")
            out.append(entry)
            continue
        if "same_as" in rule:
            other_id = peer_id(result["cell"], rule["same_as"])
            other = result if other_id == result["cell"] else (peer(other_id) if peer else None)
            entry["peer"] = other_id
            if other is None:
                entry.update(want=None, met=None, detail=f"{other_id} has no result yet")
                out.append(entry)
                continue
            if other.get("status") in not_run:
                entry.update(want=None, met=None, here=False,
                             detail=f"not judged here: {other_id} {_not_run(other)}")
                out.append(entry)
                continue
            want = value_of(other, metric)
            entry["want"] = want
            if want is None:
                entry.update(met=False, detail=f"{other_id} ({other.get('status')}) has no '{metric}'")
                out.append(entry)
                continue
            source = rule["same_as"]
        else:
            want = rule["equals"]
            entry["want"] = want
            source = None
        if got is None:
            entry.update(met=False, detail=f"no '{metric}' in this result (status {result.get('status')})")
            out.append(entry)
            continue
        tolerance = float(rule.get("within", 0.0)) + abs(float(want)) * float(rule.get("relative", 0.0))
        met = abs(float(got) - float(want)) <= tolerance
        against = f"{want} in {source}" if source else f"{want}"
        entry.update(met=met, tolerance=tolerance,
                     detail=f"{metric} {got} {'==' if met else '!='} {against}"
                            + (f" (within {tolerance:g})" if tolerance else ""))
        out.append(entry)
    return out


def _not_run(result) -> str:
    reason = " ".join(str(result.get("reason") or "").split())
    return f"is {result.get('status')}" + (f" ({reason[:160]})" if reason else "")


def not_judged_lines(result: dict) -> list[str]:
    """One line per value expectation of a result that could not be judged on this host."""
    values = ((result.get("expectation") or {}).get("values")) or []
    return [f"{v['metric']}: {v['detail']}" for v in values if v.get("here") is False]


def failed_lines(result: dict) -> list[str]:
    """One line per value expectation of a result that is not met."""
    values = ((result.get("expectation") or {}).get("values")) or []
    return [v["detail"] for v in values if v.get("met") is False]
