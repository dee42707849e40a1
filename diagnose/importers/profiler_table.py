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
(:mod:`~diagnose.importers.profiler_layouts`), and a warning says so. So are
the rows under a header a paste hard-wrapped: only a header that names every
column of its rule says which column is which. A row keeps only the figures a
paste left whole (a time cut short has lost its unit; a count is whole where
the line shows it ends), and each table's rows take the footer under it, or,
where the paste cut it, the total their own ``Self CPU %`` give.

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

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled
from diagnose.importers.dash_rules import RULE, cells, column_ends, column_starts
from diagnose.importers.line_streams import Stream, are_the_paste, streams, text_lines
from diagnose.importers.profiler_layouts import (
    FOOTER,
    SELF_HOST_PCT,
    Column,
    column_of,
    field_of,
    fragments,
    headers,
    microseconds,
    value,
)
from diagnose.units import counted

_HEADER_WORDS = re.compile(r"\bName\b.*(?:Self CPU|CPU total|# of Calls|Number of Calls)")
_RUNTIME = re.compile(r"^(?:cuda|cu|hip|hsa)[A-Z]\w*$")


class ProfilerTableImporter(Importer):
    name = "pytorch-profiler-table"
    description = (
        "PyTorch profiler summaries: prof.key_averages().table() as printed, any version and columns"
    )

    def recognise(self, head: str) -> Claim | None:
        split = streams(head.splitlines())
        for stream in split:
            for index in range(len(stream.lines)):
                if _header_at(stream.lines, index):
                    return claim(Strength.DOCUMENT, filled(stream.lines[index:]))
        bare = [fragment for stream in split for fragment in fragments(stream, set())]
        rows, used = sum(len(f.rows) for f in bare), sum(len(f.lines) for f in bare)
        return claim(Strength.SHAPE, used) if are_the_paste(head, rows, used) else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows: list[dict[str, object]] = []
        tables = 0
        for stream in streams(text_lines(source.text, source.ends_open)):
            read, count = _stream_rows(stream, result.warnings)
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
    """Whether a table starts at ``index``: a rule, then a header in torch's words."""
    return (
        bool(RULE.match(lines[index]))
        and index + 1 < len(lines)
        and bool(_HEADER_WORDS.search(lines[index + 1]))
    )


def _whole_header_at(lines: tuple[str, ...], index: int) -> bool:
    """Whether the header at ``index`` names each column of its rule. A header the paste hard-wrapped
    names fewer, or ends in a word cut short: which column is which is unknown, and its rows are read
    as rows without a header."""
    if not _header_at(lines, index):
        return False
    header = lines[index + 1]
    titles = cells(header, column_starts(lines[index]))
    whole = column_of(titles[-1]) is not None or len(header.rstrip()) >= column_ends(lines[index])[-1]
    return all(titles) and whole


def _stream_rows(stream: Stream, warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """One writer's rows, from its tables and from rows pasted without their header, each with its own
    footer's total where it was printed under it; and how many tables gave rows."""
    lines = stream.lines
    rows: list[dict[str, object]] = []
    taken: set[int] = set()
    tables = 0
    index = 0
    while index < len(lines):
        if not _whole_header_at(lines, index):
            index += 1
            continue
        read, end = _table(stream, index, warnings)
        taken.update(range(index, end))
        rows.extend(_totalled(read, lines, end))
        tables += bool(read)
        index = end
    for fragment in fragments(stream, taken):
        warnings.append(
            f"{counted(len(fragment.rows), 'profiler row')} without the table's header: their columns are"
            f" taken from torch's documented layout ({headers(fragment.layout)})"
        )
        read = [{**row, "kind": _kind(row)} for row in fragment.rows]
        rows.extend(_totalled(read, lines, fragment.lines.stop))
        tables += 1
    return rows, tables


def _totalled(rows: list[dict[str, object]], lines: tuple[str, ...], end: int) -> list[dict[str, object]]:
    """The rows with the host's self time in all, from the footer torch prints under their table's
    closing rule (``end`` is where the table stopped): another table's footer is not theirs. Where the
    paste cut the footer, the rows' own "Self CPU %" say it: a row's self time over its share of the
    table's, taken from the row with the largest share (the fewest digits lost to rounding)."""
    at = end + bool(end < len(lines) and RULE.match(lines[end]))
    totals: dict[str, float | None] = {}
    while at < len(lines) and (found := FOOTER.search(lines[at])):
        totals[found.group(1)] = microseconds(found.group(2))
        at += 1
    total = totals.get("CPU")
    if total is None:
        shares = [
            (pct, host)
            for row in rows
            if isinstance(pct := row.get(SELF_HOST_PCT), float) and pct >= 1.0
            if isinstance(host := row.get("self_host_us"), float)
        ]
        if shares:
            pct, host = max(shares)
            total = host * 100 / pct
    kept = [{k: v for k, v in row.items() if k != SELF_HOST_PCT} for row in rows]
    return kept if total is None else [{**row, "table_self_host_us": total} for row in kept]


def _table(stream: Stream, start: int, warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """The rows of the table whose first rule is at ``start``; returns them and where reading stopped.
    A row the paste cut keeps the figures it has whole: a time cut short lost its unit, a count is whole
    where it reaches its column's end (right-aligned) or its line ends where torch ended it."""
    lines = stream.lines
    starts, ends = column_starts(lines[start]), column_ends(lines[start])
    titles = cells(lines[start + 1], starts)
    columns, shapes = [field_of(title) for title in titles], [column_of(title) for title in titles]
    calls_at = columns.index("calls") if "calls" in columns else None

    def is_row(text: str) -> bool:
        found = dict(zip(columns, cells(text, starts), strict=False))
        figures = (value(c, t) for c, t in found.items() if c not in (None, "name"))
        return bool(found.get("name")) and any(figure is not None for figure in figures)

    def follows_a_row(text: str) -> bool:
        return bool(RULE.match(text) or FOOTER.search(text)) or is_row(text)

    index = start + 2
    if index < len(lines) and RULE.match(lines[index]):
        index += 1
    rows: list[dict[str, object]] = []
    places: list[int] = []  # each row's line
    bad = cut = 0
    while index < len(lines) and not RULE.match(lines[index]):
        line, at = lines[index], index
        if FOOTER.search(line):  # its closing rule lost (glued to the row above): the footer ends it
            break
        index += 1
        if not line.strip():
            break
        texts = cells(line, starts)
        if _misfit(shapes, texts):
            bad += 1
            continue
        row: dict[str, object] = {}
        for column, text in zip(columns, texts, strict=False):
            if column is not None:
                row[column] = text if column == "name" else value(column, text)
        if not row.get("name") or all(row.get(c) is None for c in row if c != "name"):
            bad += 1
            continue
        kind = _kind(row)
        if kind is None:  # cut before its device time, and its host time does not say
            cut += 1
            continue
        row["kind"] = kind
        rows.append(row)
        places.append(at)
    uncounted = 0
    for row, at in zip(rows, places, strict=True):
        texts = cells(lines[at], starts)
        if calls_at is None or any(texts[calls_at + 1 :]):
            continue  # no count, or one that does not end its line: a cut cannot have shortened it
        if len(lines[at].rstrip()) < ends[calls_at]:  # the count ends its line, short of its column's end
            if not stream.ends_where_written(at, follows_a_row):
                row["calls"] = None
                uncounted += 1
    if index < len(lines) and RULE.match(lines[index]):
        index += 1
    if bad:
        warnings.append(f"{counted(bad, 'row')} of a profiler table without figures skipped")
    if cut:
        warnings.append(f"{counted(cut, 'row')} of a profiler table cut before its device time left out")
    if uncounted:
        warnings.append(f"{counted(uncounted, 'call count')} left unknown: a paste may have cut its line")
    return rows, index


def _misfit(shapes: list[Column | None], texts: list[str]) -> bool:
    """Whether cells before a line's last are out of their columns' shapes: the rest of a row a paste
    hard-wrapped, its cells under other columns. The last may be cut short or carry a glued line: it is
    read only where it fits."""
    last = max((at for at, text in enumerate(texts) if text), default=0)
    return any(c and t and not c.shape.fullmatch(t) for c, t in zip(shapes[:last], texts, strict=False))


def _kind(row: dict[str, object]) -> str | None:
    """What a row is, by its name, else by where its time went; None where the device time a row of its
    table prints was cut off and its host time does not settle it."""
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
    if isinstance(host, float) and host > 0:
        return "operator"
    if isinstance(device, float):
        return "kernel" if device > 0 else "operator"
    return None if "self_device_us" in row else "operator"
