"""Mending a log record its author broke at its commas (mend.py's ``commas`` step).

A stats line of a dozen figures is often re-flowed by hand to fit an issue's width: broken after its
commas, the pieces indented under the first. The grammar that tells it from anything else: a line that
starts a record of a known format ends with a comma (a record does not), and the indented lines after it
start none.
"""

from __future__ import annotations

import re

from diagnose.importers.undone import Undone


def rejoined(lines: list[str], undone: list[str], log_record: re.Pattern[str]) -> list[str]:
    """A log record its author broke at its commas, joined back: a line that starts a record of a known
    format and ends with a comma goes on in the indented lines after it that start none, each ending
    with a comma but the last (a stats line of a dozen figures, re-flowed to fit an issue's width). A
    record does not end with a comma, and a line that starts one is never taken as a piece."""
    out: list[str] = []
    joined = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not (line.rstrip().endswith(",") and log_record.match(line)):
            out.append(line)
            continue
        depth = len(line) - len(line.lstrip())
        record = line.rstrip()
        while index < len(lines) and record.endswith(","):
            piece = lines[index]
            text = piece.strip()
            if not text or len(piece) - len(piece.lstrip()) <= depth or log_record.match(text):
                break
            record += " " + text
            joined += 1
            index += 1
        out.append(record if record != line.rstrip() else line)
    if not joined:
        return lines
    undone.append(Undone("rejoined ", joined, "line", " of log records broken at their commas"))
    return out
