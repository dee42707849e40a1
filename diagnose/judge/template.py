"""Evidence text: ``{fact.name}`` or ``{fact.name:spec}`` filled from facts.

Values are formatted by the fact's unit (a ratio as a percentage, bytes in
GiB, ...). ``spec`` may be ``x`` (a ratio as "2.3x"), ``pct`` or a plain
numeric format such as ``.1f``. Nothing else is interpreted: no attribute
access, no indexing, unlike ``str.format``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.dump.timestamps import iso
from diagnose.facts.catalogue import CATALOGUE, LIVE, FactSpec
from diagnose.facts.model import Facts, FactValue
from diagnose.units import human_measure

_FIELD = re.compile(r"\{([A-Za-z0-9_.]+)(?::([A-Za-z0-9.,%]+))?\}")
# A field and the plural noun a template wrote after it ("{trace.kernels} kernels"): one way to say a
# count, so that no sentence reads "1 runs". Only a count or a number that reads "1" takes the singular
# ("1 token a second"; "1.0 threads" stays as it is).
_FIELD_AND_NOUN = re.compile(_FIELD.pattern + r"(?P<noun> [A-Za-z][A-Za-z-]*s\b)?")
_NUMERIC_SPEC = re.compile(r"^,?\.?\d*[fdeg%]?$")
_NAMED_SPECS = {"x", "pct", "ms", "bytes", "s"}


class TemplateError(ValueError):
    pass


@dataclass(frozen=True)
class Template:
    text: str
    fields: tuple[tuple[str, str | None], ...]

    @property
    def facts(self) -> list[str]:
        return [name for name, _ in self.fields]


def compile_template(text: str, known: dict[str, FactSpec] = CATALOGUE) -> Template:
    """``known``: the facts it may name (a live check's text also names what its probe found)."""
    fields = tuple((m.group(1), m.group(2)) for m in _FIELD.finditer(text))
    for name, spec in fields:
        if name not in known:
            raise TemplateError(f"unknown fact {name!r}")
        if spec is not None and spec not in _NAMED_SPECS and not _NUMERIC_SPEC.match(spec):
            raise TemplateError(f"unknown format {spec!r} for {name}")
    leftover = _FIELD.sub("", text)
    if "{" in leftover or "}" in leftover:
        raise TemplateError("a '{' or '}' that is not a {fact.name} field")
    return Template(text, fields)


def render(template: Template, facts: Facts, missing: str | None = None) -> str | None:
    """The text with its facts filled in, or None when one of them is missing (or, with ``missing``,
    that word in its place: a live check's text names what its probe may not have found)."""
    names = {name for name, _ in template.fields}
    values = {name: value for name in names if (value := facts.get(name)) is not None}
    if len(values) < len(names) and missing is None:
        return None

    def fill(m: re.Match[str]) -> str:
        name, noun = m.group(1), m.group("noun") or ""
        said = format_value(name, values[name], m.group(2)) if name in values else str(missing)
        spec = CATALOGUE.get(name) or LIVE.get(name)
        one = said == "1" and spec is not None and spec.unit in ("count", "number")
        return said + (singular(noun) if one else noun)

    return _FIELD_AND_NOUN.sub(fill, template.text)


_PLURALS = (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x"), ("s", ""))


def singular(noun: str) -> str:
    """The plural noun a template wrote after a count, for a count of one: "1 run", "1 OOM", "1 copy",
    "1 process"; a word that is no plural ("process", "its") is left as it is."""
    if noun.endswith("ss") or not noun.endswith("s"):
        return noun
    plural, one = next((p, o) for p, o in _PLURALS if noun.endswith(p))
    return noun[: -len(plural)] + one


def format_value(name: str, value: FactValue, spec: str | None = None) -> str:
    spec_of = CATALOGUE.get(name) or LIVE.get(name)
    unit = spec_of.unit if spec_of is not None else ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if spec == "x" or (unit == "factor" and not spec):
        return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"
    if spec == "pct":
        return f"{value * 100:.0f}%" if unit == "ratio" else f"{value:.0f}%"
    if spec in _NAMED_SPECS:
        unit = spec
    elif spec:
        return format(value, spec)
    if unit == "ratio":
        return f"{value * 100:.0f}%"
    if unit == "pct":
        return f"{value:.0f}%"
    if (measured := human_measure(value, unit)) is not None:
        return measured
    if unit == "s":
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    if unit == "time":
        return iso(float(value)) or str(value)
    if unit == "p":
        return "< 0.001" if value < 0.001 else f"{value:.3f}"
    if unit == "s" and value < 0:
        return f"-{format_value(name, -value, spec)}"
    if unit == "c":
        return f"{value:.0f} °C"
    if unit == "id":
        return f"{value:.0f}"
    if unit == "count":
        return f"{value:,.0f}"
    return f"{value:.3g}"
