"""Judging: YAML rules over facts, ending in ranked hypotheses.

The names below load on first use (PEP 562), so a module that needs only the
expression language (the flight recorder's triggers) does not pay for the
engine and the fact catalogue.
"""

from __future__ import annotations

from diagnose.lazy import lazy_exports

_EXPORTS = {
    "FIRED": "diagnose.judge.engine",
    "RULED_OUT": "diagnose.judge.engine",
    "SKIPPED": "diagnose.judge.engine",
    "EvidenceLine": "diagnose.judge.engine",
    "Outcome": "diagnose.judge.engine",
    "judge": "diagnose.judge.engine",
    "Rule": "diagnose.judge.rules",
    "default_rules_dir": "diagnose.judge.rules",
    "load_rule_file": "diagnose.judge.rules",
    "load_rules": "diagnose.judge.rules",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
