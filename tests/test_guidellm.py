"""guidellm's console tables read as it prints them (diagnose/importers/guidellm.py).

The tables are drawn here by a port of guidellm's own drawing (src/guidellm/utils/console.py:
``_format_table_columns``, ``_format_table_headers``, ``print_table_headers``, ``print_table_row``) from
the columns its console output builds (src/guidellm/benchmark/outputs/console.py): a header cell that
spans columns printed once, the spanned cells empty between their own bars; figures ``{:.1f}``.
"""

from __future__ import annotations

import math

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.guidellm import GuidellmImporter
from diagnose.pipeline import analyse_path


def _columns(cols: list[list[str]], widths: list[int] | None = None) -> tuple[list[list[str]], list[int]]:
    rows = max(len(col) for col in cols)
    formatted = [[f" {item} " if item else "" for item in col + [""] * (rows - len(col))] for col in cols]
    found = [max(len(row) for row in col) for col in formatted]
    return formatted, found if widths is None else [max(w, m) for w, m in zip(found, widths, strict=True)]


def _headers(headers: list[list[str]], widths: list[int]) -> tuple[list[list[str]], list[int]]:
    formatted, _ = _columns(headers, widths)
    widths = list(widths)
    for row in range(len(formatted[0])):
        last, start = None, -1
        for col in range(len(formatted) + 1):
            value = formatted[col][row] if col < len(formatted) else None
            if (
                col < len(formatted)
                and value != ""
                and value == last
                and (row == 0 or headers[start][row - 1] == headers[col][row - 1])
            ):
                continue
            if start >= 0:
                for merged in range(start + 1, col):
                    formatted[merged][row] = ""
                required, current = len(formatted[start][row]), sum(widths[start:col])
                if required > current:
                    per, extra = divmod(required - current, col - start)
                    for each in range(start, col):
                        widths[each] += per + (1 if extra > 0 else 0)
                        extra -= 1
            last, start = value, col
    return formatted, widths


def _line(values: list[str], widths: list[int], spacer: str = " ") -> str:
    return (
        "|" + "|".join(value.ljust(width, spacer) for value, width in zip(values, widths, strict=True)) + "|"
    )


def _table(title: str, columns: list[tuple[str, str, str, list[str]]]) -> str:
    """guidellm's print_table: ``columns`` are (group, name, statistic, a value a benchmark)."""
    values, widths = _columns([values for *_, values in columns])
    headers, widths = _headers([[group, name, stat] for group, name, stat, _ in columns], widths)
    lines = [f"ℹ {title}", _line([""] * len(widths), widths, "=")]
    for row in range(3):
        row_widths = list(widths)
        for col in range(len(headers)):
            if not headers[col][row]:
                continue
            end = col + 1
            while end < len(headers) and not headers[end][row]:
                row_widths[end] = 0
                end += 1
            row_widths[col] = sum(widths[col:end])
        lines.append(_line([headers[col][row] for col in range(len(headers))], row_widths))
    lines.append(_line([""] * len(widths), widths, "-"))
    lines += [_line([col[row] for col in values], widths) for row in range(len(values[0]))]
    lines.append(_line([""] * len(widths), widths, "="))
    return "\n".join(lines) + "\n"


STRATEGIES = ["synchronous", "constant", "throughput"]


def _f(*figures: float | None) -> list[str]:
    return ["--" if figure is None else f"{figure:.1f}" for figure in figures]


LATENCY = _table(
    "Request Latency Statistics (Completed Requests)",
    [
        ("Benchmark", "Strategy", "", STRATEGIES),
        ("Request Latency", "Sec", "Mdn", _f(3.1, 4.0, 41.2)),
        ("Request Latency", "Sec", "p95", _f(3.3, 4.9, 70.8)),
        ("TTFT", "ms", "Mdn", _f(41.5, 60.2, 35210.4)),
        ("TTFT", "ms", "p95", _f(50.3, 120.9, 66012.7)),
        ("TTFOT", "ms", "Mdn", _f(None, None, None)),
        ("TTFOT", "ms", "p95", _f(None, None, None)),
        ("ITL", "ms", "Mdn", _f(12.0, 15.5, 23.9)),
        ("ITL", "ms", "p95", _f(12.4, 17.0, 30.1)),
        ("TPOT", "ms", "Mdn", _f(12.1, 15.6, 24.0)),
        ("TPOT", "ms", "p95", _f(12.5, 17.1, 30.3)),
    ],
)
THROUGHPUT = _table(
    "Server Throughput Statistics (All Requests)",
    [
        ("Benchmark", "Strategy", "", STRATEGIES),
        ("Requests", "Concurrency", "Mdn", _f(1.0, 7.0, 512.0)),
        ("Requests", "Concurrency", "Mean", _f(1.0, 6.8, 498.3)),
        ("Requests", "Per Sec", "Mean", _f(0.3, 2.0, 12.1)),
        ("Input Tokens", "Per Sec", "Mean", _f(153.6, 1024.0, 6195.2)),
        ("Output Tokens", "Per Sec", "Mean", _f(81.9, 512.0, 3097.6)),
        ("Total Tokens", "Per Sec", "Mean", _f(235.5, 1536.0, 9292.8)),
    ],
)


def _runs(text: str) -> list[dict]:
    result = GuidellmImporter().read(Source("guidellm.txt", mend(text).text, 0.0))
    return result.tables["load_steps"].to_dict("records")


def test_a_spanning_header_names_every_column_it_spans():
    assert "| TTFT " in LATENCY and "||" in LATENCY  # the writer's spans, as drawn
    runs = _runs("\n" + LATENCY + "\n" + THROUGHPUT)
    assert [run["ttft_p50_ms"] for run in runs] == [41.5, 60.2, 35210.4]
    assert [run["tpot_p95_ms"] for run in runs] == [12.5, 17.1, 30.3]
    assert [run["latency_p50_ms"] for run in runs] == [3100.0, 4000.0, 41200.0]  # seconds, in ms
    # the throughput table's "Mean" spans Requests' and the tokens' columns: each Per Sec is its own
    assert [run["throughput_rps"] for run in runs] == [0.3, 2.0, 12.1]
    assert [run["concurrency_mean"] for run in runs] == [1.0, 6.8, 498.3]
    assert runs[0]["concurrency"] == 1 and all(
        math.isnan(run.get("concurrency", math.nan)) for run in runs[1:]
    )
    assert "ttfot_p50_ms" not in runs[0]


def test_it_is_recognised_by_its_title_and_frame():
    assert recognise(mend(LATENCY).text).name == "guidellm"


def test_one_table_alone_gives_what_it_holds():
    runs = _runs(LATENCY)
    assert len(runs) == 3 and "throughput_rps" not in runs[0] and runs[2]["itl_p50_ms"] == 23.9


def test_the_benchmark_whose_first_tokens_waited_is_named_saturation(tmp_path):
    """The throughput strategy's median first token took 35 s, where two 24 ms steps and 83 ms a
    completion (12.1 requests a second) are what its own work can take."""
    (tmp_path / "guidellm.txt").write_text(LATENCY + THROUGHPUT)
    report = analyse_path(str(tmp_path), helper=False)[1].report
    assert math.isclose(
        report.facts["loadtest.first_token_wait_share"].value, 1 - (2 * 24.0 + 1000 / 12.1) / 35210.4
    )
    assert [h.id for h in report.hypotheses if h.score >= 0.5] == ["queue-saturation"]


def _stats_table(sections: dict[str, tuple[int, int]], headers: list[str], rows: list[list[str]]) -> str:
    """guidellm 0.2-0.3's print_table (src/guidellm/benchmark/output.py): widths from the cells and the
    sections, a border of "=", the sections row, the names right-aligned, a rule of "-" and "|", the rows,
    a closing border; "|" and a space between cells, none outside."""
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]
    for name, (start, end) in sections.items():
        needed, have = len(name) + (end - start), sum(widths[start : end + 1]) + 2 * (end - start)
        if needed > have:
            for col in range(start, end + 1):
                widths[col] += math.ceil((needed - have) / (end - start + 1))
    border = "".join("=" * (w + 2) for w in widths)[:-2]
    section_line = ""
    for name, (start, end) in sections.items():
        length = sum(widths[start : end + 1]) + 2 * (end - start + 1)
        spans = end - start
        section_line += name + " " * (length - len(name) - spans - 2) + "|" * spans + "| "
    section_line = section_line[:-2]

    def row(cells: list[str]) -> str:
        return "| ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))

    rule = "".join("-" * w + "|" + "-" for w in widths)[:-2]
    return "\n".join(
        ["", "Benchmarks Stats:", border, section_line, row(headers), rule, *map(row, rows), border]
    )


STATS_SECTIONS = {
    "Metadata": (0, 0),
    "Request Stats": (1, 2),
    "Out Tok/sec": (3, 3),
    "Tot Tok/sec": (4, 4),
    "Req Latency (ms)": (5, 7),
    "TTFT (ms)": (8, 10),
    "ITL (ms)": (11, 13),
    "TPOT (ms)": (14, 16),
}
STATS_HEADERS = ["Benchmark", "Per Second", "Concurrency", "mean", "mean", *["mean", "median", "p99"] * 4]
STATS_ROWS = [
    ["synchronous", "0.33", "1.00", "85.3", "256.1", "3.01", "3.00", "3.12", "40.1", "39.8", "52.3",
     "11.6", "11.6", "12.0", "11.5", "11.5", "11.9"],
    ["constant@2.00", "1.98", "6.90", "507.2", "1520.6", "3.49", "3.41", "4.85", "58.3", "55.0", "120.7",
     "13.3", "13.2", "15.1", "13.2", "13.1", "15.0"],
    ["concurrent@64", "11.90", "63.10", "3050.1", "9140.3", "5.30", "5.28", "5.61", "95.4", "90.2", "160.8",
     "20.2", "20.1", "23.0", "20.1", "20.0", "22.9"],
    ["throughput", "12.10", "498.30", "3097.6", "9292.8", "41.20", "41.00", "70.80", "35210.4", "35000.1",
     "66012.7", "23.9", "23.8", "30.1", "23.8", "23.7", "30.0"],
]  # fmt: skip


def test_the_benchmarks_stats_table_of_0_2_is_read_as_its_writer_draws_it():
    """One table, sections spanning columns with a bar each, cells right-aligned; request latency in
    seconds under a "(ms)" label (0.2; "(sec)" from 0.3); each strategy's load from its name."""
    text = _stats_table(STATS_SECTIONS, STATS_HEADERS, STATS_ROWS)
    assert "||" in text.splitlines()[3] and "|||" in text.splitlines()[3]  # spans, as drawn
    assert recognise(mend(text).text).name == "guidellm"
    runs = _runs(text)
    assert [run["throughput_rps"] for run in runs] == [0.33, 1.98, 11.9, 12.1]
    assert [run["latency_p50_ms"] for run in runs] == [3000.0, 3410.0, 5280.0, 41000.0]
    assert [run["ttft_p50_ms"] for run in runs] == [39.8, 55.0, 90.2, 35000.1]
    assert [run["itl_p99_ms"] for run in runs] == [12.0, 15.1, 23.0, 30.1]
    assert [run["tpot_p50_ms"] for run in runs] == [11.5, 13.1, 20.0, 23.7]
    assert [run["concurrency_mean"] for run in runs] == [1.0, 6.9, 63.1, 498.3]
    concurrency = [run.get("concurrency", math.nan) for run in runs]
    assert concurrency[0] == 1.0 and concurrency[2] == 64.0 and math.isnan(concurrency[1])
    assert runs[1]["rate_rps"] == 2.0 and math.isnan(runs[3].get("rate_rps", math.nan))
    renamed = STATS_SECTIONS | {"Req Latency (sec)": STATS_SECTIONS["Req Latency (ms)"]}
    del renamed["Req Latency (ms)"]
    later = _runs(
        _stats_table(dict(sorted(renamed.items(), key=lambda kv: kv[1])), STATS_HEADERS, STATS_ROWS)
    )
    assert [run["latency_p50_ms"] for run in later] == [3000.0, 3410.0, 5280.0, 41000.0]


def test_the_0_2_benchmark_whose_first_tokens_waited_is_named_saturation(tmp_path):
    (tmp_path / "guidellm.txt").write_text(_stats_table(STATS_SECTIONS, STATS_HEADERS, STATS_ROWS))
    report = analyse_path(str(tmp_path), helper=False)[1].report
    assert math.isclose(
        report.facts["loadtest.first_token_wait_share"].value, 1 - (2 * 23.7 + 1000 / 12.1) / 35000.1
    )
    assert [h.id for h in report.hypotheses if h.score >= 0.5] == ["queue-saturation"]
