"""CSV tables in pasted text: where a glued record starts, and whether a wrap is one.

A CSV table says by itself what its records are: each has as many commas as its
header, and its records start alike (``GPU-``, an index then ``GPU-``, a date).
:mod:`diagnose.importers.mend` asks this module where to split a line that holds
two records and whether full-width lines are pieces of wrapped records or whole
rows that happen to be the longest.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable

from diagnose.importers.undone import Undone

MAJORITY = 0.6  # most lines: what a table's lines share, or a prefix the paste put on them


# The columns of a printed table, aligned by runs of spaces (nsys stats, a profiler summary): its
# commas are in its figures ("29,190,202") and names ("mul_mat<(int)8, (bool)0>"), never between fields.
_ALIGNED = re.compile(r"\S {2,}(?=\S)")


def is_csv(lines: list[str]) -> bool:
    """Most lines hold several commas that separate fields: a table, not prose that has a comma here
    and there, nor a space-aligned table whose figures and names hold commas."""
    filled = [line for line in lines if line.strip()]
    return bool(filled) and sum(_separates(line) for line in filled) >= MAJORITY * len(filled)


def _separates(line: str) -> bool:
    return line.count(",") >= 2 and len(_ALIGNED.findall(line)) < 3


def record_start(lines: list[str]) -> tuple[re.Pattern[str], int] | None:
    """How the records of a CSV table start, and their number of commas: what their first field
    shares (``GPU-``, ``2024/01/04 13:``), or an index and what the second shares (``7, GPU-``),
    three characters at least; None for no CSV table, or records that share no start."""
    if not is_csv(lines):
        return None
    commas = Counter(line.count(",") for line in lines if line.count(",") >= 2).most_common(1)[0][0]
    rows = [line.split(",", 2) for line in lines if line.count(",") == commas]
    # the header shares the records' commas, not their start: most records start alike ("G", a digit)
    kind = Counter(_first_kind(fields[0]) for fields in rows).most_common(1)[0][0]
    firsts = [fields for fields in rows if _first_kind(fields[0]) == kind]
    shared = os.path.commonprefix([fields[0] for fields in firsts])
    if len(shared.strip()) >= 3:
        return re.compile(re.escape(shared)), commas
    second = os.path.commonprefix([fields[1].lstrip() for fields in firsts])
    if all(fields[0].strip().isdigit() for fields in firsts) and len(second) >= 3:
        return re.compile(r"\d+,\s*" + re.escape(second)), commas
    return None


def _first_kind(field: str) -> str:
    first = field.lstrip()[:1]
    return "9" if first.isdigit() else first


def split_glued(line: str, start: re.Pattern[str], commas: int) -> list[str]:
    """Records of a CSV table glued on one line (``... 105842 MiBGPU-d933...``): split where a record's
    start follows a non-space character and each piece has a record's commas."""
    pieces: list[str] = []
    while line.count(",") >= 2 * commas:
        at = next(
            (
                found.start()
                for found in start.finditer(line, 1)
                if not line[found.start() - 1].isspace() and line[: found.start()].count(",") == commas
            ),
            None,
        )
        if at is None:
            break
        pieces.append(line[:at])
        line = line[at:]
    return [*pieces, line]


def unwrapped(
    lines: list[str], width: int, undone: list[str], starts_record: Callable[[str], bool]
) -> list[str]:
    """A wrapped CSV table rejoined where that gives more whole records and breaks none.

    Every record of a CSV table has as many fields as its header: pieces of records do not. The
    record sizes are the numbers of commas of a fifth or more of the lines that are whole whatever
    the wrap (shorter than the width, after a line shorter than the width). Full-width lines
    are joined to the lines after them, and the joining is kept only if its lines agree on their
    number of commas more often than before (a table whose rows all end at one column stays as it
    is), and it leaves fewer lines of no record size without leaving fewer of a record size (two
    whole records of the longest width joined make one of no size).
    """
    joined: list[str] = []
    previous = 0
    for line in lines:
        if joined and previous == width and line.strip() and not starts_record(line):
            joined[-1] += line
        else:
            joined.append(line)
        previous = len(line)
    if len(joined) == len(lines):
        return lines
    whole_lines = [
        line
        for previous, line in zip(["", *lines], lines, strict=False)
        if len(previous) < width and len(line) < width and "," in line
    ]
    counts = Counter(line.count(",") for line in whole_lines)
    sizes = {commas for commas, n in counts.items() if n >= max(2, sum(counts.values()) / 5)}
    whole, broken = _record_fit(lines, sizes)
    whole_joined, broken_joined = _record_fit(joined, sizes)
    if whole_joined < whole or broken_joined >= broken or _agreement(joined) <= _agreement(lines):
        return lines
    undone.append(
        Undone("rejoined ", len(lines) - len(joined), "line", f" of a CSV table wrapped at {width} columns")
    )
    return joined


def _agreement(lines: list[str]) -> float:
    """The share of lines that have the commonest number of commas (one at least): a line with none is
    no record, or a wrapped record's tail."""
    counts = Counter(line.count(",") for line in lines if line.strip())
    records = Counter({commas: n for commas, n in counts.items() if commas})
    return records.most_common(1)[0][1] / sum(counts.values()) if records else 0.0


def _record_fit(lines: list[str], sizes: set[int]) -> tuple[int, int]:
    """How many lines have a record's number of commas, and how many (of the others) do not."""
    filled = [line.count(",") for line in lines if line.strip()]
    whole = sum(commas in sizes for commas in filled)
    return whole, len(filled) - whole
