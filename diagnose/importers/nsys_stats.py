"""Nsight Systems summaries as pasted: ``nsys stats`` reports, text or CSV -> the ``op_summary`` table.

Every release's summary reports share one grammar: a header naming ``Total
Time`` with its unit (``Total Time (ns)``), a count column and a name column,
then (in text) a rule of dash groups that gives the columns, then rows; CSV
(``--format csv``) has the same header with commas. Which report it is comes
from its columns, not its title, which pastes often lose:

| count column | report | rows are |
|---|---|---|
| Instances | cuda_gpu_kern_sum (gpukernsum) | kernels ("[CUDA memcpy ...]" rows: copies) |
| Num Calls | cuda_api_sum (cudaapisum), osrt_sum | runtime calls (cuda…, cu…, hip…), OS calls |
| Count, Operations | cuda_gpu_mem_time_sum (gpumemtimesum) | copies and memsets |

Numbers may carry thousands separators. Kernel and copy time is the GPU's
(``self_device_us``); an API call's is the host's (``self_host_us``).
"""

from __future__ import annotations

import csv
import io
import re

import pandas as pd

from diagnose.importers.base import Imported, Importer, Source
from diagnose.importers.dash_rules import RULE, cells, column_starts

_HEADER = re.compile(r"Time\s*\(%\).*Total Time\s*\((ns|us|ms|s)\)", re.IGNORECASE)
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_COUNTS = {
    "instances": "kernel",
    "num calls": "runtime",
    "count": "memory",
    "operations": "memory",
    "calls": "runtime",
}
_RUNTIME = re.compile(r"^(?:cuda|cu|hip|hsa|nccl)[A-Z]\w*")


class NsysStatsImporter(Importer):
    name = "nsys-stats"
    description = (
        "Nsight Systems summaries: nsys stats reports (kernels, CUDA API, memory operations), text or CSV"
    )
    example = (
        " Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Name"
    )

    def recognise(self, head: str) -> bool:
        return any(_HEADER.search(line) and _count_column(_split_header(line)) for line in head.splitlines())

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        lines = source.text.splitlines()
        rows: list[dict[str, object]] = []
        reports = 0
        index = 0
        while index < len(lines):
            unit = _HEADER.search(lines[index])
            if unit is None or not _count_column(_split_header(lines[index])):
                index += 1
                continue
            read, index = _report(lines, index, unit.group(1).lower())
            rows.extend(read)
            reports += 1
        if rows:
            result.tables["op_summary"] = pd.DataFrame(rows)
        if reports > 1:
            result.warnings.append(f"{reports} nsys reports in the file: their rows are read together")
        return result


def _split_header(line: str) -> list[str]:
    if "," in line:
        return [cell.strip() for cell in next(csv.reader([line]))]
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


def _count_column(cells: list[str]) -> str | None:
    return next((cell.lower() for cell in cells if cell.lower() in _COUNTS), None)


def _report(lines: list[str], start: int, unit: str) -> tuple[list[dict[str, object]], int]:
    header = lines[start]
    is_csv = "," in header and not RULE.match(lines[start + 1] if start + 1 < len(lines) else "")
    cells = _split_header(header)
    lowered = [cell.lower() for cell in cells]
    count_name = _count_column(cells)
    name_at = next((i for i, c in enumerate(lowered) if c in ("name", "operation")), len(cells) - 1)
    total_at = next(i for i, c in enumerate(lowered) if c.startswith("total time"))
    count_at = lowered.index(count_name) if count_name else None
    report_kind = _COUNTS.get(count_name or "", "kernel")
    index = start + 1
    starts = None
    if not is_csv and index < len(lines) and RULE.match(lines[index]):
        starts = column_starts(lines[index])
        index += 1
    rows: list[dict[str, object]] = []
    while index < len(lines):
        line = lines[index]
        if not line.strip() or _HEADER.search(line):
            break
        index += 1
        values = _cells(line, starts, is_csv)
        if values is None or len(values) <= max(name_at, total_at):
            continue
        total, count = _number(values[total_at]), _number(values[count_at]) if count_at is not None else None
        name = values[name_at]
        if total is None or not name:
            continue
        kind = _kind(report_kind, name)
        time_column = "self_host_us" if kind in ("runtime", "os") else "self_device_us"
        rows.append({"name": name, "kind": kind, "calls": count, time_column: total * _UNIT_US[unit]})
    return rows, index


def _cells(line: str, starts: list[int] | None, is_csv: bool) -> list[str] | None:
    if is_csv:
        try:
            return [cell.strip() for cell in next(csv.reader(io.StringIO(line)))]
        except (csv.Error, StopIteration):
            return None
    if starts:
        return cells(line, starts)
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _kind(report_kind: str, name: str) -> str:
    lowered = name.lower()
    if "memcpy" in lowered and name.startswith("["):
        return "memcpy"
    if "memset" in lowered and name.startswith("["):
        return "memset"
    if report_kind == "runtime":
        return "runtime" if _RUNTIME.match(name) else "os"
    return "kernel" if report_kind == "kernel" else "memcpy"
