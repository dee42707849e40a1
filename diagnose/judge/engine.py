"""Run rules over facts: each rule ends fired, ruled out, or skipped.

Scoring is MYCIN-style certainty factors. Each supporting condition that holds
adds belief ``weight x strength``; beliefs combine as ``a + b(1 - a)``, so
more evidence raises the score with diminishing returns and never past 1.
Contrary conditions combine the same way into disbelief, and the score is
``(belief - disbelief) / (1 - min(belief, disbelief))``, floored at 0; that
certainty factor is then made a probability (judge/calibration.py), which is the
hypothesis's score.
A rule whose ``when`` is false is ruled out; one whose ``when`` cannot be
decided for lack of facts is skipped, naming the evidence that was missing.

A *decisive* condition settles its rule on its own: evidence that would almost
never be seen without the cause (the engine's own statement of it, the
allocator's own accounting). When one holds the rule fires whatever ``when``
says, and its belief alone makes the hypothesis likely; contrary evidence still
weighs against it and is shown, so conflicting evidence is said, not hidden.

A finding can be a consequence of another: a queue that grows because batches
past the knee cut the service's capacity, a CPU stage slowed while a co-located
job held the CPU. A rule names the causes that would produce its evidence
(``explained_by``). When one of them is likely, the evidence is explained away:
the chance that this finding is a root cause of its own is its score times the
chance that the explaining cause is not the story, ``score x (1 - cause)``. Its
score on its own evidence is kept and shown, under the cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from diagnose.expressions import expr
from diagnose.facts.catalogue import CATALOGUE
from diagnose.facts.model import Facts, FactValue
from diagnose.judge.calibration import calibrated
from diagnose.judge.rules import Condition, Rule
from diagnose.judge.template import format_value, render

# A condition that barely holds counts a quarter of its weight: one threshold per condition (its ``if``,
# where its strength ramp starts) instead of a ramp that starts below the threshold. The quarter is
# what the built-in rules' ramps gave at their thresholds when they had two numbers (0.09-0.56 over
# 34 conditions, median 0.25); it is one figure for every rule, not fitted to any.
HOLDING_STRENGTH = 0.25
LIKELY = 0.5  # a hypothesis at this score or more is likely; a likely cause can explain others away


class Status(StrEnum):
    """What became of a rule: its hypothesis shown, ruled out by the evidence, or not checked."""

    FIRED = "fired"
    RULED_OUT = "ruled_out"
    SKIPPED = "skipped"


class Confidence(StrEnum):
    """A score in words: high at 0.75 or more, medium from likely (0.5), low below."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Line:
    """One line of evidence for or against a hypothesis, with the files its numbers came from.

    The report shows it as it is (docs/report-json.md), its value rounded.
    """

    text: str
    value: FactValue | None  # the first fact it cites
    sources: tuple[str, ...]
    facts: tuple[str, ...]  # the facts it cites that the dump has, by name: each in the report's ``facts``
    # True for evidence that settles the hypothesis on its own (a rule's decisive condition)
    decisive: bool | None = field(default=None, metadata={"omit_if_none": True})


@dataclass
class Outcome:
    rule: Rule
    status: Status
    score: float = 0.0
    evidence: list[Line] = field(default_factory=list)
    contrary: list[Line] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # The supporting conditions looked for and not seen, in the rule's words: what would raise the score.
    unseen: list[str] = field(default_factory=list)
    reason: str = ""
    belief: float | None = None  # the certainty factor the evidence combines to; ``score`` is its probability
    explained_by: str | None = None  # the likely cause that explains this finding's evidence
    explanation: str = ""  # how it does (the rule's explained_by text)
    own_score: float | None = None  # the score on its own evidence, before it was explained away

    @property
    def confidence(self) -> Confidence:
        if self.score >= 0.75:
            return Confidence.HIGH
        return Confidence.MEDIUM if self.score >= LIKELY else Confidence.LOW


def judge(rules: list[Rule], facts: Facts) -> list[Outcome]:
    """Every rule's outcome. Rules are type-checked at load (expressions/types.py); should a fact still hold
    a value of another type than its catalogue says, that rule is skipped with the reason, not the run."""
    outcomes = []
    for rule in rules:
        try:
            outcomes.append(evaluate_rule(rule, facts))
        except expr.ExpressionError as error:
            outcomes.append(
                Outcome(rule, Status.SKIPPED, missing=[f"a fact of an unexpected type ({error})"])
            )
    for outcome in outcomes:
        if outcome.status == Status.FIRED:
            score = calibrated(outcome.score, contested=bool(outcome.contrary))
            outcome.belief, outcome.score = outcome.score, round(score, 3)
    _explain_away(outcomes)
    return outcomes


def _explain_away(outcomes: list[Outcome]) -> None:
    """Score a finding that a likely cause explains as ``score x (1 - cause's score)``; the strongest
    explaining cause is named. Explaining causes are judged on their own scores, not on explained ones."""
    own = {o.rule.id: o.score for o in outcomes if o.status == Status.FIRED}
    for outcome in outcomes:
        if outcome.status != Status.FIRED:
            continue
        causes = [(own[c], c, how) for c, how in outcome.rule.explained_by if own.get(c, 0.0) >= LIKELY]
        if not causes:
            continue
        score, cause, how = max(causes)
        outcome.own_score = outcome.score
        outcome.score = round(outcome.score * (1 - score), 3)
        outcome.explained_by, outcome.explanation = cause, how


def evaluate_rule(rule: Rule, facts: Facts) -> Outcome:
    lookup = {name: fact.value for name, fact in facts.values.items()}
    states = {c.name: _truth(expr.evaluate(c.test, lookup)) for c in rule.conditions}
    decided = _truth(expr.evaluate(rule.when, states))
    if any(c.decisive and states[c.name] for c in rule.conditions):
        decided = True
    if decided is None:
        needed = [c for c in rule.conditions if c.name in expr.names(rule.when) and states[c.name] is None]
        return Outcome(rule, Status.SKIPPED, missing=_missing_evidence(needed, facts))
    if decided is False:
        return Outcome(rule, Status.RULED_OUT, reason=_why_not(rule, states, facts))
    support = [c for c in rule.conditions if states[c.name]]
    against = [c for c in rule.contrary if _truth(expr.evaluate(c.test, lookup))]
    belief = _combine(c.weight * _strength(c, lookup) for c in support)
    disbelief = _combine(c.weight * _strength(c, lookup) for c in against)
    overlap = 1 - min(belief, disbelief)
    score = max(0.0, (belief - disbelief) / overlap) if overlap > 0 else 0.0
    evidence = [line for c in support if (line := _evidence(c, facts)) is not None]
    contrary = [line for c in against if (line := _evidence(c, facts)) is not None]
    unchecked = [c for c in rule.conditions if states[c.name] is None]
    if score <= 0 or not evidence:
        reason = "; ".join(line.text for line in contrary) or "no evidence line could be rendered"
        return Outcome(rule, Status.RULED_OUT, contrary=contrary, reason=f"contrary evidence: {reason}")
    unseen = [_unmet(c, facts) for c in rule.conditions if states[c.name] is False and _measured(c, facts)]
    return Outcome(
        rule,
        Status.FIRED,
        round(score, 3),
        evidence,
        contrary,
        missing=_missing_evidence(unchecked, facts),
        unseen=unseen,
    )


def _measured(condition: Condition, facts: Facts) -> bool:
    """Whether the dump has every fact the condition's ``unmet`` words cite: only then can they say what
    was seen instead (the missing ones are ``missing``'s to name)."""
    return condition.unmet is not None and all(name in facts.values for name in condition.unmet.facts)


def _combine(beliefs: Iterable[float]) -> float:
    total = 0.0
    for belief in beliefs:
        total += belief * (1 - total)
    return total


def _strength(condition: Condition, lookup: dict[str, FactValue]) -> float:
    """How strongly a holding condition holds: from HOLDING_STRENGTH where it barely does (its ramp's
    start, the threshold its ``if`` names) up to 1 where its ramp is full."""
    if condition.strength is None:
        return 1.0
    value = expr.evaluate(condition.strength, lookup)
    if value is None or isinstance(value, str):
        return 1.0
    return HOLDING_STRENGTH + (1 - HOLDING_STRENGTH) * min(1.0, max(0.0, float(value)))


def _truth(value: object) -> bool | None:
    return None if value is None else bool(value)


def _evidence(condition: Condition, facts: Facts) -> Line | None:
    text = render(condition.evidence, facts)
    if text is None:
        return None
    names = condition.evidence.facts or sorted(expr.names(condition.test))
    cited = tuple(n for n in names if n in facts.values)
    sources = tuple(dict.fromkeys(facts.values[n].source for n in cited))
    value = facts.get(names[0]) if names else None
    return Line(text, value, sources, cited, True if condition.decisive else None)


def _missing_evidence(conditions: list[Condition], facts: Facts) -> list[str]:
    names = [name for condition in conditions for name in sorted(expr.names(condition.test))]
    return _needs(names, facts)


def _needs(names: Iterable[str], facts: Facts) -> list[str]:
    """What the evidence for the absent ``names`` needs, each said once: of "server: running" and
    "server: queue_depth and running", only the second (by the catalogue's structured needs, not their
    words). Where the evidence was there but too little, the fact's own reason (``Facts.cannot``)."""
    absent = [name for name in names if name not in facts.values]
    needs = {CATALOGUE[name].needs for name in absent if name not in facts.absent}
    said = (
        facts.absent[name] if name in facts.absent else CATALOGUE[name].needs.text
        for name in absent
        if name in facts.absent or not any(CATALOGUE[name].needs.within(other) for other in needs)
    )
    return list(dict.fromkeys(said))


def _why_not(rule: Rule, states: dict[str, bool | None], facts: Facts) -> str:
    """What made ``when`` false, in the rule's own words (each condition's ``unmet``). A path the dump
    had no evidence for at all (a statement no log made, a profile not taken) is left out where another
    path was measured and failed: that one says why; the other only what was not given."""
    by_name = {condition.name: condition for condition in rule.conditions}
    failed = [by_name[name] for name in dict.fromkeys(_failed(rule.when, states))]
    measured = [c for c in failed if any(name in facts.values for name in _reads(c))]
    return "; ".join(_unmet(condition, facts) for condition in (measured or failed))


def _reads(condition: Condition) -> set[str]:
    """The facts a condition reads: its test's and those its ``unmet`` words cite."""
    return set(expr.names(condition.test)) | set(condition.unmet.facts if condition.unmet else ())


def _failed(node: expr.Node, states: dict[str, bool | None]) -> list[str]:
    """The conditions whose falsehood makes ``node`` false: for ``a and b`` the first that failed (one is
    enough to say why), for ``a or b`` those of both."""
    if node.op == "name":
        return [str(node.value)] if states.get(str(node.value)) is False else []
    if node.op == "and":
        first = next((arg for arg in node.args if _truth(expr.evaluate(arg, states)) is False), None)
        return _failed(first, states) if first is not None else []
    if node.op == "or":
        return [name for arg in node.args for name in _failed(arg, states)]
    return sorted(name for name in expr.names(node) if states.get(name) is False)


def _unmet(condition: Condition, facts: Facts) -> str:
    """The condition's ``unmet`` words. Where some of the facts they cite are missing but others are
    there (those that decided it), the words are said with the missing ones as "not measured"; where
    none is there, what would measure them."""
    if condition.unmet is not None:
        cited = list(dict.fromkeys(condition.unmet.facts))
        absent = [name for name in cited if name not in facts.values]
        if not absent:
            return render(condition.unmet, facts) or condition.unmet.text
        if len(absent) < len(cited):
            return render(condition.unmet, facts, missing="not measured") or condition.unmet.text
        return f"{condition.name.replace('_', ' ')}: not measured (needs {'; '.join(_needs(absent, facts))})"
    shown = ", ".join(
        f"{n} = {format_value(n, facts.values[n].value)}" if n in facts.values else f"no {n} in this dump"
        for n in sorted(expr.names(condition.test))
    )
    return f"{condition.test_text} is false ({shown})"
