"""Wall-clock stamps at the start of log lines, shared by the log importers.

Serving-engine logs (vLLM and friends) stamp ``LEVEL MM-DD HH:MM:SS`` with no
year and no zone, sometimes behind an outer ISO prefix (``docker logs
--timestamps``) that gives the year; other logs start with ISO-8601; kernel
logs with ``dmesg -T``'s or syslog's form; glog (Triton, XLA, TensorFlow) with
``I0523 04:01:24.648712``. :func:`line_stamp` tries each, for a line of a log
whose form is not known (a statement found in any file).
"""

from __future__ import annotations

import re
from datetime import datetime

import pandas as pd

from diagnose.importers.base import local_epoch

_ENGINE = re.compile(r"(?:INFO|WARNING|ERROR|CRITICAL|DEBUG)\s+(\d{2})-(\d{2}) (\d{2}:\d{2}:\d{2})")
_OUTER_YEAR = re.compile(r"^\[?(\d{4})-\d{2}-\d{2}")
_ISO = re.compile(r"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")


# vLLM's own layout, "%(levelname)s %(asctime)s %(filename)s:%(lineno)d]" with "%m-%d %H:%M:%S", is told
# by its file and line even where a cut took the level word away: "11-21 00:12:08 llm_engine.py:624]"
_ENGINE_NO_LEVEL = re.compile(r"(?<![\d:-])(\d{2})-(\d{2}) (\d{2}:\d{2}:\d{2})(?:\.\d+)? [\w.-]+\.py:\d+\]")


def engine_stamp(line: str, default_year: int, tz: str | None) -> float | None:
    """``INFO 05-19 10:13:11`` anywhere in the line; the year from an outer ISO prefix, else the default."""
    match = _ENGINE.search(line) or _ENGINE_NO_LEVEL.search(line)
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


_DMESG_T = re.compile(r"^\[(\w{3} \w{3} +\d+ \d{2}:\d{2}:\d{2} \d{4})\]")
# syslog's stamp; or a dmesg -T stamp whose weekday a cut took away, its year still after the time
_SYSLOG = re.compile(r"^(\w{3} +\d+ \d{2}:\d{2}:\d{2})(?: (\d{4})\])? ")
_GLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\s")


def kernel_stamp(line: str, year: int, tz: str | None) -> float | None:
    """``dmesg -T``'s ``[Tue Dec  2 11:38:47 2025]`` or syslog's ``Dec  2 11:38:47`` (the year given)
    at the start of the line; else an ISO-8601 time near it (``journalctl -o short-iso``)."""
    text = line.strip()
    for pattern, form in ((_DMESG_T, "%a %b %d %H:%M:%S %Y"), (_SYSLOG, "%b %d %H:%M:%S")):
        match = pattern.match(text)
        if match:
            try:
                stamp = datetime.strptime(" ".join(match.group(1).split()), form)
            except ValueError:
                return None
            if form == "%b %d %H:%M:%S":
                stated = match.group(2)
                stamp = stamp.replace(year=int(stated) if stated else year)
            epoch = local_epoch(pd.Timestamp(stamp), tz)
            return None if epoch != epoch else epoch
    return leading_iso_stamp(text, tz, within=35)


def line_stamp(line: str, year: int, tz: str | None) -> float | None:
    """The time a line of any log says it was written, or None: an engine's, an ISO, a kernel log's or
    glog's stamp near its start (after whatever prefix a container, a pod or a rank put there)."""
    text = line.strip()
    found = (
        engine_stamp(text, year, tz) or kernel_stamp(text, year, tz) or leading_iso_stamp(text, tz, within=80)
    )
    if found is not None:
        return found
    glog = _GLOG.match(text)
    if glog:
        month, day, clock = glog.groups()
        epoch = local_epoch(f"{year}-{month}-{day}T{clock}", tz)
        return None if epoch != epoch else epoch
    return None
