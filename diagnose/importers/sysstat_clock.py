"""The day and the clock sysstat's tools (pidstat, sar, mpstat, iostat) stamp their rows with, and
how they print a figure.

Each prints a banner first (``Linux 5.15.0 (host)  12/07/26  _x86_64_  (64 CPU)``: common.c's
print_gal_header) whose date is ``%x`` (MM/DD/YY in the C locale, ISO with ``S_TIME_FORMAT=ISO``),
then rows that start with the time of day as the locale prints it (``14:05:27``, ``02:05:27 PM``,
``14时05分27秒``). The rows' day is the banner's where it is there, else the file's, and moves on when
the clock passes midnight.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

_BANNER = re.compile(r"^Linux\s+\S+\s+\(([^)]*)\)\s+(\S+)(?:\s+_(\w+)_)?\s")
# A time as a locale prints it: hours, minutes and seconds with anything between, a meridiem after
_CLOCK = re.compile(r"(\d{1,2})\D{1,3}(\d{2})\D{1,3}(\d{2})\D*?(?:\s*(AM|PM|上午|下午))?\s*$", re.IGNORECASE)
_MERIDIEM = re.compile(r"^(?:AM|PM|上午|下午)\s+", re.IGNORECASE)


class RowClock:
    """The rows' times: the banner's day (or the file's), carried past midnight as the clock goes round."""

    def __init__(self, day: date) -> None:
        self.day = day
        self.dated = False  # whether a banner gave the day
        self.machine: str | None = None  # the banner's architecture: x86_64, aarch64, ...
        self._previous: datetime | None = None

    def banner(self, line: str) -> bool:
        """Read a banner line (True), or say the line is none."""
        found = _BANNER.match(line.strip() + " ")
        if found is None:
            return False
        if (stated := date_of(found.group(2))) is not None:
            self.day, self.dated, self._previous = stated, True, None
        self.machine = found.group(3)
        return True

    def restart(self, day: date) -> None:
        """Go back to ``day``: a report that starts over at the file's first time (sar -f prints its
        reports one after another, each over the whole file)."""
        self.day, self._previous = day, None

    def at(self, when: time) -> datetime:
        """The moment of a row stamped ``when``: a clock 12 hours behind the last row's is the next day."""
        stamp = datetime.combine(self.day, when)
        if self._previous is not None and stamp < self._previous - timedelta(hours=12):
            self.day += timedelta(days=1)
            stamp += timedelta(days=1)
        self._previous = stamp
        return stamp


def clock(text: str) -> time | None:
    """A row's time of day, or None where the row has none (``Average:``, in any language)."""
    meridiem = _MERIDIEM.match(text)  # some locales put it first: "下午 02时05分27秒"
    if meridiem:
        text = f"{text[meridiem.end() :]} {meridiem.group(0).strip()}"
    found = _CLOCK.search(text)
    if found is None or not text[:1].isdigit():
        return None
    hour, minute, second = int(found[1]), int(found[2]), int(found[3])
    if found[4] and found[4].upper() in ("PM", "下午") and hour < 12:
        hour += 12
    elif found[4] and found[4].upper() in ("AM", "上午") and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 60:
        return None
    return time(hour, minute, min(second, 59))


def date_of(text: str) -> date | None:
    """A date as sysstat prints it: ISO, or the C locale's %x (MM/DD/YY or MM/DD/YYYY)."""
    for layout in ("%Y-%m-%d", "%m/%d/%y", "%m/%d/%Y"):
        try:
            return datetime.strptime(text, layout).date()
        except ValueError:
            continue
    return None


def figure(text: str) -> float | None:
    """A figure as sysstat prints it, in a locale's decimal comma too (LC_NUMERIC), or None."""
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return None
