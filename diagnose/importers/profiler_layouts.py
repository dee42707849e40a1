"""The columns of ``key_averages().table()`` as PyTorch's ``_build_table`` decides them: one table of
columns, read by their header where the header was pasted and by the shape of their cells where it was not.

``_build_table`` (torch/autograd/profiler_util.py; profiler.py before torch 1.8) prints, in this order:

| group | columns | printed when |
|---|---|---|
| name | Name | always |
| overload | Overload Name | ``group_by_overload_name`` |
| host | Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg | always |
| device | Self CUDA, Self CUDA %, CUDA total, CUDA time avg (or XPU, MPS, ...) | device time profiled |
| memory | CPU Mem, Self CPU Mem, then CUDA Mem, Self CUDA Mem if device memory | ``profile_memory`` |
| calls | # of Calls | always |
| node | Node ID | a distributed (RPC) profile |
| shapes | Input Shapes | ``group_by_input_shape`` |
| flops | Total FLOPs (KFLOPs, ... PFLOPs) | ``with_flops`` |
| stack | Source Location | ``group_by_stack_n`` |

torch 1.0-1.6 named the host columns ``Self CPU total %``, ``Self CPU total``, ..., had device
columns ``CUDA total %``, ``CUDA total``, ``CUDA time avg`` (no self device time) and counted in
``Number of Calls``. Cells are two spaces apart at least: percentages ``12.34%`` (``NaN`` where the
total is 0), times ``1.234ms`` (``s``, ``ms``, ``us``), memory ``-631.96 MB`` (``Kb``, ``Mb`` in 1.6),
calls and node ids as integers, FLOPs as ``%8.3f`` or ``--``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, product

from diagnose.importers.dash_rules import RULE
from diagnose.importers.line_streams import Stream

_DEVICE = r"(?:cuda|xpu|device|mps|hpu|mtia|privateuse1)"
_TIME = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_CELLS = re.compile(r"\s{2,}")
# The footer torch prints under a table's closing rule: each device's self time in all.
FOOTER = re.compile(r"Self (CPU|CUDA|XPU|Device|MPS|HPU|MTIA|PrivateUse1) time total:\s*(\S+)")


@dataclass(frozen=True, eq=False)
class Column:
    """A column: its header as printed for CUDA, the header in any device's words (and any FLOPs
    scale), how its cells are written, and the ``op_summary`` column it fills."""

    title: str
    header: re.Pattern[str]
    shape: re.Pattern[str]
    field: str | None = None


def _column(title: str, shape: str, field: str | None = None) -> Column:
    header = re.escape(title).replace(re.escape("{D}"), _DEVICE).replace("FLOPs", "[KMGTP]?FLOPs")
    return Column(title.replace("{D}", "CUDA"), re.compile(header, re.IGNORECASE), re.compile(shape), field)


# A row's self host time as a share of the table's (what gives the table's total where its footer was
# cut): read to compute it, never written into op_summary.
SELF_HOST_PCT = "self_host_pct"
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")
_PCT, _TIMED, _MEM = (
    r"\d+(?:\.\d+)?%|NaN|0",
    r"-?\d+(?:\.\d+)?(?:ns|us|µs|ms|s)",
    r"-?\d+(?:\.\d+)? [KMGT]?[Bb]",
)
_TEXT = r"\S.*"
_NAME = _column("Name", _TEXT, "name")
_OVERLOAD = _column("Overload Name", _TEXT)
_HOST = (
    _column("Self CPU %", _PCT, SELF_HOST_PCT),
    _column("Self CPU", _TIMED, "self_host_us"),
    _column("CPU total %", _PCT),
    _column("CPU total", _TIMED, "host_total_us"),
    _column("CPU time avg", _TIMED),
)
_DEVICE_TIME = (
    _column("Self {D}", _TIMED, "self_device_us"),
    _column("Self {D} %", _PCT),
    _column("{D} total", _TIMED, "device_total_us"),
    _column("{D} time avg", _TIMED),
)
_MEMORY = (_column("CPU Mem", _MEM), _column("Self CPU Mem", _MEM))
_DEVICE_MEMORY = (_column("{D} Mem", _MEM), _column("Self {D} Mem", _MEM))
_CALLS = _column("# of Calls", r"\d+", "calls")
_NODE = _column("Node ID", r"-?\d+")
_SHAPES = _column("Input Shapes", r"\[.*")
_FLOPS = _column("Total FLOPs", r"--|-?\d+\.\d{3}")
_SOURCE = _column("Source Location", _TEXT)
_OLD_HOST = (
    _column("Self CPU total %", _PCT, SELF_HOST_PCT),
    _column("Self CPU total", _TIMED, "self_host_us"),
    *_HOST[2:],
)
_OLD_DEVICE = (
    _column("{D} total %", _PCT),
    _column("{D} total", _TIMED, "device_total_us"),
    _column("{D} time avg", _TIMED),
)
_OLD_CALLS = _column("Number of Calls", r"\d+", "calls")
_COUNTS = (_CALLS, _OLD_CALLS)  # every beginning of a count is a count: "20" cut short is "2"
_TEXTS = (_OVERLOAD, _SOURCE)  # left empty on the rows that have none: their cells may be missing

# Each slot's choices, in print order; the rows print the FLOPs before the source location.
_GRAMMARS = (
    (
        ((_NAME,),),
        ((), (_OVERLOAD,)),
        (_HOST,),
        ((), _DEVICE_TIME),
        ((), _MEMORY, _MEMORY + _DEVICE_MEMORY),
        ((_CALLS,),),
        ((), (_NODE,)),
        ((), (_SHAPES,)),
        ((), (_FLOPS,)),
        ((), (_SOURCE,)),
    ),
    (
        ((_NAME,),),
        (_OLD_HOST,),
        ((), _OLD_DEVICE),
        ((), _MEMORY, _MEMORY + _DEVICE_MEMORY),
        ((_OLD_CALLS,),),
        ((), (_NODE,)),
        ((), (_SHAPES,)),
    ),
)
# Every documented layout: those with fewer optional columns first, then those whose cells say more
# (a FLOPs cell "--" is read as FLOPs before it is read as a source location).
LAYOUTS: tuple[tuple[Column, ...], ...] = tuple(
    sorted(
        (tuple(chain.from_iterable(choice)) for grammar in _GRAMMARS for choice in product(*grammar)),
        key=lambda layout: (len(layout), sum(column in _TEXTS for column in layout)),
    )
)
_ALL = tuple(dict.fromkeys(chain.from_iterable(LAYOUTS)))
# Each layout as a row may print it: whole, or without the text columns its row left empty.
_VARIANTS = {
    layout: tuple(dict.fromkeys([layout, tuple(c for c in layout if c not in _TEXTS)])) for layout in LAYOUTS
}
_SHORTEST = min(len(variant) for variants in _VARIANTS.values() for variant in variants)


@dataclass(frozen=True)
class Fragment:
    """Rows printed without their header, read by the layout that fits them all."""

    rows: tuple[dict[str, object], ...]
    layout: tuple[Column, ...]
    lines: range  # where they are in their stream


def column_of(header: str) -> Column | None:
    """The column a header names, in any torch version's words."""
    return next((c for c in _ALL if c.header.fullmatch(header.strip())), None)


def field_of(header: str) -> str | None:
    """The ``op_summary`` column a header names."""
    column = column_of(header)
    return column.field if column else None


def value(field: str, text: str) -> float | None:
    if field == "calls":
        return float(text) if text.isdigit() else None
    if field == SELF_HOST_PCT:
        match = _PERCENT.fullmatch(text.strip())
        return float(match.group(1)) if match else None
    return microseconds(text)


def microseconds(text: str) -> float | None:
    match = _TIME.match(text.strip())
    return float(match.group(1)) * _UNIT_US[match.group(2)] if match else None


def headers(layout: Sequence[Column]) -> str:
    """A layout's columns, as torch prints them for CUDA."""
    return ", ".join(column.title for column in layout)


def fragments(stream: Stream, taken: set[int]) -> Iterator[Fragment]:
    """Runs of a stream's lines outside ``taken`` whose cells a documented layout reads, each by the
    first layout that fits every row of the run (the last line may end in a row the paste cut). A row
    that ends its line with its count, where the line may have been cut, is read without the count."""
    lines = stream.lines
    index = 0
    while index < len(lines):
        end = index
        while end < len(lines) and end not in taken and _fits_any(_cells(lines[end])):
            end += 1
        if end == index:
            index += 1
            continue
        run = [_cells(line) for line in lines[index:end]]
        layout = next((layout for layout in LAYOUTS if _reads(run, layout)), None)
        if layout is not None:
            rows: list[dict[str, object]] = []
            for at, cells in enumerate(run, index):
                read, left = _rows(cells, layout)
                last, columns = read[-1]
                ends_on_count = not left and columns[-1] in _COUNTS
                if ends_on_count and not stream.ends_where_written(at, _follows_a_row):
                    last["calls"] = None
                rows.extend(row for row, _ in read)
            yield Fragment(tuple(rows), layout, range(index, end))
        index = end


def _follows_a_row(line: str) -> bool:
    """Whether a line is one torch prints after a row: a row, the closing rule, the footer."""
    return bool(RULE.match(line) or FOOTER.search(line)) or _fits_any(_cells(line))


def _cells(line: str) -> list[str]:
    return _CELLS.split(line.strip()) if "%" in line or "NaN" in line else []


def _fits_any(cells: list[str]) -> bool:
    return len(cells) >= _SHORTEST and any(_rows(cells, layout)[0] for layout in LAYOUTS)


def _reads(run: list[list[str]], layout: tuple[Column, ...]) -> bool:
    for number, cells in enumerate(run, 1):
        rows, left = _rows(cells, layout)
        if not rows or (left and number < len(run)):
            return False
    return True


def _rows(
    cells: list[str], layout: tuple[Column, ...]
) -> tuple[list[tuple[dict[str, object], tuple[Column, ...]]], list[str]]:
    """The rows a line's cells hold in ``layout``, each with the columns it printed (two rows where a
    paste joined their lines), and the cells left over: the start of a row the paste cut."""
    rows: list[tuple[dict[str, object], tuple[Column, ...]]] = []
    while cells:
        columns = next((c for c in _VARIANTS[layout] if _fit(cells[: len(c)], c)), None)
        if columns is None:
            break
        rows.append((_row(cells[: len(columns)], columns), columns))
        cells = cells[len(columns) :]
    return rows, cells


def _fit(cells: list[str], columns: tuple[Column, ...]) -> bool:
    return len(cells) == len(columns) and all(
        c.shape.fullmatch(t) for c, t in zip(columns, cells, strict=True)
    )


def _row(cells: list[str], columns: tuple[Column, ...]) -> dict[str, object]:
    row: dict[str, object] = {}
    for column, text in zip(columns, cells, strict=True):
        if column.field is not None:
            row[column.field] = text if column.field == "name" else value(column.field, text)
    return row
