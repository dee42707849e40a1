"""``vmstat`` as pasted (procps) -> the ``system`` table.

vmstat prints a header of two lines, the groups (``procs -----memory----- ---swap-- ...``) and the
columns (``r b swpd free buff cache si so bi bo in cs us sy id wa st``, ``gu`` since procps 4, ``inact
active`` for ``buff cache`` with ``-a``), then a row every delay; ``-t`` adds the time at each row's end
(a ``timestamp`` group), and wrappers such as ExaWatcher put one first. Columns are read by the header's
names, whichever of these it has. As procps's manual says, the first row after the command starts is
the averages since boot, not a sample: it is left out (the header's first appearance; a header
repeated every screen does not start the command again).

| vmstat | system column |
|---|---|
| r (runnable: running or waiting for a CPU) | procs_running |
| si, so (swapped in, out per second, KiB) | swap_in_per_s, swap_out_per_s (bytes) |
| swpd (swap used, KiB) | swap_used_bytes |
| bi, bo (blocks of 1 KiB per second) | disk_read_bytes_per_s, disk_write_bytes_per_s |
| cs (context switches per second) | ctx_switches_per_s |
| 100 - id - wa (time not idle nor waiting on I/O, as psutil counts it) | cpu_pct |
| sy | cpu_system_pct |

With ``-t`` the header names the timestamps' zone, used where ``--tz`` does not say one. Units are
vmstat's default (``-S k``: KiB); a paste whose command line sets ``-S m`` or ``-S M`` is read
in those. A row's time is its own (``-t``, or a wrapper's clock on the file's date), else the rows are
the command line's delay apart (``vmstat 5``), else one second apart (said), the last at the file's
modification time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import chain
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, header_claim, local_epoch, zone_note
from diagnose.units import counted

_COLUMNS_LINE = re.compile(
    r"^\s*(?:\S+\s+)?r\s+b\s+swpd\s+free\s+(?:buff\s+cache|inact\s+active)\s+si\s+so\s+bi\s+bo\s+in\s+cs"
    r"\s+us\s+sy\s+id\b"
)
_COMMAND = re.compile(r"\bvmstat\b(?P<options>(?:\s+-[A-Za-z]+(?:\s+[kKmM])?)*)(?:\s+(?P<delay>\d+))?")
_UNIT = re.compile(r"-\w*S\s*([kKmM])")
_UNITS = {"k": 1000, "K": 1024, "m": 10**6, "M": 2**20}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CLOCK = re.compile(r"\d{2}:\d{2}:\d{2}")
_KIB = 1024
_KNOWN = frozenset("r b swpd free buff cache inact active si so bi bo in cs us sy id wa st gu".split())


class VmstatImporter(Importer):
    name = "vmstat"
    description = "`vmstat` as printed (procps): run queue, swap traffic, disk, context switches, CPU"

    def recognise(self, head: str) -> Claim | None:
        return header_claim(head, _COLUMNS_LINE.match)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        names: list[str] | None = None
        unit, delay, headers = _KIB, None, 0
        zone: str | None = None
        samples: list[tuple[str | None, list[float]]] = []
        skip_next = False
        for line in chain(source.commands, source.lines()):  # the command, typed after a prompt or bare
            if (command := _COMMAND.search(line)) and names is None:
                unit = _UNITS.get(m.group(1), _KIB) if (m := _UNIT.search(command.group("options"))) else _KIB
                delay = float(command.group("delay")) if command.group("delay") else None
            if _COLUMNS_LINE.match(line):
                tokens = line.split()
                names = [name for name in tokens[tokens.index("r") :] if name in _KNOWN]
                zone = tokens[-1] if tokens[-1] not in _KNOWN else zone  # -t's zone over its timestamps
                headers += 1
                skip_next = headers == 1  # the command's first row: averages since boot
                continue
            if names is None:
                continue
            parsed = _row(line, len(names))
            if parsed is None:
                continue
            if skip_next:
                skip_next = False
                continue
            samples.append(parsed)
        if not samples or names is None:
            return result
        frame = pd.DataFrame([values for _, values in samples], columns=names)
        rows = _system(frame, unit)
        stamps = [stamp for stamp, _ in samples]
        rows.insert(0, "ts", _times(stamps, delay, source.mtime, tz or _zone(zone), result.warnings))
        if headers:
            result.warnings.append("left out the first row: vmstat's averages since boot, not a sample")
        if unit != _KIB:
            result.warnings.append(f"memory and swap read in units of {unit} bytes (the command line's -S)")
        result.tables["system"] = rows
        return result


def _zone(name: str | None) -> str | None:
    """The zone ``vmstat -t`` names above its timestamps, where the zone database knows it."""
    if not name:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name


def _row(line: str, width: int) -> tuple[str | None, list[float]] | None:
    """A data row's numbers, and its time where the row says one (a leading clock, a trailing date and
    clock); None for anything else."""
    tokens = line.split()
    stamp_tokens = [t for t in tokens if _DATE.fullmatch(t) or _CLOCK.fullmatch(t)]
    numbers = [t for t in tokens if t not in stamp_tokens]
    if len(numbers) != width or not all(t.isdigit() for t in numbers):
        return None
    return (" ".join(stamp_tokens) or None), [float(t) for t in numbers]


def _system(frame: pd.DataFrame, unit: int) -> pd.DataFrame:
    rows = pd.DataFrame(index=frame.index)
    rows["procs_running"] = frame["r"]
    rows["swap_in_per_s"] = frame["si"] * unit
    rows["swap_out_per_s"] = frame["so"] * unit
    rows["swap_used_bytes"] = frame["swpd"] * unit
    rows["disk_read_bytes_per_s"] = frame["bi"] * _KIB  # blocks of 1 KiB, whatever -S says
    rows["disk_write_bytes_per_s"] = frame["bo"] * _KIB
    rows["ctx_switches_per_s"] = frame["cs"]
    waiting = frame["wa"] if "wa" in frame.columns else 0.0
    rows["cpu_pct"] = (100.0 - frame["id"] - waiting).clip(lower=0.0)
    rows["cpu_system_pct"] = frame["sy"]
    return rows


def _times(
    stamps: list[str | None], delay: float | None, mtime: float, tz: str | None, warnings: list[str]
) -> list[float]:
    """Each row's time: its own stamp, else the delay apart, the last at the file's modification time."""
    given = [stamp for stamp in stamps if stamp]
    if len(given) == len(stamps):
        day = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d")
        times = [local_epoch(s if _DATE.search(s) else f"{day} {s}", tz) for s in given]
        warnings.append(zone_note("vmstat times", tz))
        return times
    step = delay if delay else 1.0
    if not delay:
        warnings.append(
            f"{counted(len(stamps), 'row')} without a time and no command line with vmstat's delay: "
            "taken one second apart, the last at the file's modification time"
        )
    return [mtime - step * (len(stamps) - 1 - n) for n in range(len(stamps))]
