"""``nvidia-smi dmon`` and ``pmon`` output (any column set, with or without ``-o DT``).

| dmon column | gpu column | pmon column | gpu_processes column |
|---|---|---|---|
| gpu | gpu | gpu, pid | gpu, pid |
| sm | util_pct | command | name |
| mem | mem_bw_util_pct | fb (MB) | mem_used_bytes |
| pwr | power_w | sm, mem | sm_pct, mem_pct |
| gtemp / temp | temp_c | | |
| pclk | sm_clock_mhz | | |
| fb (MB) | mem_used_bytes | | |
| rxpci / txpci (MB/s) | pcie_rx/tx_bytes_per_s | | |

``-`` means not available. With ``-o DT`` each row has its local date and
time (read as UTC, with a warning). Without it the rows carry no time: the
samples are taken as one second apart (dmon's default) and ending at the
file's modification time, with a warning.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, local_epoch, zone_note

MIB = 2**20
_DMON = {
    "sm": ("util_pct", 1.0),
    "mem": ("mem_bw_util_pct", 1.0),
    "pwr": ("power_w", 1.0),
    "gtemp": ("temp_c", 1.0),
    "temp": ("temp_c", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
    "fb": ("mem_used_bytes", MIB),
    "rxpci": ("pcie_rx_bytes_per_s", MIB),
    "txpci": ("pcie_tx_bytes_per_s", MIB),
}
_PMON = {"sm": ("sm_pct", 1.0), "mem": ("mem_pct", 1.0), "fb": ("mem_used_bytes", MIB)}


# What a column's field looks like; every other column holds a figure or "-". A row is a run of
# fields of these shapes, so two rows glued on one line are two rows, and a row with a field of the
# wrong shape (cut, or run into the next) is no row.
_SHAPES = {
    "gpu": r"\d+",
    "pid": r"\d+|-",
    "type": r"[A-Z](?:\+[A-Z])*|-",
    "date": r"\d{8}",
    "time": r"\d\d:\d\d:\d\d",
}
_FIGURE = r"-?\d+(?:\.\d+)?|-"
_FREE_TEXT = "command"  # pmon's last column: a process name, spaces and all, cut at 16 characters


@dataclass(frozen=True)
class _Table:
    columns: list[str]
    rows: list[list[str]]
    on_last_line: int  # how many of the rows were read from the text's last line


def _row_pattern(columns: list[str]) -> re.Pattern[str]:
    """One row, from where the match starts: its fields, and a free-text last column up to where the
    next row starts on the same line (lines glued together) or the line ends."""
    typed = [column for column in columns if column != _FREE_TEXT]
    fields = r"\s+".join(f"({_SHAPES.get(column, _FIGURE)})" for column in typed)
    if columns[-1] != _FREE_TEXT:
        return re.compile(rf"\s*{fields}(?=\s|$)")
    untyped = r"\s+".join(f"(?:{_SHAPES.get(column, _FIGURE)})" for column in typed)
    return re.compile(rf"\s*{fields}\s+(\S.*?)\s*(?=\s{untyped}\s+\S|$)")


def _header(lines: Iterable[str]) -> _Table | None:
    """The column names (from the first ``# ... gpu ...`` line) and the data rows; a line is read
    only where it is rows end to end."""
    columns: list[str] | None = None
    pattern: re.Pattern[str] | None = None
    rows: list[list[str]] = []
    on_last_line = 0
    for line in lines:
        stripped = line.strip()
        on_last_line = 0
        if stripped.startswith("#"):
            names = stripped.lstrip("#").split()
            if columns is None and "gpu" in [n.lower() for n in names]:
                columns = [n.lower() for n in names]
                pattern = _row_pattern(columns)
            continue
        if pattern is None or not stripped:
            continue
        found, at = [], 0
        while at < len(stripped) and (match := pattern.match(stripped, at)) is not None:
            found.append(list(match.groups()))
            at = match.end()
        on_last_line = len(found) if at == len(stripped) else 0
        rows += found if at == len(stripped) else []
    return _Table(columns, rows, on_last_line) if columns else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _MonitorImporter(Importer):
    table = ""
    mapping: dict[str, tuple[str, float]] = {}

    def recognise(self, head: str) -> Claim | None:
        parsed = _header(head.splitlines())
        if parsed is None or len(parsed.columns) < 4 or not self._columns_fit(set(parsed.columns)):
            return None
        return claim(Strength.DOCUMENT, 1 + len(parsed.rows))  # its "# gpu ..." header, then its rows

    @abstractmethod
    def _columns_fit(self, columns: set[str]) -> bool:
        """Whether the header's columns are this monitor's."""

    def read(self, source: Source, tz: str | None = None) -> Imported:
        table = _header(source.lines())
        result = Imported()
        if table is None or not table.rows:
            return result
        columns = table.columns
        records = []
        for parts in table.rows:
            values = dict(zip(columns, parts, strict=True))
            record: dict[str, float | None] = {"gpu": int(values["gpu"]) if values["gpu"].isdigit() else None}
            for column, (target, scale) in self.mapping.items():
                if column in values and (number := _number(values[column])) is not None:
                    record[target] = number * scale
            self._extra(values, record)
            if "date" in values and "time" in values:
                record["ts"] = local_epoch(f"{values['date']} {values['time']}", tz)
            records.append(record)
        if source.ends_open and table.on_last_line:  # a paste cut there may have cut the last field
            for record in records[-table.on_last_line :]:
                self._forget_last_field(columns[-1], record, records)
        frame = pd.DataFrame(records)
        if "ts" in frame.columns:
            result.warnings.append(zone_note("nvidia-smi monitor times", tz))
        else:
            frame["ts"] = stamps_by_round(frame["gpu"], source.mtime)
            result.warnings.append(
                "no times in the rows (run it with -o DT): samples taken as 1 s apart, "
                "ending at the file's modification time"
            )
        result.tables[self.table] = frame
        return result

    def _extra(self, values: dict[str, str], record: dict) -> None:
        pass

    def _forget_last_field(self, column: str, record: dict, records: list[dict]) -> None:
        if column in self.mapping:
            record.pop(self.mapping[column][0], None)


def stamps_by_round(gpus: Iterable[int], end: float, step: float = 1.0) -> list[float]:
    """Times for rows printed without any, ``step`` seconds a sample, the last at ``end``: a new sample
    starts whenever a GPU comes round again."""
    sample, seen, samples = 0, set[int](), []
    for gpu in gpus:
        if gpu in seen:
            sample, seen = sample + 1, set()
        seen.add(int(gpu))
        samples.append(sample)
    return [end - (samples[-1] - s) * step for s in samples]


class DmonImporter(_MonitorImporter):
    name = "nvidia-smi-dmon"
    description = "nvidia-smi dmon (per-GPU monitor; any -s column set, with or without -o DT)"
    table = "gpu"
    mapping = _DMON

    def _columns_fit(self, columns: set[str]) -> bool:
        """Any -s column set: some figure dmon alone prints per GPU, and no pid (that is pmon)."""
        return "pid" not in columns and bool(columns & {"pwr", "sm", "fb", "pclk", "mclk", "gtemp", "bar1"})


class PmonImporter(_MonitorImporter):
    name = "nvidia-smi-pmon"
    description = "nvidia-smi pmon (per-process monitor; with or without -o DT)"
    table = "gpu_processes"
    mapping = _PMON

    def _columns_fit(self, columns: set[str]) -> bool:
        return "pid" in columns

    def _extra(self, values: dict[str, str], record: dict) -> None:
        record["pid"] = int(values["pid"]) if values.get("pid", "").isdigit() else None
        record["name"] = (values.get("command") or "").strip() or None
        record["type"] = values.get("type")

    def _forget_last_field(self, column: str, record: dict, records: list[dict]) -> None:
        """A cut name is the pid's name elsewhere in the file that starts with it, or none."""
        if column != _FREE_TEXT:
            super()._forget_last_field(column, record, records)
            return
        cut = record.get("name") or ""
        names = {
            other.get("name") or ""
            for other in records
            if other is not record and other["pid"] == record["pid"]
        }
        record["name"] = next((name for name in sorted(names) if cut and name.startswith(cut)), None)
