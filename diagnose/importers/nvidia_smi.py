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
from collections.abc import Iterable
from itertools import islice

import numpy as np
import pandas as pd

from diagnose.importers.base import (
    Claim,
    Imported,
    Importer,
    Source,
    Strength,
    claim,
    data_lines,
    local_epoch,
    local_epochs,
    zone_note,
)
from diagnose.units import counted

_UNIT = re.compile(r"^(.*?)\s*\[([^\]]+)\]\s*$")
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*([A-Za-z%]*)\s*$")
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
    """A header's fields (unit brackets removed) and its data rows as lists of strings."""

    def __init__(self, lines: list[str], stamp: float | None = None) -> None:
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
        self.stamp = stamp  # a time written above the table, for rows without a timestamp field


# --query-compute-apps's fields as its header names them (nvidia-smi --help-query-compute-apps): a field
# asked by its other name is headed by its first ("name" by process_name, "used_memory" by
# used_gpu_memory, though older drivers wrote used_memory).
_APPS_FIELDS = frozenset(
    {
        "timestamp",
        "gpu_name",
        "gpu_bus_id",
        "gpu_serial",
        "gpu_uuid",
        "pid",
        "process_name",
        "used_gpu_memory",
        "used_memory",
    }
)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_COMMAND = re.compile(r"^\s*(?:[$#>%]|PS |\[|\S+@\S+|C:\\)|nvidia-smi|kubectl")


def header_kind(line: str) -> str | None:
    """``"gpu"`` for a --query-gpu header, ``"apps"`` for --query-compute-apps, else None.

    A pasted command line (``$ nvidia-smi --query-gpu=index,memory.used ...``) names the
    same fields with commas: it is a command, not a header.
    """
    if "," not in line or _COMMAND.search(line):
        return None
    fields = [_UNIT.sub(r"\1", part).strip().lower() for part in line.split(",")]
    if "pid" in fields and ("used_gpu_memory" in fields or "used_memory" in fields):
        return "apps"
    if set(fields) <= _APPS_FIELDS and {"pid", "process_name"} & set(fields):
        return "apps"  # any other set of its fields that names processes (gpu_uuid, process_name)
    if "pid" not in fields and any(field.startswith(_KNOWN) for field in fields):
        return "gpu"
    return None


def csv_blocks(lines: Iterable[str], tz: str | None) -> tuple[list[tuple[str, _Table]], int]:
    """Every header-and-rows block in pasted text, and how many other lines were passed over.

    People paste the command above the output, a banner, notes between two runs,
    or a --query-gpu and a --query-compute-apps table one after the other.
    """
    blocks: list[tuple[str, _Table]] = []
    skipped, stamp = 0, None
    block: list[str] = []  # the open block's header and rows
    block_kind, block_stamp = "", None
    for line in data_lines(lines):
        if block:
            if "," in line and header_kind(line) is None and not _COMMAND.search(line):
                block.append(line)
                continue
            blocks.append((block_kind, _Table(block, block_stamp)))
            block = []
        kind = header_kind(line)
        if kind is None:
            found = _ISO.search(line)
            epoch = local_epoch(found.group(0), tz) if found else float("nan")
            stamp = epoch if epoch == epoch else stamp
            skipped += 1
            continue
        block, block_kind, block_stamp = [line], kind, stamp
    if block:
        blocks.append((block_kind, _Table(block, block_stamp)))
    return blocks, skipped


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

    def recognise(self, head: str) -> Claim | None:
        return _csv_claim(head) if _first_kind(head) == "gpu" else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        return _read_blocks(source, tz)


class NvidiaSmiComputeAppsImporter(Importer):
    name = "nvidia-smi-compute-apps"
    description = "nvidia-smi --query-compute-apps=... --format=csv (per-process GPU memory)"

    def recognise(self, head: str) -> Claim | None:
        return _csv_claim(head) if _first_kind(head) == "apps" else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        return _read_blocks(source, tz)


def _csv_claim(head: str) -> Claim | None:
    """A header naming the query's fields is the output's own: its claim counts the lines with fields."""
    return claim(Strength.DOCUMENT, sum(1 for line in data_lines(head.splitlines()) if "," in line))


def _first_kind(head: str) -> str | None:
    first = islice(data_lines(head.splitlines()), 30)
    return next((kind for line in first if (kind := header_kind(line))), None)


def _read_blocks(source: Source, tz: str | None) -> Imported:
    """Both kinds of table, as many blocks as the file holds; GPUs named by index, bus id or UUID."""
    result = Imported()
    blocks, skipped = csv_blocks(source.lines(), tz)
    if skipped:
        result.warnings.append(f"passed over {counted(skipped, 'line')} outside the tables (a prompt, notes)")
    identity: dict[str, int] = {}
    gpus, apps = [], []
    for kind, table in blocks:
        if not table.rows:
            continue
        if kind == "gpu":
            gpus.append(_gpu_frame(table, source.mtime, result, tz, identity))
        else:
            apps.append(_apps_frame(table, source.mtime, result, tz, identity))
        if table.malformed:
            shown = ", ".join(map(str, table.malformed[:3])) + (" ..." if len(table.malformed) > 3 else "")
            result.warnings.append(
                f"skipped {counted(len(table.malformed), 'row')} with the wrong number of fields "
                f"(data row {shown})"
            )
    for name, frames in (("gpu", gpus), ("gpu_processes", apps)):
        if frames:
            frame = pd.concat(frames, ignore_index=True)
            result.tables[name] = frame.dropna(subset=["ts"]).reset_index(drop=True)
    return result


def _gpu_frame(table: _Table, mtime: float, result: Imported, tz: str | None, identity: dict) -> pd.DataFrame:
    columns: dict[str, list] = {}
    for position, (field, unit) in enumerate(zip(table.fields, table.units, strict=True)):
        if field in _GPU_FIELDS:
            column, kind = _GPU_FIELDS[field]
            # nvidia-smi's documented unit where the header has none (a header put back from the
            # command line of a noheader loop): memory in MiB (nvidia-smi --help-query-gpu)
            unit = unit or (kind if kind in _BYTES else None)
            columns[column] = [_value(row[position], unit, kind) for row in table.rows]
    frame = pd.DataFrame(columns, index=range(len(table.rows)))
    frame["ts"] = _row_times(table, mtime, result, tz)
    names = _column(table, "pci.bus_id") or _column(table, "uuid")
    if "gpu" in frame.columns:
        frame["gpu"] = pd.to_numeric(frame["gpu"], errors="coerce")
        if names is not None:
            identity.update({name: int(g) for name, g in zip(names, frame["gpu"], strict=True) if g == g})
    elif names is not None:
        order = {name: identity.setdefault(name, len(identity)) for name in dict.fromkeys(names)}
        frame["gpu"] = [order[name] for name in names]
    else:
        frame["gpu"] = frame.groupby("ts").cumcount()
    return frame


def _apps_frame(
    table: _Table, mtime: float, result: Imported, tz: str | None, identity: dict
) -> pd.DataFrame:
    pids = _column(table, "pid")
    frame = pd.DataFrame(
        {
            "pid": pd.to_numeric(pd.Series(pids), errors="coerce") if pids is not None else np.nan,
            "name": _column(table, "process_name") or _column(table, "name"),
        },
        index=range(len(table.rows)),
    )
    memory_field = next((f for f in ("used_gpu_memory", "used_memory") if f in table.fields), None)
    if memory_field is not None:
        unit = table.units[table.fields.index(memory_field)]
        frame["mem_used_bytes"] = [_value(v, unit or "mib", None) for v in _column(table, memory_field) or []]
    names = _column(table, "gpu_bus_id") or _column(table, "gpu_uuid")
    if names is not None:
        frame["gpu"] = [identity.setdefault(name, len(identity)) for name in names]
    else:
        frame["gpu"] = 0
    frame["ts"] = _row_times(table, mtime, result, tz)
    if pids is not None:
        return frame.dropna(subset=["pid"])
    return _without_pids(frame, result)


def _without_pids(frame: pd.DataFrame, result: Imported) -> pd.DataFrame:
    """Processes listed without their pid (not asked for). The table tells a GPU's processes apart by
    pid: without it, a GPU's processes at one time are one row, their names joined (memory summed)."""
    columns = {"name": ("name", lambda names: "; ".join(dict.fromkeys(names.dropna())) or None)}
    if "mem_used_bytes" in frame.columns:
        columns["mem_used_bytes"] = ("mem_used_bytes", lambda used: used.sum(min_count=1))
    rows = frame.groupby(["ts", "gpu"], sort=False, as_index=False).agg(**columns)
    listed = counted(len(frame), "process", "processes")
    result.warnings.append(
        f"no pid field: each GPU's processes at one time are one row ({listed} as "
        f"{counted(len(rows), 'row')}; the table tells processes apart by pid)"
    )
    return rows.assign(pid=np.nan)


def _row_times(table: _Table, mtime: float, result: Imported, tz: str | None) -> np.ndarray:
    """Each row's time from its ``timestamp`` field, else the file's modification time (with a warning)."""
    stamps = _column(table, "timestamp")
    if stamps is None and table.stamp is not None:
        return np.full(len(table.rows), table.stamp)
    if stamps is None:
        note = "no timestamp field: every row is taken at the file's modification time"
        if note not in result.warnings:
            result.warnings.append(note)
        return np.full(len(table.rows), mtime)
    if zone_note("nvidia-smi timestamps", tz) not in result.warnings:
        result.warnings.append(zone_note("nvidia-smi timestamps", tz))
    return _timestamps(stamps, tz)


def _column(table: _Table, field: str) -> list[str] | None:
    if field not in table.fields:
        return None
    position = table.fields.index(field)
    return [row[position].strip() for row in table.rows]
