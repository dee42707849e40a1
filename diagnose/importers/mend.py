"""Undo the damage text suffers on its way into an incident, once, before any importer sees it.

Evidence reaches us pasted: every line behind a process tag (``(EngineCore_0
pid=123)``, a docker-compose service, a kubectl pod), inside a Markdown quote
or code fence, indented, with HTML entities and Markdown escapes, a shell
prompt above it, curl's progress meter in the middle of it, a tmux scroll
indicator at the end of a line, lines glued together or hard-wrapped at a
column. Each importer reads the clean format; this layer gives it the clean
format, whatever the damage, and says what it undid so the report can too.

Each repair is decided by grammar, not by samples: a prefix is removed only
where it has a known shape (a process tag, a compose service, a quote) and,
for the shapes a real line could start with, only where most lines carry it;
a glued line is split only where a record of a known format starts right
after a non-space character; a wrapped line is rejoined only when it is
exactly as long as the file's longest lines and the next line starts no
record. A clean file passes through unchanged.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from diagnose.importers import mend_commas, mend_csv
from diagnose.importers.mend_csv import MAJORITY
from diagnose.importers.mend_noise import without_noise
from diagnose.importers.undone import Undone
from diagnose.units import counted

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
# The same codes written out by whatever carried them: rsyslog's "#033[", a JSON "\u001b[", "\x1b[",
# "\033[", a terminal's "^[[".
_ESCAPED_ANSI = re.compile(r"(?:#033|\\u001[bB]|\\x1[bB]|\\033|\^\[)\[[0-9;?]*[ -/]*[@-~]")
_INVISIBLE = str.maketrans({"\u00a0": " ", "\u200b": None, "\ufeff": None, "\u2009": " "})
_ENTITY = re.compile(r"&(?:lt|gt|quot|amp|apos|nbsp|#\d{1,5}|#x[0-9a-fA-F]{1,4});")
_MARKDOWN_ESCAPE = re.compile(r"\\([_*#\[\]<>|`])")
_EMPHASIS_TAG = re.compile(r"</?(?:em|i)>")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
# A JSON document opens an object with a key, or an array of objects, arrays or strings; a line
# that opens with "[gpu-3 ~]#" or "[  12.345678]" is a prompt or a kernel log line.
_JSON_START = re.compile(r'\s*(?:\{\s*["}]|\[\s*[{\["\]])')
_JSON_HEAD = 4096  # enough to see a document open, whatever its entities
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")


@dataclass(frozen=True)
class _Prefix:
    """A per-line prefix shape; ``everywhere``: its shape never starts a real line of any format."""

    what: str
    pattern: re.Pattern[str]
    everywhere: bool


_PREFIXES = (
    # vLLM's and Ray's process tags: (EngineCore_0 pid=12), (VllmWorkerProcess pid=3), (pid=9, ip=10.0.0.2)
    _Prefix(
        "process tag",
        re.compile(r"^\((?:[A-Za-z_][\w.:-]*\s+)?pid=\d+(?:,\s*ip=[\w.:]+)?\)\s?"),
        everywhere=True,
    ),
    _Prefix("kubectl --prefix tag", re.compile(r"^\[pod/[^\]\s]+\]\s"), everywhere=True),
    # docker compose: "vllm-1  | ", "web_1 | "
    _Prefix("docker compose service", re.compile(r"^[A-Za-z0-9][\w.-]*\s*\|\s?"), everywhere=False),
    _Prefix("Markdown quote", re.compile(r"^\s{0,3}>(?:\s?>)*\s?"), everywhere=False),
)
_KEPT_PREFIXES = 20
# A line that opens with a process tag is a record of its own, whatever follows the tag.
_TAGGED = re.compile("|".join(prefix.pattern.pattern for prefix in _PREFIXES if prefix.everywhere))
_INDENT = re.compile(r"^[ \t]*")

# Where a record of a known format starts. A glued line is split there when the record follows a
# non-space character directly; a wrapped line is never joined to a line that starts one.
_RECORD_STARTS = (
    r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d",  # vLLM / Python logging
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z\s+(?:INFO|WARN|ERROR|DEBUG|TRACE)\b",  # TGI (Rust tracing)
    r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]{2,4}\d+)*\]|\[gpu=\d+\] ",  # SGLang
    r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]",  # glog (Triton)
    r"\[\s*\d+\.\d{6}\]",  # dmesg
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]",  # dmesg -T, --ctime
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d ",  # dmesg --time-format iso
    r"# (?:HELP|TYPE) [A-Za-z_:]",  # Prometheus exposition comments
)
# A line of a log (any known record start but the exposition's comments), at its start.
_LOG_RECORD = re.compile("|".join(start for start in _RECORD_STARTS if not start.startswith("# ")))
# The first character's class is checked before the alternatives: 1.6x faster on a long log.
_GLUED = re.compile(r"(?<=\S)(?=[IWEDCF\d\[#])(?=" + "|".join(_RECORD_STARTS) + ")")
# A Prometheus sample glued to the next: 'name{...} 1.0name2{...} 2' or 'name 1.0name2 2'.
_VALUE = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|Inf|NaN)"
_NAME = r"[A-Za-z_:][A-Za-z0-9_:]*"
_GLUED_SAMPLE = re.compile(rf"^({_NAME}(?:\{{[^}}]*\}})?[ \t]+{_VALUE})(?={_NAME}(?:\{{|[ \t]+{_VALUE}))")
# A '# TYPE' line glued to the sample after it: '# TYPE x gaugex{...} 1'.
_GLUED_TYPE = re.compile(
    rf"^(# TYPE {_NAME} (?:counter|gauge|histogram|summary|untyped|unknown|info|stateset))(?={_NAME})"
)
# A Prometheus sample: a record in an exposition, and a wrap's tail anywhere else ("bpartition 1.").
_SAMPLE = re.compile(rf"{_NAME}(?:\{{[^}}]*\}})?[ \t]+{_VALUE}(?:[ \t]+-?\d+)?[ \t]*$")
# A sample with its label set ('name{k="v"} 1') is one in any text: no wrap leaves a tail of that shape.
_LABELLED_SAMPLE = re.compile(rf"{_NAME}\{{[^}}]*=\"[^}}]*\}}[ \t]+{_VALUE}(?:[ \t]+-?\d+)?[ \t]*$")
_EXPOSITION_COMMENT = re.compile(r"# (?:HELP|TYPE) ")
_STARTS_RECORD = re.compile(
    "|".join(_RECORD_STARTS)
    + r"|[|+│╞╘╒╭╰├└┌]"  # a row of a drawn table
    + r"|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d"  # nvidia-smi's timestamp column
    + r"|\s{2}|\t"  # an indented line: its own record in every indented format
)
_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"\d+")
_WRAP_MIN = 60  # no terminal or paste box wraps narrower
_PADDING = "  "
_COLUMN_GAP = re.compile(r"\S {2,}(?=\S)")  # a gap of two spaces or more between two cells
_SHARED_COLUMNS = 3


@dataclass(frozen=True)
class Mended:
    """The text as its format wrote it, and what was undone to get it, in words for the report."""

    text: str
    undone: tuple[str, ...] = ()
    # The distinct prefixes taken off (a few): who wrote the lines, "(VllmWorkerProcess pid=7)"
    prefixes: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()  # the steps that undid something (see :func:`mend`)
    # The commands of the prompt lines taken off ("vmstat 2", "dcgmi dmon -d 500"): a tool's options say
    # what its output does not (its interval, its unit)
    commands: tuple[str, ...] = ()


def mend(text: str, dedent: bool = True, steps: frozenset[str] | None = None) -> Mended:
    """``text`` with the damage of pasting undone; a clean text comes back unchanged.

    ``dedent`` False: an indentation common to every line is kept (a piece of a file whose first piece
    was not indented: its lines are indented by their format, a section of ``nvidia-smi -q``).
    ``steps``: only these of its steps, by name: characters, json, cut_end, fences, unwrap, unescape,
    prefixes, noise, unglue, commas (a later piece of a file needs what its first piece did).
    """
    undone: list[str] = []
    acted: list[str] = []

    def step(name: str, undo: Callable[[list[str], list[str]], list[str]], lines: list[str]) -> list[str]:
        if steps is not None and name not in steps:
            return lines
        before = len(undone)
        lines = undo(lines, undone)
        if len(undone) > before and name not in acted:
            acted.append(name)
        return lines

    if steps is None or "characters" in steps:
        before = len(undone)
        text = _characters(text, undone)
        acted += ["characters"] if len(undone) > before else []
    if (steps is None or "json" in steps) and _is_json(_unescaped(text[:_JSON_HEAD], [])):
        if steps is None or "unescape" in steps:
            before = len(undone)
            text = _unescaped(text, undone)
            acted += ["unescape"] if len(undone) > before else []
        return Mended(_json_unwrapped(text, undone), tuple(undone), steps=(*acted, "json"))
    lines = text.split("\n")
    lines = step("cut_end", _without_cut_end, lines)
    lines = step("fences", _without_fences, lines)
    prefixes: dict[str, None] = {}
    # A terminal wraps what the log shipper prefixed (the pieces carry no prefix), a Markdown
    # indent prefixes what a terminal wrapped: rejoin before the prefixes go and after. A wrap
    # counts the characters of the text it wrapped: Markdown escapes and entities go after the
    # first rejoining (a wrap of the escaped text) and before the second (an escaped wrap).
    lines = step("unwrap", _unwrapped, lines)
    lines = step("unescape", lambda lines, undone: _unescaped("\n".join(lines), undone).split("\n"), lines)
    lines = step("prefixes", lambda lines, undone: _without_prefixes(lines, undone, prefixes, dedent), lines)
    commands: list[str] = []
    lines = step("noise", lambda lines, undone: without_noise(lines, undone, commands), lines)
    lines = step("unglue", _unglued, lines)
    lines = step("unwrap", _unwrapped, lines)
    lines = step("commas", lambda lines, undone: mend_commas.rejoined(lines, undone, _LOG_RECORD), lines)
    return Mended("\n".join(lines), tuple(undone), tuple(prefixes), tuple(acted), tuple(commands))


def _without_cut_end(lines: list[str], undone: list[str]) -> list[str]:
    """Without a last row cut mid-figure: open (no line end), and proof of the cut in the table itself.

    A file's writer ends its last line (307 of the 315 real samples); a paste cut short leaves it
    open, and "98.5" cut to "98" reads as a smaller figure. An open last line alone is no proof
    (an editor or a clipboard may leave the last line end off), so the line is left out only
    where the table shows the cut: its last figure is shorter than the figure in the same place
    on every other line that has one there (three at least), or every other row of its table ends
    on a separator (Grafana's "1466074200000;507504844;") and it does not.
    """
    last = lines[-1].rstrip() if len(lines) >= 2 else ""
    if not last[-1:].isdigit():
        return lines
    fields = _FIELD_SPLIT.split(last)
    place, figure = len(fields) - 1, fields[-1]
    widths = [
        len(others[place])
        for line in lines[:-1]
        if len(others := _FIELD_SPLIT.split(line.strip())) > place and _FIGURE.match(others[place])
    ]
    if len(widths) >= 3 and len(figure) < min(widths):
        proof = "its last figure is shorter than the same figure on every other line"
    elif (end := _rows_end(lines[:-1], last)) is not None:
        proof = f"every other row of its table ends on {end!r}"
    else:
        return lines
    undone.append(
        f"left out the last line ({len(lines)}): it has no line end and {proof}, so the paste cut it"
    )
    return lines[:-1]


def _rows_end(lines: list[str], last: str) -> str | None:
    """The separator every row shaped like ``last`` ends on, where they all end on the same one."""
    outline = _outline(last)
    ends = {line.rstrip()[-1] for line in lines if _outline(line.rstrip()[:-1]) == outline}
    return ends.pop() if len(ends) == 1 and ends <= {",", ";", "|", "\t"} else None


_FIELD_SPLIT = re.compile(r"[,;\s]+")
_FIGURE = re.compile(r"[-+]?\.?\d")


def _characters(text: str, undone: list[str]) -> str:
    text = text.replace("\r\n", "\n")
    if "\r" in text:  # a progress meter or a spinner redrawing its line: each redraw is a line
        text = text.replace("\r", "\n")
    if "\x1b" in text:
        text, count = _ANSI.subn("", text)
        if count:
            undone.append(Undone("removed ", count, "terminal colour code"))
    if "[" in text and (count := len(_ESCAPED_ANSI.findall(text))):
        text = _ESCAPED_ANSI.sub("", text)
        undone.append(Undone("removed ", count, "colour code", " written out as text (#033[, \\u001b[ ...)"))
    return text.translate(_INVISIBLE)


def _unescaped(text: str, undone: list[str]) -> str:
    """HTML entities and Markdown escapes, decoded: what a web page or an issue's source did to a paste."""
    entities = len(_ENTITY.findall(text))
    if entities:
        text = html.unescape(text)
        undone.append(Undone("decoded ", entities, "HTML entity", " (&lt; &quot; ...)", "HTML entities"))
    escapes = len(_MARKDOWN_ESCAPE.findall(text)) + len(_EMPHASIS_TAG.findall(text))
    if escapes:
        text = _EMPHASIS_TAG.sub("_", _MARKDOWN_ESCAPE.sub(r"\1", text))
        marks = ("Markdown escape or emphasis mark", "Markdown escapes or emphasis marks")
        undone.append(Undone("undid ", escapes, marks[0], " (\\_ for _)", marks[1]))
    return text


def _is_json(text: str) -> bool:
    return _JSON_START.match(text) is not None


def _json_unwrapped(text: str, undone: list[str]) -> str:
    """A JSON document with the line breaks a hard wrap put inside its strings taken out.

    JSON never holds a raw line break inside a string, so one there is damage, wherever it fell.
    """
    removed = 0

    def joined(match: re.Match[str]) -> str:
        nonlocal removed
        string = match.group(0)
        if "\n" not in string:
            return string
        removed += string.count("\n")
        return string.replace("\n", "")

    text = _JSON_STRING.sub(joined, text)
    if removed:
        undone.append(Undone("rejoined ", removed, "line break", " a hard wrap put inside JSON strings"))
    return text


def _without_fences(lines: list[str], undone: list[str]) -> list[str]:
    kept = [line for line in lines if not _FENCE.match(line)]
    if len(kept) < len(lines):
        undone.append(Undone("removed ", len(lines) - len(kept), "Markdown code fence line"))
    return kept


def _without_prefixes(
    lines: list[str], undone: list[str], prefixes: dict[str, None], dedent: bool = True
) -> list[str]:
    """Peel per-line prefixes, layer by layer (a compose service, then a process tag)."""
    for _ in range(4):
        filled = [line for line in lines if line.strip()]
        if not filled:
            return lines
        peeled = False
        for prefix in _PREFIXES:
            matches = [prefix.pattern.match(line) for line in lines]
            carried = sum(1 for m in matches if m and m.group(0).strip())
            if not carried or (not prefix.everywhere and carried < MAJORITY * len(filled)):
                continue
            shown = next(m.group(0).strip() for m in matches if m and m.group(0).strip())
            for match in matches:
                if match and len(prefixes) < _KEPT_PREFIXES and match.group(0).strip():
                    prefixes.setdefault(match.group(0).strip())
            lines = [line[m.end() :] if m else line for line, m in zip(lines, matches, strict=True)]
            if prefix.everywhere:
                lines = _split_at_tags(
                    lines, {m.group(0).strip() for m in matches if m and m.group(0).strip()}, undone
                )
            if prefix.what == "Markdown quote":  # the quote ate the '#' of '# HELP' / '# TYPE'
                lines = [f"# {line}" if line.startswith(("HELP ", "TYPE ")) else line for line in lines]
            undone.append(
                Undone(f'removed a {prefix.what} prefix ("{_elided(shown)}") from ', carried, "line")
            )
            peeled = True
        indent = _common_indent(lines) if dedent else 0
        if indent:
            lines = [line[indent:] for line in lines]
            undone.append(f"removed a common indentation of {counted(indent, 'character')}")
            peeled = True
        if not peeled:
            return lines
    return lines


def _split_at_tags(lines: list[str], tags: set[str], undone: list[str]) -> list[str]:
    """Lines glued together behind their process tags: a tag this paste puts before its lines, met in
    the middle of one, starts the next line (a tag only the file's own line starts carry)."""
    inside = re.compile(r"(?<=.)(?:" + "|".join(re.escape(tag) for tag in sorted(tags)) + r") ?")
    out, splits = [], 0
    for line in lines:
        pieces = inside.split(line)
        splits += len(pieces) - 1
        out.extend(pieces)
    if splits:
        undone.append(Undone("split ", splits, "place", " where two tagged lines were glued together"))
    return out


def _elided(prefix: str) -> str:
    prefix = re.sub(r"pid=\d+", "pid=…", prefix)
    return re.sub(r"ip=[\w.:]+", "ip=…", prefix)


def _common_indent(lines: list[str]) -> int:
    widths = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    return min(widths) if widths else 0


def _unglued(lines: list[str], undone: list[str]) -> list[str]:
    out, splits = [], 0
    csv_start = mend_csv.record_start(lines)
    for line in lines:
        parts = _GLUED.split(line) if _GLUED.search(line) else [line]
        if csv_start is not None:
            parts = [piece for part in parts for piece in mend_csv.split_glued(part, *csv_start)]
        pieces = []
        for part in parts:
            while (glued := _GLUED_SAMPLE.match(part) or _GLUED_TYPE.match(part)) is not None:
                pieces.append(glued.group(1))
                part = part[glued.end() :]
            pieces.append(part)
        splits += len(pieces) - 1
        out.extend(pieces)
    if splits:
        undone.append(Undone("split ", splits, "place", " where two lines were glued together"))
    return out


def _unwrapped(lines: list[str], undone: list[str]) -> list[str]:
    """Lines a hard wrap cut at one column, joined back where the grammar of the file allows it.

    The file's own records say what a start looks like: a line after a shorter one starts a
    record, and so does any line whose first word has the same shape (``0,`` and ``7,``;
    ``WARNING:root:...``). A record is rejoined from full-width pieces and a shorter tail that
    start no record; full-width pieces of one outline are rows of a fixed-width table, not a
    wrap, and pieces with no shorter tail (the file ends, or a record starts) are left as
    they are.
    """
    lengths = Counter(len(line) for line in lines)
    width = max(lengths, default=0)
    if width < _WRAP_MIN or lengths[width] < 2:
        return lines
    if mend_csv.is_csv(lines):
        return mend_csv.unwrapped(lines, width, undone, lambda line: _starts_record(line, False))
    exposition = _is_exposition(lines)
    # A full-width line padded with spaces is a whole row a printer padded out (the rows of a profiler
    # summary): a wrap cuts text, and what it cuts inside a gap goes on as an indented line.
    wrapped = (
        len(line) == width
        and not line.endswith(_PADDING)
        and after.strip()
        and not _starts_record(after, exposition)
        for line, after in zip(lines, lines[1:], strict=False)
    )
    if not any(wrapped):  # every full-width line is followed by a record's start, or by nothing
        return lines
    # The shapes of records no known grammar recognises ("ERROR 11-23 ..." is known, and its shape,
    # a word and a number, would make "ich 3.02 GiB ..." a record too)
    starts = {
        _shape(line)
        for previous, line in zip(["", *lines], lines, strict=False)
        if len(previous) < width and line.strip() and not _starts_record(line, exposition)
    }
    out: list[str] = []
    record: list[str] = []
    joined = 0

    def flush() -> None:
        nonlocal joined
        rows = [_outline(piece) for piece in record[1:-1]]
        if len(record) > 1 and len(record[-1]) < width and len(set(rows)) == len(rows):
            out.append("".join(record))
            joined += len(record) - 1
        else:
            out.extend(record)
        record.clear()

    for line in lines:
        continues = (
            record
            and len(record[-1]) == width
            and not record[-1].endswith(_PADDING)
            and line.strip()
            and not _starts_record(line, exposition)
            and _shape(line) not in starts
            and not _aligned(record[-1], line)
        )
        if not continues:
            flush()
        record.append(line)
    flush()
    if not joined:
        return lines
    undone.append(Undone("rejoined ", joined, "line", f" hard-wrapped at {width} columns"))
    return out


def _aligned(line: str, after: str) -> bool:
    """Whether two lines are rows of one fixed-width table (a header and its first row, both full
    width): their columns start at the same places. A wrap's tail starts where the cut fell."""
    return len(_column_starts(line) & _column_starts(after)) >= _SHARED_COLUMNS


def _column_starts(line: str) -> set[int]:
    return {match.end() for match in _COLUMN_GAP.finditer(line)}


def _starts_record(line: str, exposition: bool) -> bool:
    """Whether a line starts a record; ``exposition``: the text is a Prometheus exposition."""
    return (
        _STARTS_RECORD.match(line) is not None
        or _TAGGED.match(line) is not None
        or (exposition and _SAMPLE.match(line) is not None)
        or _LABELLED_SAMPLE.match(line) is not None
    )


def _is_exposition(lines: list[str]) -> bool:
    """A scrape: its comments, or samples on most lines."""
    filled = [line for line in lines if line.strip()]
    if any(_EXPOSITION_COMMENT.match(line) for line in filled):
        return True
    return bool(filled) and sum(_SAMPLE.match(line) is not None for line in filled) >= MAJORITY * len(filled)


def _outline(line: str) -> str:
    """A line with its words and numbers as ``a`` and ``9``: the rows of a table share one."""
    return " ".join(_DIGITS.sub("9", _LETTERS.sub("a", line)).split())


def _shape(line: str) -> str:
    """How a line starts: indented or not, its first word's outline, what the second opens with.

    ``    0     36`` -> `` 9 9``; ``Traceback (most`` -> ``a (``; ``7, GPU-2878`` -> ``9, a``.
    """
    words = line.split(None, 2)
    if not words:
        return ""
    indent = " " if line[:1].isspace() else ""
    second = _outline(words[1])[:1] if len(words) > 1 else ""
    return f"{indent}{_outline(words[0])} {second}".rstrip()
