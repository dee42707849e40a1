"""Tables whose columns a rule of dash groups marks (``-----  -------  ---``), as profilers print them.

PyTorch's ``key_averages().table()`` and Nsight Systems' ``nsys stats`` both
draw such a rule under (or around) their header; each dash group is a column.
A cell is the text from its group's start to the next group's: figures are
right-aligned under their dashes, names left- or right-aligned, so the groups'
starts, not the header's words, say where each column is.
"""

from __future__ import annotations

import re

RULE = re.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_DASHES = re.compile(r"-{3,}")


def column_starts(rule: str) -> list[int]:
    """Where each column begins, from the rule line."""
    return [match.start() for match in _DASHES.finditer(rule)]


def column_ends(rule: str) -> list[int]:
    """Where each column ends: a right-aligned figure that stops short of its column's end was cut."""
    return [match.end() for match in _DASHES.finditer(rule)]


def cells(line: str, starts: list[int]) -> list[str]:
    """A row's cells; the first column takes the line's start too (a right-aligned name may spill left)."""
    bounds = [0, *starts[1:], len(line)]
    return [line[begin:end].strip() for begin, end in zip(bounds, bounds[1:], strict=False)]
