"""Nsight Systems summaries as pasted: ``nsys stats`` reports, text or CSV -> the ``op_summary`` table.

Every release's time summaries share one grammar: a header naming ``Total
Time`` with its unit (``Total Time (ns)``), a count column and a name column,
then (in text) a rule of dash groups that gives the columns, then rows; CSV
(``--format csv``) has the same header with commas. Which report it is comes
from its columns, not its title, which pastes often lose:

| count column | report | rows are |
|---|---|---|
| Instances | cuda_gpu_kern_sum (gpukernsum) | kernels ("[CUDA memcpy ...]" rows: copies) |
| Instances, with Style / Range | nvtx_sum (nvtxsum) | NVTX ranges (``annotation``) |
| Num Calls | cuda_api_sum (cudaapisum), osrt_sum | runtime calls (cuda…, cu…, hip…), OS calls |
| Count, Operations | cuda_gpu_mem_time_sum (gpumemtimesum) | copies and memsets |

The report scripts print the columns in one order per release (:data:`_LAYOUTS`);
rows pasted without their header are read by the layout whose cells fit them
(a share with one decimal, whole nanoseconds, averages with one decimal) and
whose figures agree as a summary's must (minimum <= average <= maximum, total =
average x count), in nanoseconds (the reports' default unit), the report told
by the names (CUDA API calls, POSIX calls, ``[CUDA memcpy ...]``, or kernels);
a warning says so. A row is found by its run of figures, wherever the paste put
the line ends: in a report read by its header too, a name holding such a run is
two rows glued. A header that does not name its Name column was hard-wrapped:
its rows are read by the layouts, in its unit. The name ends the row, so a name
is read only where the text shows it whole (the padding nsys gives the column,
its ellipsis, the report's next row after it): a paste cut mid-name would give
another name. Numbers may carry thousands separators. Kernel and copy time is
the GPU's (``self_device_us``); an API call's is the host's (``self_host_us``).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled
from diagnose.importers.dash_rules import RULE, cells, column_ends, column_starts
from diagnose.importers.line_streams import Stream, are_the_paste, streams, text_lines
from diagnose.units import counted

_HEADER = re.compile(r"Time\s*\(%\).*Total Time\s*\((ns|us|ms|s)\)", re.IGNORECASE)
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_UNIT_WORDS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}
_COUNTS = {
    "instances": "kernel",
    "num calls": "runtime",
    "count": "memory",
    "operations": "memory",
    "calls": "runtime",
}
_RUNTIME = re.compile(r"^(?:cuda|cu|hip|hsa|nccl)[A-Z]\w*")
_MEMORY_OPERATION = re.compile(r"^\[(?:CUDA|HIP) mem(?:cpy|set)\b")
# The C library and POSIX calls an OS runtime trace (osrt_sum) covers, by family.
_OS_CALL = re.compile(
    r"^(?:pthread_\w+|sem_\w+|e?poll\w*|p?select|(?:p?read|p?write)v?(?:64)?|ioctl|(?:f|shm_)?open\w*"
    r"|f?close|fread|fwrite|fflush|f?sync|mmap\w*|munmap|mprotect|fcntl\w*|socket|connect|accept4?|bind"
    r"|listen|send\w*|recv\w*|(?:clock_)?nanosleep|u?sleep|fork|wait\w*|pipe2?|dup[23]?)$"
)
_INT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_DEC = _INT + r"\.\d"


@dataclass(frozen=True)
class _Column:
    """A column of a time summary: its role, its header's words in any release (lower case, unit
    dropped), how its cells are written."""

    role: str
    headers: tuple[str, ...]
    shape: str


_PCT = _Column("pct", ("time (%)", "time(%)"), r"\d{1,3}\.\d")
_TOTAL = _Column("total", ("total time",), _INT)
_COUNT = _Column("count", tuple(_COUNTS), _INT)
_AVG = _Column("avg", ("avg", "average"), _DEC)
_MED = _Column("med", ("med",), _DEC)
_MIN = _Column("min", ("min", "minimum"), _INT)
_MAX = _Column("max", ("max", "maximum"), _INT)
_STDDEV = _Column("stddev", ("stddev",), _DEC)
_STYLE = _Column("style", ("style",), r"PushPop|StartEnd")
_NAME = _Column("name", ("name", "operation", "range"), "")
# The reports' columns in the order the report scripts print them, newest release first (nvtx_sum's
# before the others': its Style would otherwise be read as the start of a name).
_LAYOUTS: tuple[tuple[_Column, ...], ...] = (
    (_PCT, _TOTAL, _COUNT, _AVG, _MED, _MIN, _MAX, _STDDEV, _STYLE, _NAME),  # nvtx_sum
    # 2022.1 on: cuda_api_sum, cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, osrt_sum
    (_PCT, _TOTAL, _COUNT, _AVG, _MED, _MIN, _MAX, _STDDEV, _NAME),
    (_PCT, _TOTAL, _COUNT, _AVG, _MIN, _MAX, _STDDEV, _NAME),  # 2021.2 to 2021.5: cudaapisum, ...
    (_PCT, _TOTAL, _COUNT, _AVG, _MIN, _MAX, _NAME),  # 2020 and 2021.1
)
# The columns' roles by their headers' words: the same table read the other way.
_ROLES = {header: column.role for layout in _LAYOUTS for column in layout for header in column.headers}
# A layout's run of figures (and NVTX style), where a row starts: the name is what follows it. A run
# starts after anything but a figure: a paste that joins full-width lines glues a row to a name's end.
_RUNS: dict[tuple[_Column, ...], re.Pattern[str]] = {
    layout: re.compile(
        r"(?<![\d.,])" + r"[ \t]+".join(f"({c.shape})" for c in layout if c is not _NAME) + r"(?=[ \t]|$)"
    )
    for layout in _LAYOUTS
}


@dataclass(frozen=True)
class _BareRow:
    """A row read without its header: its name, calls and total time (in its report's unit)."""

    name: str
    calls: float
    total: float


@dataclass(frozen=True)
class _Fragment:
    """Rows without their header, in one layout: the lines they took, whether nvtx_sum's."""

    rows: tuple[_BareRow, ...]
    lines: range
    nvtx: bool


class NsysStatsImporter(Importer):
    name = "nsys-stats"
    description = (
        "Nsight Systems summaries: nsys stats reports (kernels, CUDA API, memory operations), text or CSV"
    )

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for at, line in enumerate(lines):
            if _HEADER.search(line) and _count_column(_split_header(line)):
                return claim(Strength.DOCUMENT, filled(lines[at:]))
        bare = [f for stream in streams(lines) for f in _fragments(stream, set())]
        rows, used = sum(len(f.rows) for f in bare), sum(len(f.lines) for f in bare)
        return claim(Strength.SHAPE, used) if are_the_paste(head, rows, used) else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows: list[dict[str, object]] = []
        reports = 0
        for stream in streams(text_lines(source.text, source.ends_open)):
            read, count = _stream_rows(stream, result.warnings)
            rows.extend(read)
            reports += count
        if rows:
            result.tables["op_summary"] = pd.DataFrame(rows)
        if reports > 1:
            result.warnings.append(f"{reports} nsys reports in the file: their rows are read together")
        return result


def _stream_rows(stream: Stream, warnings: list[str]) -> tuple[list[dict[str, object]], int]:
    """One writer's rows, from its reports and from rows pasted without their header; and how many
    reports there were. A header that does not name its name and total columns was cut (hard-wrapped)
    or ran its cells together: its rows are read by the documented layouts, in the unit it states."""
    lines = stream.lines
    rows: list[dict[str, object]] = []
    taken: set[int] = set()
    cut_headers: dict[int, str] = {}  # where such a header stood, and its unit
    reports = 0
    index = 0
    while index < len(lines):
        unit = _HEADER.search(lines[index])
        header = _split_header(lines[index])
        if unit is None or not _count_column(header):
            index += 1
            continue
        if not {"name", "total"} <= {_role(cell) for cell in header}:
            cut_headers[index] = unit.group(1).lower()
            index += 1
            continue
        read, end = _report(stream, index, unit.group(1).lower())
        taken.update(range(index, end))
        rows.extend(read)
        reports += 1
        index = end
    for fragment in _fragments(stream, taken):
        above = [at for at in cut_headers if at < fragment.lines.start]
        stated = cut_headers[max(above)] if above else "ns"
        rows.extend(_bare_rows(fragment, stated))
        reports += 1
        warnings.append(
            f"{counted(len(fragment.rows), 'nsys stats row')} without the report's header: their columns"
            f" are taken from the report's documented layout, their times in {_UNIT_WORDS[stated]}"
            + (" (their header's unit: the paste cut the header)" if above else "")
        )
    return rows, reports


def _split_header(line: str) -> list[str]:
    if "," in line:
        return [cell.strip() for cell in next(csv.reader([line]))]
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


def _count_column(cells: list[str]) -> str | None:
    return next((cell.lower() for cell in cells if cell.lower() in _COUNTS), None)


def _role(header: str) -> str | None:
    return _ROLES.get(re.sub(r"\s*\((?:ns|us|ms|s)\)$", "", header.strip().lower()))


def _report(stream: Stream, start: int, unit: str) -> tuple[list[dict[str, object]], int]:
    lines = stream.lines
    header = lines[start]
    is_csv = "," in header and not RULE.match(lines[start + 1] if start + 1 < len(lines) else "")
    cells = _split_header(header)
    roles = [_role(cell) for cell in cells]
    count_name = _count_column(cells)
    name_at, total_at = roles.index("name"), roles.index("total")
    count_at = [cell.lower() for cell in cells].index(count_name) if count_name else None
    report_kind = "annotation" if "style" in roles else _COUNTS.get(count_name or "", "kernel")
    index = start + 1
    starts, rule_end = None, None  # the rule's columns; its end, where the widest name ends
    if not is_csv and index < len(lines) and RULE.match(lines[index]):
        starts, rule_end = column_starts(lines[index]), column_ends(lines[index])[-1]
        index += 1

    def follows_a_row(text: str) -> bool:
        values = _cells(text, starts, is_csv)
        is_row = values is not None and len(values) > total_at and _number(values[total_at]) is not None
        return bool(_HEADER.search(text)) or is_row

    rows: list[dict[str, object]] = []
    while index < len(lines):
        line, at = lines[index], index
        if not line.strip() or _HEADER.search(line):
            break
        index += 1
        values = _cells(line, starts, is_csv)
        if values is None or len(values) <= max(name_at, total_at):
            continue
        if is_csv and len(values) != len(cells):  # rows a paste joined: their cells ran together
            continue
        total, count = _number(values[total_at]), _number(values[count_at]) if count_at is not None else None
        name, glued = (values[name_at], []) if is_csv else _glued("  ".join(values[name_at:]))
        if total is None or not name:
            continue
        read = [(name, count, total), *((row.name, row.calls, row.total) for row in glued)]
        quoted = is_csv and line.endswith('"')  # its closing quote: the name ends there
        widest = not glued and rule_end is not None and len(line.rstrip()) >= rule_end  # fills its column
        if not (quoted or widest or _whole_name(stream, at, follows_a_row, read[-1][0])):
            read.pop()  # the name at the line's end may be cut short: another name
        rows.extend(summary_row(n, _kind(report_kind, n), k, t * _UNIT_US[unit]) for n, k, t in read)
    return rows, index


def _glued(text: str) -> tuple[str, list[_BareRow]]:
    """A name cell and the rows a paste glued after it: the next row starts where a documented layout's
    run of figures does (a name holds none)."""
    found = [(run.start(), layout) for layout in _LAYOUTS if (run := _RUNS[layout].search(text))]
    if not found:
        return text.strip(), []
    at, layout = min(found, key=lambda place: place[0])
    return text[:at].strip(), _bare(text[at:], layout)


def _whole_name(stream: Stream, at: int, follows_a_row: Callable[[str], bool], name: str) -> bool:
    """Whether the name that ends line ``at`` is whole: nsys cut it to its column with an ellipsis, or
    the line ends where nsys ended it (its padding kept, or a line end after it: a blank line, the
    report's next row or header)."""
    return name.endswith("…") or stream.ends_where_written(at, follows_a_row)


def summary_row(name: str, kind: str, calls: float | None, us: float) -> dict[str, object]:
    """A summary row: an API or OS call's time is the host's, an NVTX range's the range's, the rest
    (kernels, copies, memsets) the GPU's."""
    column = {"runtime": "self_host_us", "os": "self_host_us", "annotation": "host_total_us"}
    return {"name": name, "kind": kind, "calls": calls, column.get(kind, "self_device_us"): us}


def _fragments(stream: Stream, taken: set[int]) -> Iterator[_Fragment]:
    """Runs of a stream's lines outside ``taken`` made of rows in one documented layout; a row whose
    name ends a line the paste may have cut is left out."""
    lines = stream.lines
    index = 0
    while index < len(lines):
        layout = next((layout for layout in _LAYOUTS if _bare(lines[index], layout)), None)
        if index in taken or layout is None:
            index += 1
            continue
        rows: list[_BareRow] = []
        end = index
        while end < len(lines) and end not in taken and (read := _bare(lines[end], layout)):
            whole = _whole_name(stream, end, _follows_a_row, read[-1].name)
            rows.extend(read if whole else read[:-1])
            end += 1
        if rows:
            yield _Fragment(tuple(rows), range(index, end), _STYLE in layout)
        index = end


def _follows_a_row(line: str) -> bool:
    """Whether a line is one nsys prints after a row: a row, or the next report's header."""
    return bool(_HEADER.search(line)) or any(_bare(line, layout) for layout in _LAYOUTS)


def _bare(line: str, layout: tuple[_Column, ...]) -> list[_BareRow]:
    """The rows a line holds in ``layout`` (several where a paste joined their lines), each a row only
    where its figures agree as a summary's do; none unless the whole line is rows."""
    runs = list(_RUNS[layout].finditer(line))
    if not runs or line[: runs[0].start()].strip():
        return []
    roles = [column.role for column in layout if column is not _NAME]
    rows: list[_BareRow] = []
    for run, after in zip(runs, [*runs[1:], None], strict=True):
        figures = dict(zip(roles, run.groups(), strict=True))
        name = line[run.end() : after.start() if after else len(line)].strip()
        numbers = {role: _number(text) for role, text in figures.items() if role != "style"}
        calls, total = numbers["count"], numbers["total"]
        if not name or not _agrees(numbers) or calls is None or total is None:
            return []
        rows.append(_BareRow(name, calls, total))
    return rows


def _agrees(n: dict[str, float | None]) -> bool:
    """What a summary's figures must satisfy: a share of 100 at most, the average and median between
    the minimum and the maximum, the total the average times the count (the average has one decimal)."""
    known = {role: value for role, value in n.items() if value is not None}
    if len(known) < len(n):
        return False
    low, high, count = known["min"] - 0.05, known["max"] + 0.05, known["count"]
    between = all(low <= known[role] <= high for role in ("avg", "med") if role in known)
    total_fits = abs(known["total"] - known["avg"] * count) <= 0.05 * count + 1
    return known["pct"] <= 100 and count >= 1 and between and total_fits


def _bare_rows(fragment: _Fragment, unit: str) -> list[dict[str, object]]:
    """Rows without their report's header: the report told by what their names are."""
    names = [row.name for row in fragment.rows]
    report = "annotation" if fragment.nvtx else Counter(map(_report_of, names)).most_common(1)[0][0]
    return [
        summary_row(row.name, _kind(report, row.name), row.calls, row.total * _UNIT_US[unit])
        for row in fragment.rows
    ]


def _report_of(name: str) -> str:
    if _MEMORY_OPERATION.match(name):
        return "memory"
    return "runtime" if _RUNTIME.match(name) or _OS_CALL.match(name) else "kernel"


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
    if report_kind == "annotation":
        return "annotation"
    if report_kind == "runtime":
        return "runtime" if _RUNTIME.match(name) else "os"
    return "kernel" if report_kind == "kernel" else "memcpy"
