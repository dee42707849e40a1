"""The rules' own tests (rules/tests/): given facts, the expected outcome; run by `diagnose rules test`."""

from __future__ import annotations

import shutil

import yaml

from diagnose.judge import FIRED, default_rules_dir, load_rules
from diagnose.judge.testing import run_rule_tests
from tests.conftest import ROOT

RULES = ROOT / "rules"


def test_every_built_in_rule_test_passes():
    results = run_rule_tests(load_rules(default_rules_dir()), RULES / "tests")
    failed = [f"{r.file}: {r.case}: got {r.got}" for r in results if not r.passed]
    assert failed == []


def test_every_rule_has_a_case_that_fires_it_healthy_cases_and_its_near_misses():
    for rule in load_rules(RULES):
        document = yaml.safe_load((RULES / "tests" / f"{rule.id}.yaml").read_text())
        cases = document["cases"]
        assert document["rule"] == rule.id
        assert any(c["name"].startswith("fires on") and c["expect"] == FIRED for c in cases), rule.id
        healthy = [c for c in cases if c["name"].startswith("healthy:")]
        assert healthy and all(c["expect"] != FIRED or c["score"][1] < 0.6 for c in healthy), rule.id


def _copy(tmp_path):
    folder = tmp_path / "rules"
    shutil.copytree(RULES, folder)
    return folder


def test_a_case_the_rule_no_longer_meets_fails_and_exits_1(run_cli, tmp_path):
    folder = _copy(tmp_path)
    path = folder / "tests" / "cpu-bound-stage.yaml"
    document = yaml.safe_load(path.read_text())
    document["cases"][0]["expect"] = "ruled out"
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
    assert code == 2 and "broken.yaml: x: expect is one of fired, ruled out, skipped" in err
    (folder / "tests" / "broken.yaml").write_text("rule: no-such-rule\ncases: []\n")
    code, _, err = run_cli("rules", "test", folder)
    assert code == 2 and "rule 'no-such-rule' is not in the folder" in err
