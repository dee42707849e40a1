"""guidellm's console tables as it prints them (0.4 and later) -> ``load_steps``, a benchmark a row.

Read as its writer prints them (vllm-project/guidellm: src/guidellm/benchmark/outputs/console.py builds
the columns, src/guidellm/utils/console.py draws them): each table after its title (``Request Latency
Statistics (Completed Requests)``, ``Server Throughput Statistics (All Requests)``), framed by ``|``
rows of ``=``, three header rows (a group, a name, a statistic: ``TTFT`` / ``ms`` / ``Mdn``), a row of
``-``, then a row a benchmark (its strategy first: ``synchronous``, ``concurrent``, ``throughput``,
``constant``, ``poisson``). A header cell that spans columns is printed once, the columns it spans left
empty in that row (each still between its own bars): an empty header cell belongs to the one before
it. Figures are ``{:.1f}``, ``--`` where there is none; the request latency is in seconds, the others in
ms. The tables list the same benchmarks in the same order: a benchmark's row in each is one run.

guidellm's ``synchronous`` strategy sends one request at a time (concurrency 1); the other strategies'
rates and limits are not in these tables.

Before 0.4 (neuralmagic/guidellm 0.2 and 0.3: src/guidellm/benchmark/output.py ``print_benchmarks_stats``
and ``print_table``) the run's figures are one table, ``Benchmarks Stats:``, drawn without outer bars:
a row of ``=``, a row of sections (``Metadata``, ``Request Stats``, ``Out Tok/sec``, ``Tot Tok/sec``,
``Req Latency (ms)`` (``(sec)`` from 0.3: its figures were always seconds), ``TTFT (ms)``, ``ITL (ms)``,
``TPOT (ms)``) each printed once with a bar for each further column it spans, a row of names
(``Benchmark``, ``Per Second``, ``Concurrency``, then ``mean``, ``median``, ``p99``), a row of ``-``
and ``|``, a row a benchmark (cells right-aligned, ``"| "`` between them), and a closing row of ``=``.
Its strategy says its load: ``synchronous`` (one at a time), ``concurrent@N`` (N streams),
``constant@R`` and ``poisson@R`` (R requests a second), ``throughput`` (as fast as it can).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled

_TITLES = ("Request Latency Statistics (Completed Requests)", "Server Throughput Statistics (All Requests)")
_STATS_TITLE = re.compile(r"^\s*Benchmarks Stats:\s*$")
_STATS_BORDER = re.compile(r"^=+$")
_STATS_COLUMNS: dict[tuple[str, str], tuple[str, float]] = {  # (section, name) -> column, and its scale
    ("Request Stats", "Per Second"): ("throughput_rps", 1.0),
    ("Request Stats", "Concurrency"): ("concurrency_mean", 1.0),
    ("Req Latency", "mean"): ("latency_avg_ms", 1000.0),  # seconds under either label
    ("Req Latency", "median"): ("latency_p50_ms", 1000.0),
    ("Req Latency", "p99"): ("latency_p99_ms", 1000.0),
    ("TTFT", "mean"): ("ttft_avg_ms", 1.0),
    ("TTFT", "median"): ("ttft_p50_ms", 1.0),
    ("TTFT", "p99"): ("ttft_p99_ms", 1.0),
    ("ITL", "mean"): ("itl_avg_ms", 1.0),
    ("ITL", "median"): ("itl_p50_ms", 1.0),
    ("ITL", "p99"): ("itl_p99_ms", 1.0),
    ("TPOT", "mean"): ("tpot_avg_ms", 1.0),
    ("TPOT", "median"): ("tpot_p50_ms", 1.0),
    ("TPOT", "p99"): ("tpot_p99_ms", 1.0),
}
_STRATEGY = re.compile(
    r"^(?P<kind>synchronous|throughput|concurrent|constant|poisson)(?:@(?P<value>[\d.]+))?$"
)
_DIVIDER = re.compile(r"^\|(?:[=-]*\|)+$")
_COLUMNS: dict[tuple[str, ...], tuple[str, float]] = {  # (group, name, statistic) -> column, and its scale
    ("Request Latency", "Sec", "Mdn"): ("latency_p50_ms", 1000.0),
    ("Request Latency", "Sec", "p95"): ("latency_p95_ms", 1000.0),
    ("TTFT", "ms", "Mdn"): ("ttft_p50_ms", 1.0),
    ("TTFT", "ms", "p95"): ("ttft_p95_ms", 1.0),
    ("ITL", "ms", "Mdn"): ("itl_p50_ms", 1.0),
    ("ITL", "ms", "p95"): ("itl_p95_ms", 1.0),
    ("TPOT", "ms", "Mdn"): ("tpot_p50_ms", 1.0),
    ("TPOT", "ms", "p95"): ("tpot_p95_ms", 1.0),
    ("Requests", "Concurrency", "Mean"): ("concurrency_mean", 1.0),
    ("Requests", "Per Sec", "Mean"): ("throughput_rps", 1.0),
}


class GuidellmImporter(Importer):
    name = "guidellm"
    description = "guidellm's latency and throughput tables: each benchmark's TTFT, ITL, TPOT and rate"

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for index, line in enumerate(lines):
            if any(title in line for title in _TITLES) and any(
                _DIVIDER.match(after.strip()) for after in lines[index + 1 : index + 3]
            ):
                return claim(Strength.DOCUMENT, filled(lines[index:]))
            if _STATS_TITLE.match(line) and any(
                _STATS_BORDER.match(after.strip()) for after in lines[index + 1 : index + 3]
            ):
                return claim(Strength.DOCUMENT, filled(lines[index:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        runs: list[dict[str, object]] = []
        lines = list(source.lines())
        for first_line, rows in [*_tables(lines), *_stats_tables(lines)]:
            for index, row in enumerate(rows):
                if index == len(runs):
                    runs.append({"tool": "guidellm", "line": float(first_line + index)})
                runs[index].update(row)
        runs = [run for run in runs if any(key.endswith("_ms") for key in run)]
        if runs:
            result.tables["load_steps"] = pd.DataFrame(runs)
        return result


def _tables(lines: list[str]) -> list[tuple[int, list[dict[str, object]]]]:
    """Each table under one of the titles: the line of its first benchmark, and a row a benchmark."""
    tables = []
    titles = [n for n, line in enumerate(lines) if any(title in line for title in _TITLES)]
    for at in titles:
        framed = []
        for number in range(at + 1, len(lines)):
            line = lines[number].strip()
            if not line.startswith("|"):
                break
            framed.append((number + 1, line))
        dividers = [i for i, (_, line) in enumerate(framed) if _DIVIDER.match(line)]
        if len(dividers) < 2:
            continue
        header = [_cells(line) for _, line in framed[dividers[0] + 1 : dividers[1]]]
        body = [
            (number, _cells(line)) for number, line in framed[dividers[1] + 1 :] if not _DIVIDER.match(line)
        ]
        keys = _column_keys(header)
        rows = [_row(keys, cells) for _, cells in body if len(cells) == len(keys)]
        if rows:
            tables.append((body[0][0], rows))
    return tables


def _stats_tables(lines: list[str]) -> list[tuple[int, list[dict[str, object]]]]:
    """0.2-0.3's ``Benchmarks Stats`` tables: the line of each one's first benchmark, and a row each."""
    tables = []
    for at in (n for n, line in enumerate(lines) if _STATS_TITLE.match(line)):
        drawn = []
        for number in range(at + 1, len(lines)):
            line = lines[number].strip()
            if not line:
                break
            drawn.append((number + 1, line))
        borders = [i for i, (_, line) in enumerate(drawn) if _STATS_BORDER.match(line)]
        rules = [i for i, (_, line) in enumerate(drawn) if set(line) <= {"-", "|"} and "|" in line]
        if not borders or not rules or rules[0] < borders[0] + 3:
            continue
        sections, names = (line.split("|") for _, line in drawn[rules[0] - 2 : rules[0]])
        keys = _column_keys([[cell.strip() for cell in sections], [cell.strip() for cell in names]])
        end = next((i for i in borders if i > rules[0]), len(drawn))
        rows = []
        for number, line in drawn[rules[0] + 1 : end]:
            cells = [cell.strip() for cell in line.split("|")]
            if len(cells) == len(keys):
                rows.append((number, _stats_row(keys, cells)))
        if rows:
            tables.append((rows[0][0], [row for _, row in rows]))
    return tables


def _stats_row(keys: list[tuple[str, ...]], cells: list[str]) -> dict[str, object]:
    row: dict[str, object] = {}
    for (section, name), cell in zip(keys, cells, strict=True):
        if name == "Benchmark" and (strategy := _STRATEGY.match(cell)) is not None:
            value = float(strategy["value"]) if strategy["value"] else math.nan
            if strategy["kind"] == "synchronous":
                row["concurrency"] = 1.0
            elif strategy["kind"] == "concurrent" and math.isfinite(value):
                row["concurrency"] = value
            elif math.isfinite(value):
                row["rate_rps"] = value
        target = _STATS_COLUMNS.get((section.split(" (")[0], name))
        if target is not None and not math.isnan(number := _number(cell)):
            row[target[0]] = number * target[1]
    return row


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("|")[1:-1]]


def _column_keys(header: list[list[str]]) -> list[tuple[str, ...]]:
    """Each column's (group, name, statistic): a spanning header cell fills the empty cells after it."""
    if not header:
        return []
    width = len(header[0])
    filled_rows = []
    for cells in header:
        if len(cells) != width:
            return []
        row, last = [], ""
        for cell in cells:
            last = cell or last
            row.append(last)
        filled_rows.append(row)
    return [tuple(row[column] for row in filled_rows) for column in range(width)]


def _row(keys: list[tuple[str, ...]], cells: list[str]) -> dict[str, object]:
    row: dict[str, object] = {}
    for key, cell in zip(keys, cells, strict=True):
        if key[:2] == ("Benchmark", "Strategy") and cell == "synchronous":
            row["concurrency"] = 1.0  # one request at a time
        target, value = _COLUMNS.get(key), _number(cell)
        if target is not None and not math.isnan(value):
            row[target[0]] = value * target[1]
    return row


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:  # "--": no figure
        return math.nan
