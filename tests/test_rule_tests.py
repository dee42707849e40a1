"""The rules' own tests (rules/tests/): given facts, the expected outcome; run by `diagnose rules test`."""

from __future__ import annotations

import shutil

import yaml

from diagnose.expressions import expr
from diagnose.judge import Status, default_rules_dir, load_rules
from diagnose.judge.testing import run_rule_tests
from tests.conftest import ROOT

RULES = ROOT / "rules"


def test_every_built_in_rule_test_passes():
    results = run_rule_tests(load_rules(default_rules_dir()), RULES / "tests")
    failed = [f"{r.file}: {r.case}: got {r.got}" for r in results if not r.passed]
    assert failed == []


def _cases(rule) -> list[dict]:
    document = yaml.safe_load((RULES / "tests" / f"{rule.id}.yaml").read_text())
    assert document["rule"] == rule.id
    return document["cases"]


def test_every_rule_has_a_case_that_fires_it_and_healthy_cases_that_do_not():
    for rule in load_rules(RULES):
        cases = _cases(rule)
        assert any(c["name"].startswith("fires on") and c["expect"] == Status.FIRED for c in cases), rule.id
        healthy = [c for c in cases if c["name"].startswith("healthy:")]
        assert all(c["expect"] != Status.FIRED or c["score"][1] < 0.6 for c in healthy), rule.id


def test_every_rule_has_a_hand_written_meaning_file_that_says_when_it_is_likely_and_when_not():
    """The generated cases record today's verdicts; the meaning file says what the evidence should prove,
    written by a person from the rule's meaning: at least one case where the rule's evidence makes the
    cause likely and one where it rules it out (docs/extending.md#a-rule, step 5)."""
    lacking = []
    for rule in load_rules(RULES):
        path = RULES / "tests" / f"{rule.id}.meaning.yaml"
        if not path.is_file():
            lacking.append(f"{rule.id}: no {path.name}")
            continue
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        cases = document["cases"]
        likely = any(c["expect"] == Status.FIRED and c.get("score", [0, 1])[0] >= 0.5 for c in cases)
        if (
            document["rule"] != rule.id
            or not likely
            or not any(c["expect"] == Status.RULED_OUT for c in cases)
        ):
            lacking.append(f"{rule.id}: {path.name} needs a likely case and a ruled-out one")
    assert lacking == []


def test_every_case_gives_facts():
    """A case with none of its rule's facts can only be skipped: it specifies nothing."""
    empty = [f"{rule.id}: {c['name']}" for rule in load_rules(RULES) for c in _cases(rule) if not c["facts"]]
    assert empty == []


def test_every_contrary_condition_has_a_case_where_it_applies():
    """So that each reason to doubt a rule has its weight tested, and a contrary condition that can
    never apply while the rule's case is made (dead: it changes no verdict) is found. docs/extending.md
    says how the cases are written."""
    missing = []
    for rule in load_rules(RULES):
        cases = _cases(rule)
        for condition in rule.contrary:
            if not any(_applies(rule, condition, case["facts"]) for case in cases):
                missing.append(f"{rule.id}: {condition.name}")
    assert missing == [], "run python -m fixtures.rule_tests; a condition it cannot make apply is dead"


def _applies(rule, condition, facts: dict) -> bool:
    states = {c.name: expr.evaluate(c.test, facts) for c in rule.conditions}
    made = any(c.decisive and states[c.name] for c in rule.conditions) or expr.evaluate(rule.when, states)
    return bool(made) and bool(expr.evaluate(condition.test, facts))


def _copy(tmp_path):
    folder = tmp_path / "rules"
    shutil.copytree(RULES, folder)
    return folder


def test_a_case_the_rule_no_longer_meets_fails_and_exits_1(run_cli, tmp_path):
    folder = _copy(tmp_path)
    path = folder / "tests" / "cpu-bound-stage.yaml"
    document = yaml.safe_load(path.read_text())
    document["cases"][0]["expect"] = "ruled_out"
    path.write_text(yaml.safe_dump(document))
    code, out, _ = run_cli("rules", "test", folder)
    assert code == 1
    assert "FAIL cpu-bound-stage.yaml: fires on fixtures/dumps/cpu-bound-stage: fired" in out
    assert out.rstrip().splitlines()[-1].endswith("1 failed")


def test_a_malformed_test_file_is_an_input_error_naming_it(run_cli, tmp_path):
    folder = _copy(tmp_path)
    (folder / "tests" / "broken.yaml").write_text(
        "rule: cpu-bound-stage\ncases:\n  - name: x\n    expect: maybe\n    facts: {}\n"
    )
    code, _, err = run_cli("rules", "test", folder)
    assert code == 2 and "broken.yaml: x: expect is one of fired, ruled_out, skipped" in err
    # an expectation has one spelling, `ruled_out`, as the generated files and the report write it
    (folder / "tests" / "broken.yaml").write_text(
        "rule: cpu-bound-stage\ncases:\n  - name: x\n    expect: ruled out\n    facts: {}\n"
    )
    code, _, err = run_cli("rules", "test", folder)
    assert code == 2 and "expect is one of fired, ruled_out, skipped; got 'ruled out'" in err
    (folder / "tests" / "broken.yaml").write_text("rule: no-such-rule\ncases: []\n")
    code, _, err = run_cli("rules", "test", folder)
    assert code == 2 and "rule 'no-such-rule' is not in the folder" in err
