"""GenAI-Perf's console table read as its exporter draws it (diagnose/importers/genai_perf.py).

The tables are drawn here the way genai_perf/export_data/console_exporter.py draws them: a rich Table
titled ``NVIDIA GenAI-Perf | LLM Metrics``, a right-justified ``Statistic`` column and one a statistic,
names over 36 characters wrapped with textwrap, figures as ``{:,.2f}`` or ``N/A``, printed by a rich
Console as wide as the terminal; a pipe gets 80 columns, where rich wraps names and cuts cells.
"""

from __future__ import annotations

import io
import math
import textwrap

import pytest
from rich.console import Console
from rich.table import Table

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.genai_perf import GenaiPerfImporter

STATS = ("avg", "min", "max", "p99", "p90", "p75")
ROWS = (
    ("Time To First Token (ms)", (1764.61, 1732.66, 1885.98, 1874.74, 1773.52, 1757.67)),
    ("Time To Second Token (ms)", (0.00, 0.00, 0.01, 0.01, 0.01, 0.00)),
    ("Request Latency (ms)", (13060.68, 13042.42, 13173.60, 13163.06, 13068.19, 13050.66)),
    ("Inter Token Latency (ms)", (22.17, 22.13, 22.23, 22.23, 22.19, 22.18)),
    ("Output Token Throughput Per User (tokens/sec/user)", (45.11, 44.97, 45.18, 45.18, 45.17, 45.17)),
    ("Output Sequence Length (tokens)", (512.0, 512.0, 512.0, 512.0, 512.0, 512.0)),
    ("Input Sequence Length (tokens)", (200.0, 200.0, 200.0, 200.0, 200.0, 200.0)),
    ("Output Token Throughput (tokens/sec)", (1443.52, None, None, None, None, None)),
    ("Request Throughput (per sec)", (2.82, None, None, None, None, None)),
    ("Request Count (count)", (100.0, None, None, None, None, None)),
)


def _drawn(width: int, rows=ROWS, title: str = "NVIDIA GenAI-Perf | LLM Metrics") -> str:
    table = Table(title=title)
    table.add_column("Statistic", justify="right", style="cyan")
    for stat in STATS:
        table.add_column(stat, justify="right", style="green")
    for name, values in rows:
        name = textwrap.fill(name, width=36) if len(name) > 36 else name
        table.add_row(name, *(f"{value:,.2f}" if value is not None else "N/A" for value in values))
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(table)
    return out.getvalue()


def _run(text: str) -> dict:
    (run,) = (
        GenaiPerfImporter()
        .read(Source("genai.txt", mend(text).text, 0.0))
        .tables["load_steps"]
        .to_dict("records")
    )
    return run


def test_a_wide_table_gives_each_statistic_of_each_metric():
    run = _run(_drawn(160))
    assert run["tool"] == "genai-perf"
    assert (run["ttft_avg_ms"], run["ttft_p90_ms"], run["ttft_p99_ms"]) == (1764.61, 1773.52, 1874.74)
    assert (run["latency_avg_ms"], run["latency_p99_ms"]) == (13060.68, 13163.06)
    # GenAI-Perf's inter-token latency is a request's (latency - TTFT) / (tokens - 1): TPOT
    assert run["tpot_avg_ms"] == 22.17 and "itl_avg_ms" not in run
    assert (run["throughput_rps"], run["requests"]) == (2.82, 100)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_a_pipes_80_columns_wrap_names_and_cut_figures_after_their_point(width):
    """At 80 columns rich wraps every name over rows of empty cells and cuts wide figures ("1,764.6…"):
    a cut after the point reads to the unit, a name cut to its column is the one name it can be."""
    text = _drawn(width)
    assert recognise(mend(text).text).name == "genai-perf"
    run = _run(text)
    for column, value in (("ttft_avg_ms", 1764.61), ("latency_p99_ms", 13163.06), ("tpot_p90_ms", 22.19)):
        assert abs(run[column] - value) < 1, column
    assert (run["throughput_rps"], run["requests"]) == (2.82, 100)


def test_a_figure_cut_before_its_point_is_not_read():
    rows = (("Request Latency (ms)", (123456789.12, 1.0, 1.0, 1.0, 1.0, 1.0)),)
    run = _run(_drawn(60, rows))
    assert math.isnan(run.get("latency_avg_ms", math.nan)) and run["latency_p99_ms"] == 1.0


def test_the_2024_tables_nanoseconds_are_read_as_milliseconds():
    rows = (
        (
            "Time to first token (ns)",
            (1764610000, 1732660000, 1885980000, 1874740000, 1773520000, 1757670000),
        ),
        ("Inter token latency (ns)", (22170000, 22130000, 22230000, 22230000, 22190000, 22180000)),
    )
    run = _run(_drawn(160, rows, title="LLM Metrics"))
    assert math.isclose(run["ttft_avg_ms"], 1764.61) and math.isclose(run["tpot_p99_ms"], 22.23)


def test_the_pasted_table_with_a_mark_in_a_cell_and_cut_short_is_read():
    """A table as pasted in an issue: an arrow typed into a cell, the paste cut after a wrapped name."""
    drawn = _drawn(120)
    text = drawn.replace("│  1,764.61 │", "│--->  1,764.61 │")
    assert text != drawn
    cut = "\n".join(text.splitlines()[:9]) + "\n"  # up to the first line of a wrapped name
    run = _run(cut)
    assert run["ttft_avg_ms"] == 1764.61 and run["latency_p90_ms"] == 13068.19
    assert "throughput_rps" not in run
