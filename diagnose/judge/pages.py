"""A rule's documentation page, generated from its YAML (docs/rules/<id>.md)."""

from __future__ import annotations

from diagnose.facts.catalogue import CATALOGUE
from diagnose.judge.engine import HOLDING_STRENGTH
from diagnose.judge.rules import Condition, Rule


def rules_table(rules: list[Rule], link_to: str = "") -> str:
    """Every rule's id (linked to its page under ``link_to``) and title, as a Markdown table: the index
    of docs/rules/ and the README's table, both from the YAML."""
    rows = [f"| [`{r.id}`]({link_to}{r.id}.md) | {r.title} |" for r in sorted(rules, key=lambda r: r.id)]
    return "\n".join(["| id | what it finds |", "|---|---|", *rows]) + "\n"


def rule_page(rule: Rule) -> str:
    lines = [
        f"# `{rule.id}`: {rule.title}",
        "",
        f"*Generated from `{rule.path}`; edit the YAML, then run `diagnose rules docs docs/rules`.*",
        "",
        " ".join(rule.summary.split()),
        "",
        "## When it fires",
        "",
        f"`{rule.when_text}`",
        "",
        "## Evidence for it",
        "",
        *_conditions(rule.conditions),
    ]
    if rule.contrary:
        lines += ["## Evidence against it", "", *_conditions(rule.contrary)]
    if rule.explained_by:
        lines += [
            "## A consequence of",
            "",
            "Where one of these causes is likely, this finding's evidence is explained away "
            "(score x (1 - the cause's score)) and shown under it:",
            "",
            *[f"- `{cause}`: {' '.join(how.split())}" for cause, how in rule.explained_by],
            "",
        ]
    lines += ["## Facts it reads", "", "| fact | meaning | needs |", "|---|---|---|"]
    names = sorted({n for c in (*rule.conditions, *rule.contrary) for n in c.facts})
    lines += [f"| `{n}` | {CATALOGUE[n].meaning} | {CATALOGUE[n].needs.text} |" for n in names]
    lines += ["", "## Verify", "", *[f"{i}. {s}" for i, s in enumerate(rule.verify, 1)], ""]
    if rule.checks:
        lines += [
            "## Checks `diagnose verify` runs on the live host",
            "",
            "| check | probe | confirms when | refutes when | weight | says |",
            "|---|---|---|---|---:|---|",
        ]
        for check in rule.checks:
            refutes = f"`{' '.join(check.refutes_text.split())}`" if check.refutes_text else "-"
            says = " ".join(check.says.text.split()).replace("|", "\\|")
            confirms = " ".join(check.confirms_text.split()).replace("|", "\\|")
            lines.append(
                f"| `{check.name}` | `{check.probe}` | `{confirms}` | {refutes} | {check.weight:g} | {says} |"
            )
        lines.append("")
    lines += ["## Remedy", "", *[f"{i}. {s}" for i, s in enumerate(rule.remedy, 1)], ""]
    lines += ["## Pitfalls", "", *[f"- {s}" for s in rule.pitfalls], ""]
    return "\n".join(lines)


def _conditions(conditions: tuple[Condition, ...]) -> list[str]:
    rows = ["| condition | holds when | weight | says |", "|---|---|---:|---|"]
    for c in conditions:
        held = f"{HOLDING_STRENGTH:g} + {1 - HOLDING_STRENGTH:g} x `{c.strength_text}`"  # see judge/engine.py
        strength = f" x ({held})" if c.strength_text else ""
        says = " ".join(c.evidence.text.split()).replace("|", "\\|")
        settles = " (decisive: settles the rule on its own)" if c.decisive else ""
        rows.append(f"| `{c.name}` | `{c.test_text}` | {c.weight:g}{strength}{settles} | {says} |")
    return [*rows, ""]
