"""PyTorch profiler summaries as printed: ``prof.key_averages().table(...)`` -> the ``op_summary`` table.

The table's grammar, in every torch version since 1.0: a rule of dash groups
(``-----  -----``) gives the columns; the header under it names them; rows
follow until the next rule; a footer says ``Self CPU time total: 2.314ms``.
Columns are found by the dash groups, not by position, so any column set
reads (``sort_by``, ``row_limit``, memory and FLOP columns, ``group_by_input_shape``),
names right- or left-aligned, cut with ``...``. Several tables in one paste
are read one after another.

| header (any version) | op_summary column |
|---|---|
| Name | name |
| # of Calls, Number of Calls | calls |
| Self CPU, Self CPU total | self_host_us |
| CPU total | host_total_us |
| Self CUDA, Self XPU, Self Device (and any ``Self <device>``) | self_device_us |
| CUDA total, Device total (and any ``<device> total``) | device_total_us |

A row that ran only on the device (kernel names, ``Memcpy``, ``Memset``) is a
``kernel``, ``memcpy`` or ``memset``; a CUDA/HIP runtime or driver call is
``runtime``; ``ProfilerStep#N`` is an ``annotation``; the rest are
``operator``. A summary has no timeline: what needs one (the GPU's idle time,
what the host did meanwhile) is left unknown, and the report says so.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.importers.base import Imported, Importer, Source
from diagnose.importers.dash_rules import RULE, cells, column_starts
from diagnose.units import counted

_HEADER_WORDS = re.compile(r"\bName\b.*(?:Self CPU|CPU total|# of Calls|Number of Calls)")
_TIME = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_RUNTIME = re.compile(r"^(?:cuda|cu|hip|hsa)[A-Z]\w*$")
_TOTALS = re.compile(r"Self (CPU|CUDA|XPU|Device|MPS|HPU|MTIA|PrivateUse1) time total:\s*(\S+)")

_COLUMNS = {
    "name": "name",
    "# of calls": "calls",
    "number of calls": "calls",
    "self cpu": "self_host_us",
    "self cpu total": "self_host_us",
    "cpu total": "host_total_us",
}
_DEVICE_SELF = re.compile(r"^self (cuda|xpu|device|mps|hpu|mtia|privateuse1)$")
_DEVICE_TOTAL = re.compile(r"^(cuda|xpu|device|mps|hpu|mtia|privateuse1) total$")


class ProfilerTableImporter(Importer):
    name = "pytorch-profiler-table"
    description = (
        "PyTorch profiler summaries: prof.key_averages().table() as printed, any version and columns"
    )
    example = "Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA ..."

    def recognise(self, head: str) -> bool:
        lines = head.splitlines()
        return any(
            RULE.match(line) and index + 1 < len(lines) and _HEADER_WORDS.search(lines[index + 1])
            for index, line in enumerate(lines)
        )

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows: list[dict[str, object]] = []
        lines = source.text.splitlines()
        index, tables = 0, 0
        while index < len(lines):
            if RULE.match(lines[index]) and index + 1 < len(lines) and _HEADER_WORDS.search(lines[index + 1]):
                read, index = _table(lines, index, result.warnings)
                rows.extend(read)
                tables += 1
            else:
                index += 1
        totals = {m.group(1): _microseconds(m.group(2)) for m in _TOTALS.finditer(source.text)}
        if rows:
            frame = pd.DataFrame(rows)
            if totals.get("CPU") is not None:
                frame["table_self_host_us"] = totals["CPU"]  # the footer: all the host's self time
            result.tables["op_summary"] = frame
        if tables > 1:
            result.warnings.append(f"{tables} profiler tables in the file: their rows are read together")
        return result


def _table(lines: list[str], start: int, warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """The rows of the table whose first rule is at ``start``; returns them and where reading stopped."""
    starts = column_starts(lines[start])
    columns = [_column(name.lower()) for name in cells(lines[start + 1], starts)]
    index = start + 2
    if index < len(lines) and RULE.match(lines[index]):
        index += 1
    rows, bad = [], 0
    while index < len(lines) and not RULE.match(lines[index]):
        line = lines[index]
        index += 1
        if not line.strip():
            break
        row: dict[str, object] = {}
        for column, text in zip(columns, cells(line, starts), strict=False):
            if column is not None:
                row[column] = text if column == "name" else _value(column, text)
        if not row.get("name") or all(row.get(c) is None for c in row if c != "name"):
            bad += 1
            continue
        row["kind"] = _kind(row)
        rows.append(row)
    if index < len(lines) and RULE.match(lines[index]):
        index += 1
    if bad:
        warnings.append(f"{counted(bad, 'row')} of a profiler table without figures skipped")
    return rows, index


def _column(header: str) -> str | None:
    if header in _COLUMNS:
        return _COLUMNS[header]
    if _DEVICE_SELF.match(header):
        return "self_device_us"
    if _DEVICE_TOTAL.match(header):
        return "device_total_us"
    return None


def _value(column: str, text: str) -> float | None:
    if column == "calls":
        return float(text) if text.isdigit() else None
    return _microseconds(text)


def _microseconds(text: str) -> float | None:
    match = _TIME.match(text.strip())
    return float(match.group(1)) * _UNIT_US[match.group(2)] if match else None


def _kind(row: dict[str, object]) -> str:
    name = str(row["name"])
    if name.startswith("Memcpy"):
        return "memcpy"
    if name.startswith("Memset"):
        return "memset"
    if _RUNTIME.match(name.removesuffix("...")):
        return "runtime"
    if name.startswith("ProfilerStep#"):
        return "annotation"
    host, device = row.get("self_host_us"), row.get("self_device_us")
    if isinstance(device, float) and device > 0 and not (isinstance(host, float) and host > 0):
        return "kernel"
    return "operator"
