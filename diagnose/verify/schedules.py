"""The host's scheduled jobs and how often each runs: crontab lines and systemd timers, as text.

Only what a schedule says is read; nothing is run but ``crontab -l`` and
``systemctl list-timers`` (through the caller's runner). A crontab line's
period is read from its fields where they repeat evenly (``*/5 * * * *`` is
300 s, ``15 * * * *`` 3,600 s, ``0 3 * * *`` a day); one that runs at uneven
times has none, and is still matched by its command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_NICKNAMES = {
    "@hourly": 3600.0,
    "@daily": 86400.0,
    "@midnight": 86400.0,
    "@weekly": 7 * 86400.0,
    "@monthly": 30 * 86400.0,
    "@yearly": 365 * 86400.0,
    "@annually": 365 * 86400.0,
}
_ENVIRONMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*=")


@dataclass(frozen=True)
class Schedule:
    where: str  # the file or command it was read from
    text: str  # the line as written (the timer's unit)
    period_s: float | None  # how often it runs, where its fields say so
    command: str  # what it runs


def crontab_lines(text: str, where: str, system: bool) -> list[Schedule]:
    """Every job of a crontab; ``system``: /etc/crontab and /etc/cron.d carry a user before the command."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or _ENVIRONMENT.match(line):
            continue
        fields = line.split()
        if fields[0].startswith("@"):
            period = _NICKNAMES.get(fields[0].lower())
            rest = fields[1:]
        elif len(fields) >= 6:
            period = cron_period_s(fields[:5])
            rest = fields[5:]
        else:
            continue
        if system and rest:
            rest = rest[1:]  # the user the job runs as
        if rest:
            found.append(Schedule(where, line, period, " ".join(rest)))
    return found


def cron_period_s(fields: list[str]) -> float | None:
    """How often five cron fields fire, where they fire evenly; None otherwise (or for @reboot)."""
    minute, hour, day, month, weekday = fields
    if (day, month, weekday) != ("*", "*", "*"):
        return None if (month, weekday) != ("*", "*") or day != "*" else None
    minutes = _spacing(minute, 60)
    if hour == "*":
        return None if minutes is None else minutes * 60.0
    hours = _spacing(hour, 24)
    if hours is None or not minute.isdigit():
        return None
    return hours * 3600.0


def _spacing(field: str, span: int) -> int | None:
    """The even spacing of a cron field's values over ``span`` (``*``: 1, ``*/5``: 5, ``0,20,40``: 20,
    a single value: the whole span); None where the values are unevenly spaced."""
    if field == "*":
        return 1
    if m := re.fullmatch(r"\*/(\d+)", field):
        step = int(m.group(1))
        return step if step and span % step == 0 else None
    if field.isdigit():
        return span
    if re.fullmatch(r"\d+(,\d+)+", field):
        values = sorted(int(v) for v in field.split(","))
        gaps = {b - a for a, b in zip(values, values[1:], strict=False)} | {span - values[-1] + values[0]}
        return gaps.pop() if len(gaps) == 1 else None
    return None


_TIMER_STAMP = re.compile(r"\w{3} (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def systemd_timers(text: str) -> list[Schedule]:
    """``systemctl list-timers --all --no-pager``: each timer, its period the time from its last run to
    its next where both are shown."""
    found = []
    for line in text.splitlines():
        units = re.findall(r"(\S+\.timer)\s+(\S+)\s*$", line)
        if not units:
            continue
        timer, activates = units[0]
        stamps = [datetime.fromisoformat(s) for s in _TIMER_STAMP.findall(line)]
        period = (stamps[0] - stamps[1]).total_seconds() if len(stamps) == 2 else None
        found.append(
            Schedule("systemctl list-timers", timer, period if period and period > 0 else None, activates)
        )
    return found
