"""PyTorch profiler summaries as printed: ``prof.key_averages().table(...)`` -> the ``op_summary`` table.

The table's grammar, in every torch version since 1.0: a rule of dash groups
(``-----  -----``) gives the columns; the header under it names them; rows
follow until the next rule; a footer says ``Self CPU time total: 2.314ms``.
Columns are found by the dash groups, not by position, so any column set
reads (``sort_by``, ``row_limit``, memory and FLOP columns, ``group_by_input_shape``),
names right- or left-aligned, cut with ``...``. Several tables in one paste
are read one after another, each where it was printed: behind a logger's head or
a ``# `` on every line, one process's lines apart from another's
(:mod:`~diagnose.importers.line_streams`). Rows pasted without their header (a
paste that starts mid-table) are read by the columns torch's ``_build_table``
prints for some set of flags, where one such layout fits every row
(:mod:`~diagnose.importers.profiler_layouts`), and a warning says so.

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
from diagnose.importers.line_streams import are_the_paste, streams
from diagnose.importers.profiler_layouts import field_of, fragments, headers, microseconds, value
from diagnose.units import counted

_HEADER_WORDS = re.compile(r"\bName\b.*(?:Self CPU|CPU total|# of Calls|Number of Calls)")
_RUNTIME = re.compile(r"^(?:cuda|cu|hip|hsa)[A-Z]\w*$")
_TOTALS = re.compile(r"Self (CPU|CUDA|XPU|Device|MPS|HPU|MTIA|PrivateUse1) time total:\s*(\S+)")


class ProfilerTableImporter(Importer):
    name = "pytorch-profiler-table"
    description = (
        "PyTorch profiler summaries: prof.key_averages().table() as printed, any version and columns"
    )
    example = "Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA ..."

    def recognise(self, head: str) -> bool:
        split = streams(head.splitlines())
        if any(_header_at(stream.lines, index) for stream in split for index in range(len(stream.lines))):
            return True
        bare = [fragment for stream in split for fragment in fragments(stream.lines, set())]
        return are_the_paste(head, sum(len(f.rows) for f in bare), sum(len(f.lines) for f in bare))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows: list[dict[str, object]] = []
        tables = 0
        for stream in streams(source.text.splitlines()):
            read, count = _stream_rows(stream.lines, result.warnings)
            if read and stream.prefix:
                result.warnings.append(
                    f'profiler rows read behind the prefix "{stream.prefix}" on their lines'
                )
            rows.extend(read)
            tables += count
        if rows:
            result.tables["op_summary"] = pd.DataFrame(rows)
        if tables > 1:
            result.warnings.append(f"{tables} profiler tables in the file: their rows are read together")
        return result


def _header_at(lines: tuple[str, ...], index: int) -> bool:
    return (
        bool(RULE.match(lines[index]))
        and index + 1 < len(lines)
        and bool(_HEADER_WORDS.search(lines[index + 1]))
    )


def _stream_rows(lines: tuple[str, ...], warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """One writer's rows, from its tables and from rows pasted without their header, with the footer's
    total where it printed one; and how many tables gave rows."""
    rows: list[dict[str, object]] = []
    taken: set[int] = set()
    tables = 0
    index = 0
    while index < len(lines):
        if not _header_at(lines, index):
            index += 1
            continue
        read, end = _table(lines, index, warnings)
        taken.update(range(index, end))
        rows.extend(read)
        tables += bool(read)
        index = end
    for fragment in fragments(lines, taken):
        warnings.append(
            f"{counted(len(fragment.rows), 'profiler row')} without the table's header: their columns are"
            f" taken from torch's documented layout ({headers(fragment.layout)})"
        )
        rows.extend({**row, "kind": _kind(row)} for row in fragment.rows)
        tables += 1
    totals = {m.group(1): microseconds(m.group(2)) for m in _TOTALS.finditer("\n".join(lines))}
    if rows and totals.get("CPU") is not None:
        for row in rows:
            row["table_self_host_us"] = totals["CPU"]  # the footer: all the host's self time
    return rows, tables


def _table(lines: tuple[str, ...], start: int, warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """The rows of the table whose first rule is at ``start``; returns them and where reading stopped."""
    starts = column_starts(lines[start])
    columns = [field_of(name) for name in cells(lines[start + 1], starts)]
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
                row[column] = text if column == "name" else value(column, text)
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
