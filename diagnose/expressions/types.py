"""The types of a rule's expressions, checked at load against the fact catalogue.

A fact is a number, text or a truth value, by its catalogue unit (``name`` and
``id`` are text, ``bool`` a truth value, every other unit a number). Comparing
text with a number, doing arithmetic on text, or using a number where a
condition needs true or false is an error when the rule is loaded, naming the
file, the rule and the field, never a failure while a dump is analysed.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.expressions.expr import ExpressionError, Node

NUMBER, TEXT, TRUTH = "number", "text", "true or false"
_TEXT_UNITS = frozenset({"name", "id"})
_ORDER = ("<", "<=", ">", ">=")
_ARITHMETIC = ("+", "-", "*", "/")


def fact_type(unit: str) -> str:
    if unit in _TEXT_UNITS:
        return TEXT
    return TRUTH if unit == "bool" else NUMBER


def check(node: Node, names: Mapping[str, str], wanted: str, text: str) -> None:
    """Raise ExpressionError unless ``node`` is of type ``wanted`` (names: name -> type)."""
    found = infer(node, names, text)
    if found != wanted:
        raise ExpressionError(f"{text!r} is {_a(found)}; here it must be {_a(wanted)}")


def infer(node: Node, names: Mapping[str, str], text: str) -> str:
    op = node.op
    if op == "num":
        return NUMBER
    if op == "str":
        return TEXT
    if op == "bool":
        return TRUTH
    if op == "name":
        return names.get(str(node.value), NUMBER)
    if op == "call" and node.value == "known":
        infer(node.args[0], names, text)
        return TRUTH
    kinds = [infer(arg, names, text) for arg in node.args]
    if op in ("and", "or", "not"):
        for arg, kind in zip(node.args, kinds, strict=True):
            if kind != TRUTH:
                raise ExpressionError(f"in {text!r}: {_shown(arg)} is {_a(kind)}, not a condition for {op!r}")
        return TRUTH
    if op in ("==", "!="):
        if kinds[0] != kinds[1]:
            raise ExpressionError(
                f"in {text!r}: {_shown(node.args[0])} is {_a(kinds[0])} and {_shown(node.args[1])} "
                f"{_a(kinds[1])}: {op!r} between them is never true"
            )
        return TRUTH
    for arg, kind in zip(node.args, kinds, strict=True):
        if kind != NUMBER:
            what = f"compared with {op!r}" if op in _ORDER else f"used in {op!r}"
            if op == "call":
                what = f"given to {node.value}()"
            raise ExpressionError(f"in {text!r}: {_shown(arg)} is {_a(kind)}; only numbers can be {what}")
    return TRUTH if op in _ORDER else NUMBER


def _shown(node: Node) -> str:
    if node.op == "name":
        return f"`{node.value}`"
    if node.op == "num":
        return f"{node.value:g}"
    if node.op in ("str", "bool"):
        return repr(node.value)
    return "an expression"


def _a(kind: str) -> str:
    return {NUMBER: "a number", TEXT: "text", TRUTH: "true or false"}[kind]
