"""NVIDIA GenAI-Perf's console table as it prints it -> ``load_steps``, the run a row.

Read as its writer draws it (perf_analyzer's genai-perf/genai_perf/export_data/console_exporter.py, with
rich): a title (``NVIDIA GenAI-Perf | LLM Metrics`` since 2024-08, ``LLM Metrics`` or ``PA LLM Metrics``
before), a ``Statistic`` header naming the columns (``avg``, ``min``, ``max``, ``p99``, ``p90``, ``p75``
today), then a row a metric, its unit in its name: ``Time To First Token (ms)`` (``Time to first token
(ns)`` before 2024-06, in nanoseconds), ``Request Latency``, ``Inter Token Latency``, and the run's
``Request Throughput (per sec)`` and ``Request Count (count)`` in the ``avg`` column (``N/A`` in the
others). Drawn 80 columns wide where the output is no terminal, a long name wraps onto a row of its own
with empty cells: read as the name's end. Numbers carry thousands separators (``1,764.61``).

GenAI-Perf's inter-token latency is a request's ``(latency - TTFT) / (output tokens - 1)``: what vLLM
calls TPOT, kept as ``tpot_*``. It prints no median.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled

_TITLE = re.compile(r"(?:GenAI-Perf \| |PA )?LLM Metrics\s*$")
_CELL_BARS = re.compile(r"[│┃|]")
_HEADER = re.compile(r"^\s*[│┃|]\s*Stat")  # "Statistic", cut to "Statist…" at 80 columns
_UNIT = re.compile(r"\((?P<unit>[^)]*)\)\s*$")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d*)?")
_CUT = "…"  # rich's mark where a cell did not fit its column
# Every row name the exporter has written (the metric's name, its unit apart), to tell a cut name by
_NAMES = (
    "time to first token",
    "time to second token",
    "request latency",
    "inter token latency",
    "output token throughput per user",
    "output sequence length",
    "input sequence length",
    "num output token",
    "num input token",
    "output token throughput",
    "request throughput",
    "request goodput",
    "request count",
)
_METRICS = {
    "time to first token": "ttft",
    "request latency": "latency",
    "inter token latency": "tpot",  # per request, the first token left out: TPOT
}
_TOTALS = {"request throughput": "throughput_rps", "request count": "requests"}
_STATS = {"avg": "avg", "p99": "p99", "p95": "p95", "p90": "p90", "p50": "p50"}
_SCALE = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "sec": 1000.0, "s": 1000.0}


class GenaiPerfImporter(Importer):
    name = "genai-perf"
    description = "NVIDIA GenAI-Perf's console table of a run: TTFT, request latency, TPOT, throughput"

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for index, line in enumerate(lines):
            if _TITLE.search(line.strip()) and any(
                _HEADER.match(after) for after in lines[index + 1 : index + 4]
            ):
                return claim(Strength.DOCUMENT, filled(lines[index:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        row = _read_table(list(source.lines()))
        if row is not None:
            result.tables["load_steps"] = pd.DataFrame([row])
        return result


def _read_table(lines: list[str]) -> dict[str, object] | None:
    """The table's figures as one run, or None where no metric row was read."""
    columns: list[str] = []
    rows: list[tuple[str, list[str]]] = []
    start = 0
    for number, line in enumerate(lines, start=1):
        cells = [cell.strip() for cell in _CELL_BARS.split(line.strip())[1:-1]]
        if not cells:
            continue
        if not columns and _HEADER.match(line):
            columns, start = [cell.lower() for cell in cells[1:]], number
        elif columns and rows and cells[0] and not any(cells[1:]):
            rows[-1] = (f"{rows[-1][0]} {cells[0]}", rows[-1][1])  # a long name wrapped onto its own row
        elif columns and cells[0]:
            rows.append((cells[0], cells[1:]))
    figures: dict[str, object] = {}
    for name, values in rows:
        label, unit = _label(name)
        by_column = dict(zip(columns, (_number(value) for value in values), strict=False))
        if label in _METRICS:
            scale = _SCALE.get(unit, math.nan) if unit else 1.0
            for column, stat in _STATS.items():
                if column in by_column and not math.isnan(by_column[column] * scale):
                    figures[f"{_METRICS[label]}_{stat}_ms"] = by_column[column] * scale
        elif label in _TOTALS and "avg" in by_column and not math.isnan(by_column["avg"]):
            figures[_TOTALS[label]] = by_column["avg"]
    if not any(key.endswith("_ms") for key in figures):
        return None
    return {"tool": "genai-perf", "line": float(start), **figures}


def _label(name: str) -> tuple[str, str]:
    """A row's metric and unit (``Time To First Token (ms)`` -> ``time to first token``, ``ms``). A name
    cut to its column (``Request Through… (per sec)``) is the one written name it can be, if one."""
    unit = _UNIT.search(name)
    label = (name[: unit.start()] if unit else name).strip().lower()
    if _CUT in label:
        before = label.split(_CUT)[0].strip()
        fits = [known for known in _NAMES if known.startswith(before)]
        label = fits[0] if len(fits) == 1 else ""
    return label, unit["unit"].strip().lower() if unit else ""


def _number(cell: str) -> float:
    """A cell's figure: ``1,764.61``, or one with something pasted before it. A figure cut to its column
    (``18,734.…``) is read to the unit where the cut falls after its point, else not; ``N/A`` is none."""
    found = _NUMBER.search(cell)
    if found is None:
        return math.nan
    if cell.rstrip().endswith(_CUT) and "." not in found.group():
        return math.nan
    return float(found.group().replace(",", "").rstrip("."))
