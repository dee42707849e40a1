"""Judging: YAML rules over facts, ending in ranked hypotheses.

The names below load on first use (PEP 562), so a module that needs only the
rule files' schema does not pay for the engine and the fact catalogue. The
expression language rules are written in is :mod:`diagnose.expressions`, below
the judge: the flight recorder's triggers share it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diagnose.lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them (``X as X``: re-exported); at run time, __getattr__
    from diagnose.judge.engine import (
        Line as Line,
        Outcome as Outcome,
        Status as Status,
        judge as judge,
    )
    from diagnose.judge.rules import (
        Rule as Rule,
        default_rules_dir as default_rules_dir,
        load_rule_file as load_rule_file,
        load_rules as load_rules,
    )

_EXPORTS = {
    "Line": "diagnose.judge.engine",
    "Outcome": "diagnose.judge.engine",
    "Status": "diagnose.judge.engine",
    "judge": "diagnose.judge.engine",
    "Rule": "diagnose.judge.rules",
    "default_rules_dir": "diagnose.judge.rules",
    "load_rule_file": "diagnose.judge.rules",
    "load_rules": "diagnose.judge.rules",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
