"""The root-cause ids reports, tests and users rely on: the built-in rules' own, each with its title.

An id is said once, in its rule's YAML (``rules/<id>.yaml``); docs/dump-format.md
lists the contract's ids, and a test keeps the two in step. Loaded on first use:
reading the rule files takes a few tens of milliseconds.
"""

from __future__ import annotations

from functools import cache


@cache
def root_cause_ids() -> dict[str, str]:
    """Every built-in rule's id and title, by id."""
    from diagnose.judge.rules import default_rules_dir, load_rules

    return {rule.id: rule.title for rule in sorted(load_rules(default_rules_dir()), key=lambda r: r.id)}
