"""Wall-clock stamps at the start of log lines, shared by the log importers.

Serving-engine logs (vLLM and friends) stamp ``LEVEL MM-DD HH:MM:SS`` with no
year and no zone, sometimes behind an outer ISO prefix (``docker logs
--timestamps``) that gives the year; other logs start with ISO-8601.
"""

from __future__ import annotations

import re

from diagnose.importers.base import local_epoch

_ENGINE = re.compile(r"(?:INFO|WARNING|ERROR|CRITICAL|DEBUG)\s+(\d{2})-(\d{2}) (\d{2}:\d{2}:\d{2})")
_OUTER_YEAR = re.compile(r"^\[?(\d{4})-\d{2}-\d{2}")
_ISO = re.compile(r"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")


def engine_stamp(line: str, default_year: int, tz: str | None) -> float | None:
    """``INFO 05-19 10:13:11`` anywhere in the line; the year from an outer ISO prefix, else the default."""
    match = _ENGINE.search(line)
    if not match:
        return None
    year = _OUTER_YEAR.match(line.strip())
    month, day, clock = match.groups()
    epoch = local_epoch(f"{year.group(1) if year else default_year}-{month}-{day}T{clock}", tz)
    return None if epoch != epoch else epoch


def leading_iso_stamp(line: str, tz: str | None, within: int = 40) -> float | None:
    """An ISO-8601 time in the first ``within`` characters of the line."""
    match = _ISO.search(line[:within])
    epoch = local_epoch(match.group(1).replace(",", "."), tz) if match else float("nan")
    return None if epoch != epoch else epoch
