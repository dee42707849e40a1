"""``iostat`` as pasted (sysstat) -> the ``system`` table.

Its layout is iostat.c's: a banner (sysstat_clock.py), then a report an interval: an ``avg-cpu:`` line
of names with the figures under it, and a ``Device`` header (``Device:`` before sysstat 11.5) with a row
per device. With ``-t`` each report starts with its time (``%x %X`` in the locale, ``%FT%T%z`` with
``S_TIME_FORMAT=ISO``); without it, reports are the command line's interval apart (1 s where none is
pasted), the last at the file's modification time. The first report of a run is the averages since
boot: where the paste starts at the run's start (its banner or its command), it is left out, said.

- ``avg-cpu``: ``cpu_pct`` (100 - %idle - %iowait: busy, as the recorder and vmstat count it) and
  ``cpu_system_pct`` (%system, which iostat counts with the interrupts);
- a device's read and written bytes a second by the header's names: ``kB_read/s``/``kB_wrtn/s``,
  ``MB_...``, ``Blk_...`` (512-byte blocks) in the basic report; ``rkB/s``/``wkB/s``, ``rMB/s``/``wMB/s``,
  and ``rsec/s``/``wsec/s`` before 11.5 in the extended one (``-x``); summed over the devices but those
  stacked on others (``dm-*``, ``md*``) and loop devices, which would count the same bytes twice:
  ``disk_read_bytes_per_s``, ``disk_write_bytes_per_s``.

sysstat's kB are KiB.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import chain

import pandas as pd

from diagnose.importers.base import (
    Claim,
    Imported,
    Importer,
    Source,
    Strength,
    claim,
    filled,
    local_epoch,
    zone_note,
)
from diagnose.importers.sysstat_clock import RowClock, clock, date_of, figure

_CPU = re.compile(r"^\s*avg-cpu:\s+(?P<names>%user.*%idle)\s*$")
_DEVICES = re.compile(r"^\s*Device:?\s+(?P<names>\S.*?)\s*$")
_ISO_STAMP = re.compile(r"^\s*(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{4})\s*$")
_LOCAL_STAMP = re.compile(
    r"^\s*(?P<date>\d{2,4}[/.-]\d{2}[/.-]\d{2,4})\s+(?P<clock>\d{1,2}:\d{2}:\d{2}(?:\s*[AP]M)?)\s*$"
)
_COMMAND = re.compile(
    r"\biostat\b(?P<options>(?:\s+-[A-Za-z]+)*)(?:\s+\S+)*?(?:\s+(?P<interval>\d+)(?:\s+\d+)?)?\s*$"
)
_STACKED = re.compile(r"^(?:dm-\d+|md\d+|loop\d+)$")
_READ = {
    "kB_read/s": 1024.0,
    "MB_read/s": 2.0**20,
    "Blk_read/s": 512.0,
    "rkB/s": 1024.0,
    "rMB/s": 2.0**20,
    "rsec/s": 512.0,
}
_WRITTEN = {
    "kB_wrtn/s": 1024.0,
    "MB_wrtn/s": 2.0**20,
    "Blk_wrtn/s": 512.0,
    "wkB/s": 1024.0,
    "wMB/s": 2.0**20,
    "wsec/s": 512.0,
}


class IostatImporter(Importer):
    name = "iostat"
    description = "`iostat` (sysstat): CPU busy and system shares, and disk read and write bytes a second"

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for at, line in enumerate(lines):
            if _CPU.match(line) or (_DEVICES.match(line) and _names_a_rate(line)):
                return claim(Strength.DOCUMENT, filled(lines[at:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows_clock = RowClock(datetime.fromtimestamp(source.mtime, UTC).date())
        reports: list[_Report] = []
        interval: float | None = None
        from_start = False  # the paste starts where the run did: its first report is since boot
        cpu_names: list[str] | None = None  # the avg-cpu names whose figures are on the next line
        devices: list[str] | None = None  # the Device header's names, while its rows go on
        stamped = False
        for raw in chain(source.commands, source.lines()):
            line = raw.strip()
            if not reports and (command := _COMMAND.search(line)) is not None:
                interval = float(command["interval"]) if command["interval"] else None
                from_start = True
            elif rows_clock.banner(line):
                from_start = from_start or not reports
            elif not line:
                devices = None
            elif (when := _stamp(line, tz)) is not None:
                reports.append(_Report(when))
                stamped, devices = True, None
            elif (cpu := _CPU.match(line)) is not None:
                cpu_names, devices = cpu["names"].split(), None
            elif cpu_names is not None:
                _report(reports, "cpu").cpu(cpu_names, line.split())
                cpu_names = None
            elif (header := _DEVICES.match(line)) is not None and _names_a_rate(line):
                devices = header["names"].split()
                _report(reports, "disk")
            elif devices is not None and reports:
                reports[-1].device(devices, line.split())
        rows = [report.row for report in reports if report.row]
        if not rows:
            return result
        if from_start and len(rows) > 1:
            rows = rows[1:]
            result.warnings.append("left out the first report: iostat's averages since boot, not a sample")
        if stamped:
            result.warnings.append(zone_note("iostat's -t times", tz))
        else:
            step = interval or 1.0
            for back, row in enumerate(reversed(rows)):
                row["ts"] = source.mtime - back * step
            why = "the command's interval" if interval else "no command line gave its interval"
            result.warnings.append(
                f"iostat without -t prints no times: reports taken {step:g} s apart ({why}), the last at the "
                "file's modification time"
            )
        result.tables["system"] = pd.DataFrame(rows).dropna(subset=["ts"]).reset_index(drop=True)
        return result


class _Report:
    """One interval's report: its time (with -t), its CPU figures and its devices' bytes."""

    def __init__(self, ts: float | None = None) -> None:
        self.row: dict[str, float] = {} if ts is None else {"ts": ts}
        self.parts: set[str] = set()

    def cpu(self, names: list[str], cells: list[str]) -> None:
        values = [figure(cell) for cell in cells]
        if len(values) != len(names) or any(v is None for v in values):
            return
        figures = dict(zip(names, values, strict=True))
        self.row["cpu_pct"] = 100.0 - (figures.get("%idle") or 0.0) - (figures.get("%iowait") or 0.0)
        if (system := figures.get("%system")) is not None:
            self.row["cpu_system_pct"] = system

    def device(self, names: list[str], cells: list[str]) -> None:
        if len(cells) != len(names) + 1 or _STACKED.match(cells[0]):
            return
        figures = dict(zip(names, (figure(cell) for cell in cells[1:]), strict=True))
        for units, column in ((_READ, "disk_read_bytes_per_s"), (_WRITTEN, "disk_write_bytes_per_s")):
            for name, unit in units.items():
                if (value := figures.get(name)) is not None:
                    self.row[column] = self.row.get(column, 0.0) + value * unit
                    break


def _report(reports: list[_Report], part: str) -> _Report:
    """The report a block of ``part`` (cpu, disk) belongs to: a new one where the last has it already."""
    if not reports or part in reports[-1].parts:
        reports.append(_Report())
    reports[-1].parts.add(part)
    return reports[-1]


def _names_a_rate(line: str) -> bool:
    names = set(line.split())
    return bool(names & (set(_READ) | set(_WRITTEN)) or {"tps", "r/s"} & names)


def _stamp(line: str, tz: str | None) -> float | None:
    """A report's -t time, in either of its layouts."""
    if (iso := _ISO_STAMP.match(line)) is not None:
        return datetime.strptime(iso.group(1), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    local = _LOCAL_STAMP.match(line)
    if local is None:
        return None
    day, when = date_of(local["date"]), clock(local["clock"])
    if day is None or when is None:
        return None
    return local_epoch(pd.Timestamp(datetime.combine(day, when)), tz)
