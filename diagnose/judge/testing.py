"""Rule tests beside the rules, as promtool tests alerting rules: given these facts, expect this outcome.

A rule folder's ``tests/`` holds one YAML file per rule::

    rule: cpu-bound-stage
    cases:
      - name: a tokenizer thread pegged, requests waiting for it
        facts: {cpu_stage.cost_share: 0.71, thread.busiest.cpu_pct: 99.0}
        expect: fired            # fired, ruled_out, or skipped
        score: [0.6, 0.8]        # for fired: the range the score must fall in

``diagnose rules test DIR`` runs every case against the rules in DIR and
exits 1 when one fails; pytest runs the built-in ones. A test file is data
(read with a safe loader); a malformed one is an error naming the file and
the case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from diagnose.errors import InputError
from diagnose.facts.model import Facts
from diagnose.judge.engine import Status, judge
from diagnose.judge.rules import Rule, safe_yaml

_STATUSES = {status.value: status for status in Status}  # fired, ruled_out, skipped: one spelling each


@dataclass(frozen=True)
class CaseResult:
    file: str
    case: str
    passed: bool
    got: str  # "fired 0.71", "ruled out", "skipped"


def run_rule_tests(rules: list[Rule], folder: Path) -> list[CaseResult]:
    """Every case of every test file in ``folder`` (a rule folder's ``tests/``)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no tests folder; rule tests go in the rule folder's tests/")
    by_id = {rule.id: rule for rule in rules}
    results = []
    for path in sorted(folder.glob("*.yaml")):
        results += _run_file(path, by_id)
    if not results:
        raise InputError(f"{folder}: no rule test cases in its .yaml files")
    return results


def _run_file(path: Path, rules: dict[str, Rule]) -> list[CaseResult]:
    try:
        data = safe_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise InputError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise InputError(f"{path}: expected 'rule: ID' and 'cases: [...]'")
    rule = rules.get(str(data.get("rule")))
    if rule is None:
        raise InputError(
            f"{path}: rule {data.get('rule')!r} is not in the folder ({', '.join(sorted(rules))})"
        )
    results = []
    for index, case in enumerate(data["cases"]):
        name = case.get("name", f"case {index + 1}") if isinstance(case, dict) else f"case {index + 1}"
        where = f"{path}: {name}"
        if not isinstance(case, dict) or not isinstance(case.get("facts"), dict):
            raise InputError(f"{where}: expected name, facts (a mapping), expect and, for fired, score")
        wanted = _STATUSES.get(str(case.get("expect")).replace("-", " "))
        if wanted is None:
            raise InputError(
                f"{where}: expect is one of fired, ruled_out, skipped; got {case.get('expect')!r}"
            )
        low, high = _range(case.get("score"), where) if wanted == Status.FIRED else (0.0, 1.0)
        facts = Facts()
        for fact, value in case["facts"].items():
            facts.add(str(fact), value, f"{path.name}: {name}")
        [outcome] = judge([rule], facts)
        got = outcome.status + (f" {outcome.score:.2f}" if outcome.status == Status.FIRED else "")
        passed = outcome.status == wanted and (wanted != Status.FIRED or low <= outcome.score <= high)
        results.append(CaseResult(str(path), name, passed, got))
    return results


def _range(value: object, where: str) -> tuple[float, float]:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] <= value[1] <= 1
    ):
        return float(value[0]), float(value[1])
    raise InputError(f"{where}: a fired case needs score: [LOW, HIGH] within 0..1, got {value!r}")
