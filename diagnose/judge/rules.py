"""Rule files: load, validate and hold rules as plain, pre-parsed data.

A rule file is YAML data, read with ``yaml.safe_load``; its conditions are
parsed once by :mod:`diagnose.expressions.expr`. Any mistake is a :class:`RuleError`
naming the file, the rule and the field, so ``diagnose rules check`` can point
at it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from diagnose.errors import RuleError
from diagnose.expressions import expr, types
from diagnose.facts.catalogue import CATALOGUE, LIVE, PROBES
from diagnose.judge.template import Template, TemplateError, compile_template
from diagnose.shipped import shipped_folder

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_REQUIRED = ("id", "title", "summary", "when", "conditions", "verify", "remedy", "pitfalls")
_OPTIONAL = ("contrary", "explained_by", "checks")
_CONDITION_KEYS = {"if", "weight", "strength", "evidence", "decisive", "unmet"}
_CHECK_KEYS = {"probe", "confirms", "refutes", "weight", "says"}
_CHECK_REQUIRED = ("probe", "confirms", "weight", "says")
# A decisive condition alone makes its hypothesis likely with room for contrary evidence (judge/engine.py):
# the weight says "this would almost never hold without the cause", about 1 time in 20 or fewer.
DECISIVE_WEIGHT = 0.8
_Fail = Callable[[str, str], RuleError]  # (field, problem) -> the error that names the file and the field


@dataclass(frozen=True)
class Condition:
    name: str
    test: expr.Node
    test_text: str
    weight: float
    strength: expr.Node | None
    evidence: Template
    strength_text: str | None = None
    decisive: bool = False  # settles the rule on its own (judge/engine.py)
    # What the evidence shows where the condition does not hold, for a ruled-out rule's reason
    unmet: Template | None = None

    @property
    def facts(self) -> set[str]:
        found = expr.names(self.test) | set(self.evidence.facts) | set(self.unmet.facts if self.unmet else ())
        return found | (expr.names(self.strength) if self.strength else set())


@dataclass(frozen=True)
class Check:
    """A read-only check ``diagnose verify`` runs on the live host: a built-in probe, what in its
    findings (and the dump's facts) confirms the hypothesis, what refutes it, and how much either
    moves the score."""

    name: str
    probe: str  # one of facts.catalogue.PROBES
    confirms: expr.Node
    confirms_text: str
    refutes: expr.Node | None
    refutes_text: str | None
    weight: float
    says: Template  # what was checked, in words; may name the probe's and the dump's facts


@dataclass(frozen=True)
class Rule:
    id: str
    path: str  # as shown in reports, e.g. rules/cpu-bound-stage.yaml
    title: str
    summary: str
    when: expr.Node
    when_text: str
    conditions: tuple[Condition, ...]
    contrary: tuple[Condition, ...]
    verify: tuple[str, ...]
    remedy: tuple[str, ...]
    pitfalls: tuple[str, ...]
    # causes that would produce this one's evidence as a consequence: id -> how (judge/engine.py)
    explained_by: tuple[tuple[str, str], ...] = ()
    checks: tuple[Check, ...] = ()  # what `diagnose verify` runs on the live host
    builtin: bool = False  # shipped with diagnose: a user reads it with `diagnose rules show ID`
    source_file: str = ""  # the file on this machine it was read from

    @property
    def shown_as(self) -> str:
        """Where a reader of a report finds this rule: a command for built-ins, else the file."""
        return f"diagnose rules show {self.id}" if self.builtin else self.path


def default_rules_dir() -> Path:
    """The built-in rules: the checkout's rules/ folder when run from source, else the wheel's copy."""
    return shipped_folder("rules")


def load_rules(directory: Path) -> list[Rule]:
    """Every rule of the folder. A folder read before and unchanged since (each file's name, size and
    modification time) gives the rules built then: a service or a suite analyses many dumps, and
    parsing and type-checking two dozen rules took a fifth of analysing a small one."""
    if not directory.is_dir():
        raise RuleError(str(directory), None, None, "not a folder of rule files")
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    if not files:
        raise RuleError(str(directory), None, None, "no .yaml rule files in this folder")
    where = directory.resolve()
    state = tuple((path.name, stat.st_size, stat.st_mtime_ns) for path in files for stat in [path.stat()])
    built = _BUILT.get(where)
    if built is None or built[0] != state:
        builtin = where == default_rules_dir().resolve()
        label = "rules" if builtin else directory.name
        rules = [load_rule_file(path, f"{label}/{path.name}") for path in files]
        built = state, tuple(replace(rule, builtin=True) for rule in rules) if builtin else tuple(rules)
        _BUILT[where] = built
    return list(built[1])


_FolderState = tuple[tuple[str, int, int], ...]  # each rule file's name, size and modification time
_BUILT: dict[Path, tuple[_FolderState, tuple[Rule, ...]]] = {}  # each folder read: its state, its rules


def safe_yaml(text: str) -> object:
    """YAML as plain data (the safe loader: no tags that build objects), with libyaml's where installed."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


def load_rule_file(path: Path, shown_as: str | None = None) -> Rule:
    shown = shown_as or str(path)
    try:
        data = safe_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise RuleError(shown, None, None, f"{where}not valid YAML") from None
    except (OSError, UnicodeDecodeError) as error:
        raise RuleError(shown, None, None, f"cannot be read ({error})") from None
    if not isinstance(data, dict):
        raise RuleError(shown, None, None, "expected one rule: a mapping with id, title, when, ...")
    return replace(_build_rule(data, shown), source_file=str(path.resolve()))


def _build_rule(data: dict[str, Any], file: str) -> Rule:
    rule_id = data.get("id")
    if not isinstance(rule_id, str) or not _ID.match(rule_id):
        raise RuleError(file, None, "id", "expected a kebab-case id such as cpu-bound-stage")

    def fail(field: str, problem: str) -> RuleError:
        return RuleError(file, rule_id, field, problem)

    unknown = set(data) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise fail(sorted(unknown)[0], f"unknown field (allowed: {', '.join(_REQUIRED + _OPTIONAL)})")
    for field in _REQUIRED:
        if field not in data:
            raise fail(field, "missing")
    conditions = _conditions(data["conditions"], "conditions", fail)
    contrary = _conditions(data.get("contrary") or {}, "contrary", fail)
    when_text = _text(data["when"], "when", fail)
    when = _parse(when_text, "when", fail)
    known = {c.name for c in conditions}
    for name in expr.names(when):
        if name not in known:
            raise fail(
                "when", f"names {name!r}, which is not one of its conditions ({', '.join(sorted(known))})"
            )
    _typed(when, dict.fromkeys(known, types.TRUTH), types.TRUTH, when_text, "when", fail)
    return Rule(
        id=rule_id,
        path=file,
        title=_text(data["title"], "title", fail),
        summary=_text(data["summary"], "summary", fail),
        when=when,
        when_text=when_text,
        conditions=conditions,
        contrary=contrary,
        verify=_steps(data["verify"], "verify", fail),
        remedy=_steps(data["remedy"], "remedy", fail),
        pitfalls=_steps(data["pitfalls"], "pitfalls", fail),
        explained_by=_explained_by(data.get("explained_by") or {}, rule_id, fail),
        checks=_checks(data.get("checks") or {}, fail),
    )


def _entry(
    field: str,
    kind: str,
    name: object,
    body: object,
    allowed: set[str],
    required: tuple[str, ...],
    fail: _Fail,
) -> str:
    """A named entry of a rule's mapping (a condition, a check): its name, its keys; where it is."""
    where = f"{field}.{name}"
    if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]*$", name):
        raise fail(where, f"{kind} names are lower_snake_case")
    if not isinstance(body, dict):
        raise fail(where, f"expected a mapping with {', '.join(required[:-1])} and {required[-1]}")
    unknown = set(body) - allowed
    if unknown:
        raise fail(f"{where}.{sorted(unknown)[0]}", f"unknown field (allowed: {', '.join(sorted(allowed))})")
    for key in required:
        if key not in body:
            raise fail(f"{where}.{key}", "missing")
    return where


def _checks(raw: object, fail: _Fail) -> tuple[Check, ...]:
    if not isinstance(raw, dict):
        raise fail("checks", "expected a mapping of check names to {probe, confirms, weight, says}")
    facts = _FACT_TYPES | _LIVE_FACT_TYPES
    built = []
    for name, body in raw.items():
        where = _entry("checks", "check", name, body, _CHECK_KEYS, _CHECK_REQUIRED, fail)
        probe = body["probe"]
        if probe not in PROBES:
            raise fail(f"{where}.probe", f"unknown probe {probe!r} (one of: {', '.join(sorted(PROBES))})")
        weight = body["weight"]
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight < 1:
            raise fail(f"{where}.weight", f"expected a number in (0, 1), got {weight!r}")
        tests = {}
        for key in ("confirms", "refutes"):
            if key not in body:
                continue
            text = _text(body[key], f"{where}.{key}", fail)
            node = _parse(text, f"{where}.{key}", fail)
            for fact in sorted(expr.names(node)):
                if fact not in CATALOGUE and fact not in LIVE:
                    raise fail(f"{where}.{key}", f"unknown fact {fact!r} (see `diagnose rules facts`)")
                if fact in LIVE and fact not in PROBES[probe]:
                    raise fail(f"{where}.{key}", f"{fact!r} is not given by the probe {probe!r}")
            _typed(node, facts, types.TRUTH, text, f"{where}.{key}", fail)
            tests[key] = (node, text)
        try:
            says = compile_template(_text(body["says"], f"{where}.says", fail), CATALOGUE | LIVE)
        except TemplateError as error:
            raise fail(f"{where}.says", str(error)) from None
        refutes = tests.get("refutes")
        built.append(
            Check(
                name,
                probe,
                tests["confirms"][0],
                tests["confirms"][1],
                refutes[0] if refutes else None,
                refutes[1] if refutes else None,
                float(weight),
                says,
            )  # fmt: skip
        )
    return tuple(built)


def _conditions(raw: object, field: str, fail: _Fail) -> tuple[Condition, ...]:
    if not isinstance(raw, dict) or (field == "conditions" and not raw):
        raise fail(field, "expected a mapping of condition names to {if, weight, evidence}")
    built = []
    for name, body in raw.items():
        where = _entry(field, "condition", name, body, _CONDITION_KEYS, ("if", "weight", "evidence"), fail)
        test_text = _text(body["if"], f"{where}.if", fail)
        weight = body["weight"]
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1:
            raise fail(f"{where}.weight", f"expected a number in (0, 1], got {weight!r}")
        strength = body.get("strength")
        decisive = _decisive(body.get("decisive", False), weight, strength, field, where, fail)
        evidence = _template(body["evidence"], f"{where}.evidence", fail)
        unmet = _template(body["unmet"], f"{where}.unmet", fail) if "unmet" in body else None
        condition = Condition(
            name=name,
            test=_parse(test_text, f"{where}.if", fail),
            test_text=test_text,
            weight=float(weight),
            strength=_parse(_text(strength, f"{where}.strength", fail), f"{where}.strength", fail)
            if strength is not None
            else None,
            evidence=evidence,
            strength_text=str(strength).strip() if strength is not None else None,
            decisive=decisive,
            unmet=unmet,
        )
        for fact in sorted(condition.facts):
            if fact not in CATALOGUE:
                raise fail(where, f"unknown fact {fact!r} (see `diagnose rules facts`)")
        _typed(condition.test, _FACT_TYPES, types.TRUTH, test_text, f"{where}.if", fail)
        if condition.strength is not None:
            _typed(
                condition.strength,
                _FACT_TYPES,
                types.NUMBER,
                condition.strength_text or "",
                f"{where}.strength",
                fail,
            )
            _one_threshold(condition, f"{where}.strength", fail)
        built.append(condition)
    return tuple(built)


def _template(value: object, field: str, fail: _Fail) -> Template:
    try:
        return compile_template(_text(value, field, fail))
    except TemplateError as error:
        raise fail(field, str(error)) from None


def _explained_by(raw: object, rule_id: str, fail: _Fail) -> tuple[tuple[str, str], ...]:
    """The causes this finding may be a consequence of: ``{cause id: how it produces this evidence}``."""
    if not isinstance(raw, dict):
        raise fail("explained_by", "expected a mapping of root-cause ids to how each produces this evidence")
    found = []
    for cause, how in raw.items():
        if not isinstance(cause, str) or not _ID.match(cause) or cause == rule_id:
            raise fail(f"explained_by.{cause}", "expected the kebab-case id of another root cause")
        found.append((cause, _text(how, f"explained_by.{cause}", fail)))
    return tuple(found)


def _decisive(value: object, weight: float, strength: object, field: str, where: str, fail: _Fail) -> bool:
    """A decisive condition settles its rule at its threshold: no ramp, and the weight that says so."""
    if not isinstance(value, bool):
        raise fail(f"{where}.decisive", f"expected true or false, got {value!r}")
    if not value:
        return False
    if field != "conditions":
        raise fail(f"{where}.decisive", "only evidence for the cause (conditions) can be decisive")
    if strength is not None:
        raise fail(
            f"{where}.decisive",
            "a decisive condition settles the rule where its `if` holds; it takes no strength ramp "
            "(split the graded part into a condition of its own)",
        )
    if weight < DECISIVE_WEIGHT:
        raise fail(
            f"{where}.weight",
            f"a decisive condition's weight is at least {DECISIVE_WEIGHT:g} (it would almost never hold "
            f"without the cause); got {weight!r}",
        )
    return True


def _one_threshold(condition: Condition, where: str, fail: _Fail) -> None:
    """A ramp over a fact that the condition's ``if`` compares starts at that threshold: the one number
    that says where the evidence begins to count (see judge/engine.py: its strength there)."""
    if condition.strength is None:
        return
    compared = expr.thresholds(condition.test)
    for fact, start, _ in expr.ramps(condition.strength):
        if fact in compared and start not in compared[fact]:
            at = " or ".join(f"{t:g}" for t in sorted(compared[fact]))
            raise fail(
                where,
                f"one threshold per condition: `if` compares {fact} with {at}, so its ramp starts there "
                f"(ramp({fact}, {at}, ...)), not at {start:g}",
            )


_FACT_TYPES = {name: types.fact_type(spec.unit) for name, spec in CATALOGUE.items()}
_LIVE_FACT_TYPES = {name: types.fact_type(spec.unit) for name, spec in LIVE.items()}


def _typed(node: expr.Node, facts: dict[str, str], wanted: str, text: str, field: str, fail: _Fail) -> None:
    try:
        types.check(node, facts, wanted, text)
    except expr.ExpressionError as error:
        raise fail(field, str(error)) from None


def _parse(text: str, field: str, fail: _Fail) -> expr.Node:
    try:
        return expr.parse(text)
    except expr.ExpressionError as error:
        raise fail(field, str(error)) from None


def _text(value: object, field: str, fail: _Fail) -> str:
    if isinstance(value, dict):
        raise fail(field, "expected text, got a mapping: quote a line that contains ': '")
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not str(value).strip():
        raise fail(field, "expected text")
    return str(value).strip()


def _steps(value: object, field: str, fail: _Fail) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise fail(field, "expected a list of steps")
    return tuple(_text(step, f"{field}[{i}]", fail) for i, step in enumerate(value))
