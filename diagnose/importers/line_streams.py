"""A printed table is read wherever it was printed: behind a prefix on each of its lines, among other
writers' lines.

A logger puts its head on every line of a message (vLLM's ``INFO 11-05 13:22:49 [cpu_worker.py:210] ``,
SGLang's ``[2025-01-05 13:22:49 TP0] ``), a script keeps its output as ``# `` comments, ``torchrun``
tags each rank's lines (``[rank0]:``, ``[default0]:``), and processes that print at once interleave
their lines. :func:`~diagnose.importers.mend.mend` has already taken off the tags no real line starts
with (``(EngineCore_0 pid=12)``); the prefixes here have shapes a real line may start with, so they
are taken off per *stream*: the lines that carry one prefix (its time stamps aside) are one writer's,
read as a text of their own in their order, apart from the other writers' lines.

A prefix is known by its shape (:data:`_SHAPES`) or learned from a table's own rule of dash groups:
text before the rule that the line above or below it carries too. Text before a rule that neither
neighbour carries was glued onto the rule (a test runner's ``test_x (T) ... `` left without its line
end, a logger's head on a message's first line only): the rule is read alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# The prefixes known by their writer's format; each is one stream per distinct text, stamps aside.
_SHAPES = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]\s]+\] ?"  # vLLM
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]{2,4}\d+)*\] ?"  # SGLang
    r"|\[(?:rank|default)\d+\]: ?"  # torch.distributed, torchrun --tee
    r"|#[ \t]?"  # a comment: output kept in a script
)
# What changes from line to line in one writer's prefix: a date, a time of day.
_STAMP = re.compile(r"\d{4}-\d\d-\d\d|\d\d-\d\d(?= )|\d\d:\d\d:\d\d(?:[.,]\d+)?")
_STAMP_PATTERN = r"(?:\d{4}-\d\d-\d\d|\d\d-\d\d|\d\d:\d\d:\d\d(?:[.,]\d+)?)"
_RULE_TAIL = re.compile(r"-{3,}(?:[ \t]+-{3,})+[ \t]*$")


@dataclass(frozen=True)
class Stream:
    """One writer's lines, its prefix taken off; ``prefix`` as a person would name it, stamps elided
    ("" for the lines that carry none); ``after``: the text's next line after each where it shows how
    that one ended: this writer's next (its prefix off), or a blank line; None for another writer's
    line or the text's end."""

    prefix: str
    lines: tuple[str, ...]
    after: tuple[str | None, ...]

    def ends_where_written(self, index: int, follows_a_row: Callable[[str], bool]) -> bool:
        """Whether line ``index`` ends where its writer ended it, so that its last cell is whole: the
        column spacing (two spaces) after it survived, or a line end follows it: a blank line (the
        text's own last line end is one) or a line ``follows_a_row`` says the writer prints after a
        row. A hard wrap or a cut ends a line anywhere: what follows is the rest of it, or nothing."""
        if self.lines[index].endswith("  "):
            return True
        after = self.after[index]
        return after is not None and (not after.strip() or follows_a_row(after))


def streams(lines: Sequence[str]) -> list[Stream]:
    """The lines split by the prefix each carries, each stream in the order its lines came; the lines
    without a prefix first."""
    lines = list(lines)
    learned = _learned(lines)
    split = [_split(line, learned) for line in lines]
    keyed: dict[str, list[int]] = {"": []}
    for number, (key, _) in enumerate(split):
        keyed.setdefault(key, []).append(number)
    return [
        Stream(key, tuple(split[at][1] for at in places), tuple(_after(split, lines, at) for at in places))
        for key, places in keyed.items()
        if places
    ]


def text_lines(text: str, ends_open: bool) -> list[str]:
    """A text's lines, with a blank one after the last where the text ends with a line end: its writer
    ended that line (a paste cut short does not)."""
    return text.splitlines() + ([] if ends_open else [""])


def _after(split: list[tuple[str, str]], lines: list[str], at: int) -> str | None:
    if at + 1 >= len(lines):
        return None
    if not lines[at + 1].strip():
        return ""
    key, rest = split[at + 1]
    return rest if key == split[at][0] else None


def are_the_paste(head: str, rows: int, lines: int) -> bool:
    """Whether rows found without their table's header (``rows`` of them, on ``lines`` lines) are what
    the paste is: two rows at least, on half its lines or more. A log that holds a line of that shape
    is still a log."""
    filled = sum(1 for line in head.splitlines() if line.strip())
    return rows >= 2 and 2 * lines >= filled


def _learned(lines: list[str]) -> list[re.Pattern[str]]:
    """Prefixes a table's rule shows (longest first), and rules freed, in place, of text glued onto them."""
    learned: dict[str, re.Pattern[str]] = {}
    for index, line in enumerate(lines):
        rule = _RULE_TAIL.search(line)
        before = line[: rule.start()] if rule else ""
        if not before.strip():
            continue
        pattern = _pattern(before)
        neighbours = (lines[at] for at in (index - 1, index + 1) if 0 <= at < len(lines))
        if any(pattern.match(neighbour) for neighbour in neighbours):
            learned.setdefault(pattern.pattern, pattern)
        else:
            lines[index] = line[len(before) :]
    return sorted(learned.values(), key=lambda pattern: -len(pattern.pattern))


def _pattern(prefix: str) -> re.Pattern[str]:
    """A prefix as a pattern that takes any time stamp where it has one."""
    pieces, last = [], 0
    for stamp in _STAMP.finditer(prefix):
        pieces += [re.escape(prefix[last : stamp.start()]), _STAMP_PATTERN]
        last = stamp.end()
    return re.compile("".join([*pieces, re.escape(prefix[last:])]))


def _split(line: str, learned: list[re.Pattern[str]]) -> tuple[str, str]:
    """A line's stream (its prefix, stamps elided) and the line without the prefix."""
    for pattern in learned:
        if found := pattern.match(line):
            return _named(found.group(0)), line[found.end() :]
    if (found := _SHAPES.match(line)) is not None:
        return _named(found.group(0)), line[found.end() :]
    return "", line


def _named(prefix: str) -> str:
    return re.sub(r"…(?:\s+…)+", "…", _STAMP.sub("…", prefix)).strip()
