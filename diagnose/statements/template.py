"""A writer's format string turned into a pattern that finds what it printed, on any line.

A template is the message as the source writes it: ``Sequence group %s is preempted by %s mode``
(printf), ``Scheduler watchdog timeout ({timeout} s)`` (Python's format, f-strings, C++ fmt, Rust's
``format!``). Its literal text must be there as written, but for white space (a wrap rejoined, a
terminal's padding, two spaces where the source has one); each placeholder takes what its
conversion can print (``%d`` a whole number, ``{:.2f}`` a decimal, ``%s`` anything). A pasted line is
often cut: the pattern needs only the template's head (its first words, up to a placeholder and at
least ``MIN_HEAD`` characters of text), and each further piece only if the line goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Style(StrEnum):
    PRINTF = "printf"
    FORMAT = "format"
    LITERAL = "literal"


class Kind(StrEnum):
    """What a placeholder prints, as far as its conversion says."""

    INT = "int"
    FLOAT = "float"
    TEXT = "text"


@dataclass(frozen=True)
class Placeholder:
    kind: Kind
    percent: bool = False  # ``{:.1%}``: a fraction printed as a percentage, with its sign


@dataclass(frozen=True)
class Compiled:
    pattern: re.Pattern[str]
    head: int  # how many of the template's pieces (texts and placeholders) a line must hold
    key: str  # the template's longest literal run: what a fast first look searches for
    kinds: tuple[Kind, ...]  # each placeholder's, in order


class TemplateError(ValueError):
    """A template that cannot be read in its style (the message says where)."""


MIN_HEAD = 20  # characters of literal text a cut line must still hold

# printf: %% or %[(name)][flags][width][.precision][length]conversion (C's, Python's logging's)
_PRINTF = re.compile(
    r"%%|%(?:\(\w+\))?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?([diouxXeEfFgGcrsap])"
)
# format: {{, }} or {field[!conv][:spec]} (fields may hold dots, brackets, calls: an f-string's expression)
_FORMAT = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")

# A figure's digits, in thousands with commas or not: a comma that is not a thousands' one ends it
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
_INT = rf"[-+]?{_DIGITS}"
_FLOAT = rf"[-+]?(?:{_DIGITS}(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_TEXT_INSIDE = r".+?"
_TEXT_LAST = r"\S+"


def compile_template(template: str, style: Style, head_chars: int | None = None) -> Compiled:
    """The pattern of ``template``; ``head_chars``: literal characters a cut line must hold (default:
    up to the first placeholder, at least MIN_HEAD)."""
    first_line = template.strip().split("\n", 1)[0].strip()
    pieces = _split(first_line, style)
    literals = [p for p in pieces if isinstance(p, str)]
    if not "".join(literals).strip():
        raise TemplateError(f"{template!r} has no literal text to find it by")
    kinds = tuple(p.kind for p in pieces if isinstance(p, Placeholder))
    head = _head_length(pieces, head_chars)
    parts = [_piece_pattern(pieces, i, optional=i >= head) for i in range(len(pieces))]
    pattern = "".join(parts[:head]) + _nested_optional(parts[head:])
    # The longest literal run of the head: a line cut after its head still has it.
    key = max((" ".join(p.split()) for p in pieces[:head] if isinstance(p, str)), key=len)
    if head_chars is None and head == 1 and isinstance(pieces[0], str):
        # The head is the template's first words: a line cut inside them, after MIN_HEAD characters, is
        # still this statement's ("... Watchdog caught collective operati" at a paste's edge)
        text = " ".join(pieces[0].split())
        # ... in words: three at least, as a sentence is (one long name, "max_total_num_tokens", may be
        # a metric's or a variable's anywhere)
        if len(text) > MIN_HEAD and text[:MIN_HEAD].strip().count(" ") >= 2:
            pattern = f"(?:{pattern}|{_cut_literal(pieces[0], MIN_HEAD)})"
            key = text[:MIN_HEAD].strip()
    return Compiled(re.compile(pattern), head, key, kinds)


def _cut_literal(piece: str, keep: int) -> str:
    """A literal piece cut at the line's end after its first ``keep`` characters (white space counted as
    one): a pasted line cut short inside the writer's words."""
    text = " ".join(piece.split())
    lead = r"\s+" if piece[:1].isspace() else ""
    sure = r"\s+".join(re.escape(word) for word in text[:keep].split(" "))
    rest = ""
    for char in reversed(text[keep:]):
        rest = "(?:" + (r"\s+" if char == " " else re.escape(char)) + rest + ")?"
    return lead + sure + rest + r"\s*$"


def _split(template: str, style: Style) -> list[str | Placeholder]:
    """The template as literal text and placeholders, in order (adjacent text joined)."""
    if style == Style.LITERAL:
        return [template]
    found = _PRINTF if style == Style.PRINTF else _FORMAT
    pieces: list[str | Placeholder] = []
    between: list[str] = []  # the text between tokens: a brace there is one no token took
    at = 0
    for match in found.finditer(template):
        text = template[at : match.start()]
        between.append(text)
        token = match.group(0)
        at = match.end()
        if token in ("%%", "{{", "}}"):
            _add_text(pieces, text + token[0])
            continue
        _add_text(pieces, text)
        if style == Style.PRINTF:
            pieces.append(_printf_placeholder(match.group(1)))
            continue
        expression = re.split(r"[!:]", match.group(1), maxsplit=1)[0]
        if expression.endswith("=") and not expression.endswith("=="):
            _add_text(pieces, expression)  # an f-string's {x=} prints "x=" before the value
        pieces.append(_format_placeholder(match.group(1)))
    _add_text(pieces, template[at:])
    between.append(template[at:])
    if style == Style.FORMAT and any("{" in text or "}" in text for text in between):
        raise TemplateError(f"{template!r}: an unmatched brace (write a literal one as {{{{ or }}}})")
    return pieces


def _add_text(pieces: list[str | Placeholder], text: str) -> None:
    if not text:
        return
    if pieces and isinstance(pieces[-1], str):
        pieces[-1] += text
    else:
        pieces.append(text)


def _printf_placeholder(conversion: str) -> Placeholder:
    if conversion in "diouxXc":
        return Placeholder(Kind.INT if conversion in "diou" else Kind.TEXT)
    if conversion in "eEfFgG":
        return Placeholder(Kind.FLOAT)
    return Placeholder(Kind.TEXT)


def _format_placeholder(field: str) -> Placeholder:
    spec = field.rsplit(":", 1)[1] if ":" in field and not field.endswith("]") else ""
    conversion = spec[-1:] if spec else ""
    if conversion == "%":
        return Placeholder(Kind.FLOAT, percent=True)
    if conversion in ("d", "n"):
        return Placeholder(Kind.INT)
    if conversion in ("e", "E", "f", "F", "g", "G"):
        return Placeholder(Kind.FLOAT)
    return Placeholder(Kind.TEXT)


def _piece_pattern(pieces: list[str | Placeholder], index: int, optional: bool) -> str:
    piece = pieces[index]
    if isinstance(piece, str):
        words = piece.split()
        if not words:
            return r"\s+"
        lead = r"\s+" if piece[:1].isspace() else ""
        tail = r"\s+" if piece[-1:].isspace() else ""
        return lead + r"\s+".join(re.escape(w) for w in words) + tail
    if piece.kind == Kind.INT:
        return f"({_INT})"
    if piece.kind == Kind.FLOAT:
        return f"({_FLOAT})" + ("%" if piece.percent else "")
    after = pieces[index + 1] if index + 1 < len(pieces) else None
    if index == 0 or after is None or optional:
        # Where nothing required follows to stop it (a line may be cut right after it), or at the start
        # (a search starts anywhere): one word, ending where the template's text goes on if it does.
        if isinstance(after, str) and after[:1].strip():
            goes_on = re.escape(after.split()[0][:12])
            return rf"(\S+?)(?={goes_on}|\s|$)"
        return f"({_TEXT_LAST})"
    return f"({_TEXT_INSIDE})"


def _head_length(pieces: list[str | Placeholder], head_chars: int | None) -> int:
    """How many pieces a line must hold: enough literal text to be this template's."""
    wanted = MIN_HEAD if head_chars is None else head_chars
    seen = 0
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            seen += len(piece.strip())
            if seen >= wanted:
                return index + 1
    return len(pieces)


def _nested_optional(parts: list[str]) -> str:
    """``a(?:b(?:c)?)?``: each later piece counts only where the ones before it are all there."""
    pattern = ""
    for part in reversed(parts):
        pattern = f"(?:{part}{pattern})?"
    return pattern


def fill(template: str, style: Style, values: list[str], pieces: int | None = None) -> str:
    """The line a writer prints for ``template`` with its placeholders as ``values`` (in order): what a
    statement looks like in a log, for its tests and the catalogue's checks. ``pieces``: only the
    first so many pieces (a line cut short)."""
    split = _split(template.strip().split("\n", 1)[0].strip(), style)[:pieces]
    given = iter(values)
    return "".join(p if isinstance(p, str) else next(given) + ("%" if p.percent else "") for p in split)


def figure_value(text: str, kind: Kind) -> float | int | str:
    """A placeholder's printed text as the number it is where it is one."""
    if kind == Kind.TEXT:
        cleaned = text.strip().strip("'\"")
        return _number(cleaned) if _NUMBER.fullmatch(cleaned) else cleaned
    return _number(text)


_NUMBER = re.compile(r"[-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _number(text: str) -> float | int | str:
    plain = text.replace(",", "").replace("_", "")
    try:
        return float(plain) if any(c in plain for c in ".eE") else int(plain)
    except ValueError:
        return text
