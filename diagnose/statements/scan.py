"""Find the catalogue's statements on any line of a text, and make them events.

A log of gigabytes holds a few statements among millions of routine lines, so the text is searched
whole for every statement's key at once: one pattern, its alternatives folded into a trie, run by RE2
(a DFA: the cost is the text's length, about 150 MiB/s here, where Python's backtracking engine tries
each alternative at each character, 17 MiB/s). Only a line where a key is found is matched against
the templates that share the key. The line's time comes from the stamp the caller knows how to read
(a log's own, or the file's clock).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from diagnose.statements.catalogue import Statement, builtin_catalogue
from diagnose.statements.template import figure_value

try:
    import re2
except ImportError:  # a platform without RE2's wheel: Python's engine finds the same, slower
    re2 = None

MESSAGE_CHARS = 400  # an event keeps this much of its line: a statement is near the start of what it says


@dataclass(frozen=True)
class Found:
    statement: Statement
    line: int  # 1-based, in the text searched
    text: str  # the whole line, stripped
    figures: dict[str, float | int | str]


class Finder:
    """Every statement of a catalogue, found in one pass over a text."""

    def __init__(self, statements: Iterable[Statement]) -> None:
        self._by_key: dict[str, list[Statement]] = defaultdict(list)
        for statement in statements:
            self._by_key[statement.compiled.key].append(statement)
        self._keys = _compiled(_trie_pattern(list(self._by_key))) if self._by_key else None
        self._spaces = re.compile(r"\s+")
        # A key found on a line stands for every key it starts with: the trie finds the longest, and a
        # template whose head a line may hold cut short is filed under its head's first words alone.
        self._within = {
            key: [
                statement
                for other, found in self._by_key.items()
                if key.startswith(other)
                for statement in found
            ]
            for key in self._by_key
        }

    def find(self, text: str, first_line: int = 1) -> Iterator[Found]:
        """The statements in ``text``, one per line at most (of the templates whose key is on the
        line, the one whose match covers most of it), in order."""
        if self._keys is None:
            return
        line_number, counted_to, last_start = first_line, 0, -1
        for hit in self._keys.finditer(text):
            start = text.rfind("\n", 0, hit.start()) + 1
            if start == last_start:
                continue  # a second key on a line already matched or refused
            last_start = start
            end = text.find("\n", hit.end())
            line = text[start : end if end >= 0 else len(text)]
            line_number += text.count("\n", counted_to, start)
            counted_to = start
            found = self._match(line)
            if found is not None:
                statement, match = found
                values = {
                    name: figure_value(value, kind)
                    for name, value, kind in zip(
                        statement.figures, match.groups(), statement.compiled.kinds, strict=True
                    )
                    if name != "_" and value is not None
                }
                yield Found(statement, line_number, line.strip(), values)

    def _match(self, line: str) -> tuple[Statement, re.Match[str]] | None:
        """The template that accounts for most of the line; none where templates of different events
        account for the same text (a line cut inside words they share says neither)."""
        matches: list[tuple[Statement, re.Match[str]]] = []
        assert self._keys is not None
        for hit in self._keys.finditer(line):
            key = self._spaces.sub(" ", hit.group(0))
            for statement in self._within.get(key, ()):
                if (match := statement.compiled.pattern.search(line)) is not None:
                    matches.append((statement, match))
        if not matches:
            return None
        statement, match = max(matches, key=lambda found: found[1].end() - found[1].start())
        same = [s for s, m in matches if m.span() == match.span() and s.event != statement.event]
        return None if same else (statement, match)


@cache
def builtin_finder() -> Finder:
    """The finder of the built-in catalogue, built once a process."""
    return Finder(builtin_catalogue())


class StatementScan:
    """The statements of a text given block by block, as an importer reads it (diagnose/importers'
    ``Source.watch``), made events once the whole text has been seen."""

    def __init__(self, finder: Finder, stamp: Callable[[str], float | None], fallback_ts: float) -> None:
        self._finder, self._stamp, self._fallback = finder, stamp, fallback_ts
        self._found: list[Found] = []
        self._next_line = 1

    @property
    def found_any(self) -> bool:
        """Whether any statement was found (the importer's events need be compared only then)."""
        return bool(self._found)

    def feed(self, piece: str) -> None:
        """The next block of whole lines."""
        self._found.extend(self._finder.find(piece, self._next_line))
        self._next_line += piece.count("\n") + (0 if piece.endswith("\n") else 1)

    def events(self, already: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The events of the statements found. ``already``: the events the file's own importer read
        from it; a line it made an event of is not made one again, an OOM or an Xid it read is left to
        it, and a start within ``SAME_START_S`` of a start already known is the same start (a launch logs
        several lines, each rank its own). A line without a time of its own takes ``fallback_ts`` (the
        file's modification time) and says so."""
        already = list(already)
        # An OOM or an Xid is read whole by its own reader (a message over several lines, its figures):
        # where the file's importer read any, the statements of that kind add nothing but a second count.
        thorough = {str(e.get("kind")) for e in already} & _READ_WHOLE
        read_lines = {
            " ".join(str(e["message"]).split()) for e in already if isinstance(e.get("message"), str)
        }
        starts = [float(e["ts"]) for e in already if e.get("kind") == "restart" and _is_number(e.get("ts"))]
        events: list[dict[str, Any]] = []
        for found in self._found:
            statement = found.statement
            if statement.event in thorough or _read_already(found.text, read_lines):
                continue
            ts = self._stamp(found.text)
            at = ts if ts is not None else self._fallback
            if statement.event == "restart":
                if any(abs(at - start) < SAME_START_S for start in starts):
                    continue
                starts.append(at)
            events.append(
                {
                    **{f: v for f, v in found.figures.items() if f not in _RESERVED},
                    "kind": str(statement.event),
                    "message": found.text[:MESSAGE_CHARS],
                    "statement": statement.id,
                    "writer": statement.writer,
                    "line": found.line,
                    "ts": at,
                    "ts_source": "log line" if ts is not None else "file modification time",
                }
            )
        return events


def statement_events(
    pieces: Iterable[str],
    finder: Finder,
    stamp: Callable[[str], float | None],
    fallback_ts: float,
    already: Iterable[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The events of the statements in ``pieces`` (a text in consecutive blocks of whole lines): see
    :class:`StatementScan`."""
    scan = StatementScan(finder, stamp, fallback_ts)
    for piece in pieces:
        scan.feed(piece)
    return scan.events(already)


_READ_WHOLE = frozenset({"oom", "xid"})
SAME_START_S = 300.0  # the lines of one launch (the API server's, each rank's) are one start


def _read_already(line: str, read_lines: set[str]) -> bool:
    """Whether an importer made an event of this line: its message is the line, or a part of it."""
    if not read_lines:
        return False
    text = " ".join(line.split())
    return text in read_lines or (len(read_lines) <= _FEW and any(m and m in text for m in read_lines))


_FEW = 2000  # past this many events of its own, a file's lines are matched whole only (time)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and value == value


_RESERVED = frozenset({"kind", "message", "statement", "writer", "line", "ts", "ts_source"})


def _compiled(pattern: str) -> Any:
    """The keys' pattern, compiled by RE2 where it is installed (the same matches, the same API)."""
    if re2 is None:
        return re.compile(pattern)
    options = re2.Options()
    options.max_mem = 64 * 2**20  # the DFA of ~500 keys; RE2's default 8 MiB would fall back to slower NFA
    return re2.compile(pattern, options)


def _trie_pattern(keys: list[str]) -> str:
    """One pattern matching any of ``keys``, with shared prefixes folded (``ab(?:c|d)``), so a search
    costs about one key's, not all of them; white space in a key matches any run of it."""
    trie: dict[str, Any] = {}
    for key in keys:
        node = trie
        for char in key:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, Any]) -> str:
    ends = "" in node
    branches = [
        (r"\s+" if char == " " else re.escape(char)) + _node_pattern(child)
        for char, child in sorted(node.items())
        if char
    ]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if ends:
        return f"(?:{body})?"
    return body
