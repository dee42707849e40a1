"""``nvidia-smi --query-gpu ... --format=csv`` and ``--query-compute-apps`` output -> gpu tables.

Any field set and order; units in the header (``memory.used [MiB]``) or in
the values (``2856 MiB``); ``[N/A]`` and ``[Not Supported]`` become missing.
nvidia-smi prints local time without an offset: it is read as UTC, with a
warning. Without a header (``--format=csv,noheader``) the fields cannot be
told apart, so such a file is rejected with that reason.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from diagnose.importers.base import (
    Imported,
    Importer,
    data_lines,
    file_time,
    local_epochs,
    read_text,
    zone_note,
)

_UNIT = re.compile(r"^(.*?)\s*\[([^\]]+)\]\s*$")
_NUMBER = re.compile(r"^\s*(-?[0-9.]+(?:e[+-]?\d+)?)\s*([A-Za-z%]*)\s*$")
_MISSING = {
    "[n/a]",
    "n/a",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
    "",
}
_BYTES = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_GPU_FIELDS = {
    "index": ("gpu", None),
    "utilization.gpu": ("util_pct", None),
    "utilization.memory": ("mem_bw_util_pct", None),
    "memory.used": ("mem_used_bytes", "mib"),
    "memory.total": ("mem_total_bytes", "mib"),
    "clocks.sm": ("sm_clock_mhz", None),
    "clocks.current.sm": ("sm_clock_mhz", None),
    "clocks.max.sm": ("max_sm_clock_mhz", None),
    "clocks.max.streaming_multiprocessor": ("max_sm_clock_mhz", None),
    "power.draw": ("power_w", None),
    "power.draw.instant": ("power_w", None),
    "power.limit": ("power_limit_w", None),
    "enforced.power.limit": ("power_limit_w", None),
    "temperature.gpu": ("temp_c", None),
    "clocks_throttle_reasons.active": ("throttle_reasons", "hex"),
    "clocks_event_reasons.active": ("throttle_reasons", "hex"),
    "name": ("gpu_name", "text"),
}
_KNOWN = (
    "utilization.gpu",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "clocks.",
)


class _Table:
    """The header's fields (unit brackets removed) and the data rows as lists of strings."""

    def __init__(self, text: str) -> None:
        lines = data_lines(text)
        rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
        self.fields, self.units = [], []
        for name in rows[0] if rows else []:
            match = _UNIT.match(name.strip())
            self.fields.append((match.group(1) if match else name).strip().lower())
            self.units.append(match.group(2).strip().lower() if match else None)
        self.rows = [row for row in rows[1:] if len(row) == len(self.fields)]
        # Line numbers of rows with the wrong number of fields (counting the header as line 1 of the data).
        self.malformed = [
            number for number, row in enumerate(rows[1:], start=2) if len(row) != len(self.fields)
        ]


def _value(text: str, unit: str | None, kind: str | None) -> float | str | None:
    text = text.strip()
    if text.lower() in _MISSING:
        return None
    if kind == "text":
        return text
    if kind == "hex":
        try:
            return int(text, 16)
        except ValueError:
            return None
    match = _NUMBER.match(text)
    if not match:
        return None
    number = float(match.group(1))
    unit = (match.group(2) or unit or "").lower()
    return number * _BYTES[unit] if unit in _BYTES else number


def _timestamps(values: list[str], tz: str | None) -> np.ndarray:
    naive = pd.to_datetime(pd.Series(values).str.strip(), format="%Y/%m/%d %H:%M:%S.%f", errors="coerce")
    return local_epochs(naive, tz).to_numpy()


class NvidiaSmiQueryGpuImporter(Importer):
    name = "nvidia-smi-csv"
    description = "nvidia-smi --query-gpu=... --format=csv (any fields, with or without units)"
    example = "timestamp, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"

    def recognise(self, head: str) -> bool:
        lines = data_lines(head)
        if not lines or "," not in lines[0]:
            return False
        header = lines[0].lower()
        return "pid" not in header and any(field in header for field in _KNOWN)

    def read(self, path: Path, tz: str | None = None) -> Imported:
        table = _Table(read_text(path))
        result = Imported()
        columns: dict[str, list] = {}
        for position, (field, unit) in enumerate(zip(table.fields, table.units, strict=True)):
            if field in _GPU_FIELDS:
                column, kind = _GPU_FIELDS[field]
                columns[column] = [_value(row[position], unit, kind) for row in table.rows]
        if not table.rows:
            return result
        frame = pd.DataFrame(columns)
        frame["ts"] = _row_times(table, path, result, tz)
        if "gpu" not in frame.columns:
            identity = _column(table, "pci.bus_id") or _column(table, "uuid")
            if identity is not None:
                order = {bus: i for i, bus in enumerate(dict.fromkeys(identity))}
                frame["gpu"] = [order[bus] for bus in identity]
            else:
                frame["gpu"] = frame.groupby("ts").cumcount()
        if table.malformed:
            shown = ", ".join(map(str, table.malformed[:3])) + (" ..." if len(table.malformed) > 3 else "")
            result.warnings.append(
                f"skipped {len(table.malformed)} row(s) with the wrong number of fields (data row {shown})"
            )
        result.tables["gpu"] = frame.dropna(subset=["ts"]).reset_index(drop=True)
        return result


class NvidiaSmiComputeAppsImporter(Importer):
    name = "nvidia-smi-compute-apps"
    description = "nvidia-smi --query-compute-apps=... --format=csv (per-process GPU memory)"
    example = "timestamp, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]"

    def recognise(self, head: str) -> bool:
        lines = data_lines(head)
        header = lines[0].lower() if lines else ""
        return "pid" in header and ("used_gpu_memory" in header or "used_memory" in header) and "," in header

    def read(self, path: Path, tz: str | None = None) -> Imported:
        table = _Table(read_text(path))
        result = Imported()
        if not table.rows:
            return result  # a header alone: no compute process was running
        memory_field = "used_gpu_memory" if "used_gpu_memory" in table.fields else "used_memory"
        unit = table.units[table.fields.index(memory_field)]
        frame = pd.DataFrame(
            {
                "pid": [int(v) for v in _column(table, "pid")],
                "name": _column(table, "process_name") or _column(table, "name"),
                "mem_used_bytes": [_value(v, unit or "mib", None) for v in _column(table, memory_field)],
            }
        )
        bus = _column(table, "gpu_bus_id") or _column(table, "gpu_uuid")
        order = {b: i for i, b in enumerate(dict.fromkeys(bus))} if bus else {}
        frame["gpu"] = [order[b] for b in bus] if bus else 0
        frame["ts"] = _row_times(table, path, result, tz)
        result.tables["gpu_processes"] = frame.dropna(subset=["ts"]).reset_index(drop=True)
        return result


def _row_times(table: _Table, path: Path, result: Imported, tz: str | None) -> np.ndarray:
    """Each row's time from its ``timestamp`` field, else the file's modification time (with a warning)."""
    stamps = _column(table, "timestamp")
    if stamps is None:
        result.warnings.append("no timestamp field: every row is taken at the file's modification time")
        return np.full(len(table.rows), file_time(path))
    result.warnings.append(zone_note("nvidia-smi timestamps", tz))
    return _timestamps(stamps, tz)


def _column(table: _Table, field: str) -> list[str] | None:
    if field not in table.fields:
        return None
    position = table.fields.index(field)
    return [row[position].strip() for row in table.rows]
