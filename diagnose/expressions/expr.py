"""A small, safe expression language for rule conditions.

Grammar (parsed once, at rule load)::

    expr    := or_
    or_     := and_ ("or" and_)*
    and_    := not_ ("and" not_)*
    not_    := "not" not_ | compare
    compare := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := NUMBER | STRING | "true" | "false" | NAME | CALL | "(" expr ")"
    CALL    := FUNCTION "(" expr ("," expr)* ")"

Names are dotted fact names (``gpu.util_pct.mean``). Only the functions in
``FUNCTIONS`` exist; there is no attribute access, indexing or ``eval``.

Evaluation is three-valued: a missing fact is *unknown* (None), arithmetic
and comparisons on unknown are unknown, and ``and``/``or``/``not`` follow
Kleene logic, so ``missing and false`` is false while ``missing and true``
stays unknown. That is what lets a rule be ruled out by the evidence it has.
``known(x)`` is the one exception: true or false, whether ``x`` is there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from diagnose.units import counted

Value = float | int | str | bool | None


class ExpressionError(ValueError):
    """The text is not a valid expression; the message says where."""


def _ramp(x: float, lo: float, hi: float) -> float:
    """0 at lo, 1 at hi, linear between (descending when hi < lo)."""
    if hi == lo:
        return 1.0 if x >= hi else 0.0
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


FUNCTIONS: dict[str, tuple[int, Callable[..., Value]]] = {
    "min": (2, min),
    "max": (2, max),
    "abs": (1, abs),
    "ramp": (3, _ramp),
    "known": (1, lambda value: value is not None),  # evaluated before its argument can make it unknown
}

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)"
    r"|(?P<string>'[^'\\]*'|\"[^\"\\]*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"|(?P<op><=|>=|==|!=|[-+*/<>(),]))"
)
_KEYWORDS = {"and", "or", "not", "true", "false"}


@dataclass(frozen=True)
class Node:
    op: str  # "num", "str", "bool", "name", "call", "neg", "not", "and", "or", or an operator
    args: tuple[Node, ...] = ()  # the operands, or a call's arguments
    value: Value = None


def parse(text: str) -> Node:
    tokens = _tokenize(text)
    parser = _Parser(text, tokens)
    node = parser.expr()
    if parser.position < len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.position][1]!r} in {text!r}")
    return node


def names(node: Node) -> set[str]:
    """Every fact (or condition) name the expression reads."""
    if node.op == "name":
        return {str(node.value)}
    found: set[str] = set()
    for arg in node.args:
        found |= names(arg)
    return found


def thresholds(node: Node) -> dict[str, set[float]]:
    """Each fact the expression compares with a number (``x >= 0.3``, ``0.3 <= x``): the numbers."""
    found: dict[str, set[float]] = {}
    if node.op in ("<", "<=", ">", ">=") and len(node.args) == 2:
        left, right = node.args
        for name, number in ((left, right), (right, left)):
            if name.op == "name" and number.op == "num" and isinstance(number.value, int | float):
                found.setdefault(str(name.value), set()).add(float(number.value))
    for arg in node.args:
        for fact, numbers in thresholds(arg).items():
            found.setdefault(fact, set()).update(numbers)
    return found


def ramps(node: Node) -> list[tuple[str, float, float]]:
    """Every ``ramp(fact, start, full)`` in the expression with a fact and two numbers."""
    found = []
    if node.op == "call" and node.value == "ramp":
        fact, start, full = node.args
        low, high = start.value, full.value
        if fact.op == "name" and start.op == full.op == "num":
            if isinstance(low, int | float) and isinstance(high, int | float):
                found.append((str(fact.value), float(low), float(high)))
    for arg in node.args:
        found += ramps(arg)
    return found


def evaluate(node: Node, lookup: Mapping[str, Value]) -> Value:
    op = node.op
    if op in ("num", "str", "bool"):
        return node.value
    if op == "name":
        return lookup.get(str(node.value))
    if op == "and":
        left = _truth(evaluate(node.args[0], lookup))
        if left is False:
            return False
        right = _truth(evaluate(node.args[1], lookup))
        if right is False:
            return False
        return True if left and right else None
    if op == "or":
        left = _truth(evaluate(node.args[0], lookup))
        if left is True:
            return True
        right = _truth(evaluate(node.args[1], lookup))
        if right is True:
            return True
        return False if left is False and right is False else None
    if op == "not":
        value = _truth(evaluate(node.args[0], lookup))
        return None if value is None else not value
    if op == "call" and node.value == "known":  # never unknown itself: whether the evidence is there
        return evaluate(node.args[0], lookup) is not None
    values = [evaluate(arg, lookup) for arg in node.args]
    if any(v is None for v in values):
        return None
    if op == "call":
        return FUNCTIONS[str(node.value)][1](*values)
    if op == "neg":
        return -_number(values[0])
    return _binary(op, values[0], values[1])


def _binary(op: str, left: Value, right: Value) -> Value:
    if op in ("==", "!="):
        equal = left == right
        return equal if op == "==" else not equal
    a, b = _number(left), _number(right)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return None if b == 0 else a / b
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _number(value: Value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExpressionError(f"expected a number, got {value!r}")
    return value


def _truth(value: Value) -> bool | None:
    return None if value is None else bool(value)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise ExpressionError(f"unexpected character {stripped[position]!r} at column {position + 1}")
        kind = match.lastgroup or "op"
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list[tuple[str, str]]) -> None:
        self.text, self.tokens, self.position = text, tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.text!r}")
        token = self.tokens[self.position]
        if expected is not None and token[1] != expected:
            raise ExpressionError(f"expected {expected!r}, got {token[1]!r} in {self.text!r}")
        self.position += 1
        return token

    def expr(self) -> Node:
        return self._chain("or", self.and_)

    def and_(self) -> Node:
        return self._chain("and", self.not_)

    def _chain(self, keyword: str, operand: Callable[[], Node]) -> Node:
        node = operand()
        while self.peek() == keyword:
            self.take()
            node = Node(keyword, (node, operand()))
        return node

    def not_(self) -> Node:
        if self.peek() == "not":
            self.take()
            return Node("not", (self.not_(),))
        return self.compare()

    def compare(self) -> Node:
        node = self.sum()
        if self.peek() in ("<", "<=", ">", ">=", "==", "!="):
            op = self.take()[1]
            node = Node(op, (node, self.sum()))
        return node

    def sum(self) -> Node:
        node = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            node = Node(op, (node, self.product()))
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            node = Node(op, (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return Node("neg", (self.unary(),))
        return self.atom()

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "number":
            return Node("num", value=float(text))
        if kind == "string":
            return Node("str", value=text[1:-1])
        if text == "(":
            node = self.expr()
            self.take(")")
            return node
        if kind != "name" or text in ("and", "or", "not"):
            raise ExpressionError(f"unexpected {text!r} in {self.text!r}")
        if text in ("true", "false"):
            return Node("bool", value=text == "true")
        if self.peek() == "(":
            return self.call(text)
        return Node("name", value=text)

    def call(self, function: str) -> Node:
        if function not in FUNCTIONS:
            allowed = ", ".join(sorted(FUNCTIONS))
            raise ExpressionError(f"unknown function {function!r} (allowed: {allowed})")
        self.take("(")
        args = [self.expr()]
        while self.peek() == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        arity = FUNCTIONS[function][0]
        if len(args) != arity:
            raise ExpressionError(f"{function}() takes {counted(arity, 'argument')}, got {len(args)}")
        return Node("call", tuple(args), function)
