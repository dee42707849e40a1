"""Judging: YAML rules over facts, ending in ranked hypotheses."""

from diagnose.judge.engine import FIRED, RULED_OUT, SKIPPED, EvidenceLine, Outcome, judge
from diagnose.judge.rules import Rule, default_rules_dir, load_rule_file, load_rules

__all__ = [
    "FIRED",
    "RULED_OUT",
    "SKIPPED",
    "EvidenceLine",
    "Outcome",
    "Rule",
    "default_rules_dir",
    "judge",
    "load_rule_file",
    "load_rules",
]
