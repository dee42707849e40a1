"""`prof.key_averages().table()` as pasted: any torch version's columns, prefixes, several tables, cuts."""

from __future__ import annotations

import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.line_streams import streams
from diagnose.importers.profiler_layouts import fragments
from diagnose.importers.profiler_table import ProfilerTableImporter
from tests.conftest import SHARED_DATA

# (name, self cpu us, cpu total us, self cuda us, cuda total us, calls): an eager step of small adds.
ROWS = [
    ("aten::add", 41_000.0, 78_300.0, 0.0, 24_360.0, 6000),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
        0.0,
        0.0,
        24_360.0,
        24_360.0,
        6000,
    ),
    ("cudaLaunchKernel", 35_000.0, 35_000.0, 0.0, 0.0, 6200),
    ("aten::addmm", 4_000.0, 6_000.0, 0.0, 17_560.0, 200),
    ("ampere_sgemm_128x64_tn", 0.0, 0.0, 17_560.0, 17_560.0, 200),
    ("cudaStreamSynchronize", 1_000.0, 1_000.0, 0.0, 0.0, 20),
    ("Memcpy HtoD (Pageable -> Device)", 0.0, 0.0, 300.0, 300.0, 20),
]
HOST_TOTAL_US = 194_300.0


def _time(us: float) -> str:
    return f"{us / 1000:.3f}ms" if us >= 1000 else f"{us:.3f}us"


def _render(columns: list[str], cells: list[list[str]], name_width: int = 55, right: bool = True) -> str:
    """A table in torch's layout: a rule of dash groups two spaces apart, the header, a rule, the rows
    (names cut to the column with '...'), a rule."""
    widths = [name_width] + [max(12, len(c)) for c in columns[1:]]

    def line(values: list[str]) -> str:
        out = []
        for value, width in zip(values, widths, strict=True):
            value = value if len(value) <= width else value[: width - 3] + "..."
            out.append(value.rjust(width) if right else value.ljust(width))
        return "  ".join(out) + "  "

    rule = "  ".join("-" * w for w in widths) + "  "
    return "\n".join([rule, line(columns), rule, *(line(c) for c in cells), rule])


def _new_table(rows=ROWS) -> str:
    columns = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA",
               "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls"]  # fmt: skip
    cells = [
        [
            n,
            f"{sc / HOST_TOTAL_US:.2%}",
            _time(sc),
            f"{ct / HOST_TOTAL_US:.2%}",
            _time(ct),
            _time(ct / k),
            _time(sd),
            "0.00%",
            _time(dt),
            _time(dt / k),
            str(k),
        ]  # fmt: skip
        for n, sc, ct, sd, dt, k in rows
    ]
    footer = f"Self CPU time total: {_time(HOST_TOTAL_US)}\nSelf CUDA time total: {_time(41_920.0)}\n"
    return _render(columns, cells) + "\n" + footer


def _old_table() -> str:
    """torch 1.4-1.6: 'Self CPU total', 'CUDA total' with no self time, 'Number of Calls', left-aligned."""
    columns = ["Name", "Self CPU total %", "Self CPU total", "CPU total %", "CPU total", "CPU time avg",
               "CUDA total %", "CUDA total", "CUDA time avg", "Number of Calls"]  # fmt: skip
    cells = [
        [n, "1.00%", _time(sc), "1.00%", _time(ct), _time(ct / k), "1.00%", _time(dt), _time(dt / k), str(k)]
        for n, sc, ct, sd, dt, k in ROWS
    ]
    return _render(columns, cells, name_width=20, right=False) + "\n"


def _summary(text: str, tmp_path, name: str = "profile.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    dump = load_dump(str(path))
    return dump, compute_facts(dump)


def test_a_table_is_read_by_its_dash_groups_and_headers(tmp_path):
    dump, facts = _summary(_new_table(), tmp_path)
    assert dump.importers[0]["importer"] == "pytorch-profiler-table"
    table = dump.traces["op_summary"].set_index("kind")
    assert set(table.index) == {"operator", "kernel", "runtime", "memcpy"}
    assert facts.number("trace.kernels") == 6200
    assert facts.number("trace.kernel_median_us") == pytest.approx(4.06)
    assert facts.number("trace.short_kernel_share") == pytest.approx(6000 / 6200)
    assert facts.number("trace.launches") == 6200
    assert facts.number("trace.launch_median_us") == pytest.approx(35_000 / 6200)
    assert facts.number("trace.sync_calls") == 20
    assert facts.number("trace.device_over_host_share") == pytest.approx((24_360 + 17_560) / HOST_TOTAL_US)


def test_an_eager_step_of_small_kernels_in_a_summary_is_unfused_operators(tmp_path, report_of, run_cli):
    path = tmp_path / "profile.txt"
    path.write_text(_new_table(), encoding="utf-8")
    report = report_of(path)
    first = report["hypotheses"][0]
    assert first["id"] == "unfused-operators" and first["score"] >= 0.5
    lines = {line["text"] for line in first["evidence"]}
    assert any("as long as the host's traced work took" in line for line in lines)
    code, out, _ = run_cli("file", path)
    assert code == 0 and "No request latencies in the dump: the profiler trace (profile.txt)" in out


def test_a_summary_of_large_kernels_is_not_unfused(tmp_path):
    big = [(n, sc, ct, sd * 100, dt * 100, k) for n, sc, ct, sd, dt, k in ROWS]
    _, facts = _summary(_new_table(big), tmp_path)
    assert facts.number("trace.short_kernel_share") == 0.0


def test_the_old_layout_reads_the_same_counts(tmp_path):
    dump, facts = _summary(_old_table(), tmp_path)
    table = dump.traces["op_summary"]
    assert table["calls"].sum() == sum(r[5] for r in ROWS)
    assert "self_device_us" not in table  # torch 1.4 had no self CUDA time: no kernels can be told apart
    assert facts.number("trace.kernels") is None


def test_prefixes_a_second_table_and_a_cut_end(tmp_path):
    tagged = "\n".join(f"(EngineCore_0 pid=4242) {line}" for line in _new_table().splitlines())
    second = _new_table(ROWS[:3])
    cut = second[: second.index("cudaLaunchKernel")]  # the paste ends mid-table
    dump, facts = _summary(f"$ python profile_step.py\n{tagged}\n\nafter the change:\n{cut}", tmp_path)
    assert len(dump.traces["op_summary"]) == len(ROWS) + 2
    assert any("2 profiler tables" in w for w in dump.warnings)
    assert facts.number("trace.kernels") == 6200 + 6000


def test_what_is_not_a_profiler_table_is_not_taken_for_one():
    assert recognise("-----  -----\nName   Value\n-----  -----\nfoo    1\n") is None
    assert recognise(_new_table()).name == "pytorch-profiler-table"


# Rows pasted without their header: read by the columns torch's _build_table prints for some flags.
_CUDA = ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
_HOST = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]


def _cells(flags: str, row: tuple) -> list[str]:
    """One row's cells as _build_table writes them for ``flags`` (device, memory, flops, shapes, old)."""
    n, sc, ct, sd, dt, k = row
    if "old" in flags:  # torch 1.0-1.6: no self CUDA time
        return [
            n,
            "1.00%",
            _time(sc),
            "2.00%",
            _time(ct),
            _time(ct / k),
            "3.00%",
            _time(dt),
            _time(dt / k),
            str(k),
        ]
    cells = [n, f"{sc / HOST_TOTAL_US:.2%}", _time(sc), f"{ct / HOST_TOTAL_US:.2%}", _time(ct), _time(ct / k)]
    if "device" in flags:
        cells += [_time(sd), "0.00%", _time(dt), _time(dt / k)]
    if "memory" in flags:
        cells += ["-631.96 MB", "0 B"]
    cells.append(str(k))
    if "shapes" in flags:
        cells.append("[[64, 1024], [1024, 1024], []]")
    if "flops" in flags:
        cells.append("--" if sc == 0 else "1234.567")
    return cells


def _bare_rows(flags: str, rows=ROWS) -> str:
    """The rows of such a table, its header and rules cut off: a paste that starts and ends mid-table."""
    columns = ["Name", *_HOST, *(_CUDA if "device" in flags else [])]  # only the count of columns matters
    cells = [_cells(flags, row) for row in rows]
    columns += ["x"] * (len(cells[0]) - len(columns))
    table = _render(columns, cells, name_width=55 if "old" not in flags else 34, right="old" not in flags)
    return "\n".join(table.splitlines()[3:-1]) + "\n"


@pytest.mark.parametrize("flags", ["device", "memory flops", "shapes", "device memory", "old"])
def test_rows_without_their_header_are_read_by_the_documented_layout(tmp_path, flags):
    dump, _ = _summary(_bare_rows(flags), tmp_path)
    table = dump.traces["op_summary"].set_index("name")
    assert len(table) == len(ROWS)
    assert table.loc["aten::addmm", "self_host_us"] == pytest.approx(4_000.0)
    assert table.loc["aten::addmm", "host_total_us"] == pytest.approx(6_000.0)
    assert table.loc["cudaLaunchKernel", "calls"] == 6200
    if "device" in flags:
        assert table.loc["ampere_sgemm_128x64_tn", "self_device_us"] == pytest.approx(17_560.0)
        assert table.loc["ampere_sgemm_128x64_tn", "kind"] == "kernel"
    if "old" in flags:
        assert table.loc["ampere_sgemm_128x64_tn", "device_total_us"] == pytest.approx(17_560.0)
    assert any("documented layout" in w for w in dump.warnings)


def test_a_table_behind_a_logger_head_in_a_worker_log_is_read(tmp_path):
    """vLLM's logger heads every line of the message, the time stamp moving on; the process tag before it."""
    lines = _new_table().splitlines()
    logged = "\n".join(
        f"(EngineCore_DP0 pid=4220) INFO 11-05 13:22:{49 + n // 10:02d} [cpu_worker.py:210] {line}"
        for n, line in enumerate(lines)
    )
    dump, facts = _summary(logged + "\n", tmp_path, "worker.log")
    assert dump.importers[0]["importer"] == "pytorch-profiler-table"
    table = dump.traces["op_summary"].set_index("name")
    assert table.loc["aten::addmm", "self_host_us"] == pytest.approx(4_000.0)
    assert facts.number("trace.kernels") == 6200
    assert any('prefix "INFO … [cpu_worker.py:210]"' in w for w in dump.warnings)


def test_tables_kept_as_comments_in_a_script_are_read_each_by_its_own_columns(tmp_path):
    first = _new_table()
    second = _render(["Name", *_HOST, "# of Calls"], [_cells("", r)[:6] + [str(r[5])] for r in ROWS[:2]], 30)
    commented = "\n".join(f"# {line}".rstrip() for line in ["Compiled", *first.splitlines(), "", "Eager",
                                                            *second.splitlines()])  # fmt: skip
    dump, _ = _summary(f"import torch\n\n{commented}\n", tmp_path, "bench.py")
    assert len(dump.traces["op_summary"]) == len(ROWS) + 2
    assert any("2 profiler tables" in w for w in dump.warnings)


def test_ranks_printing_at_once_are_read_apart(tmp_path):
    """Two ranks' tables interleaved line by line: each rank's lines are a table of their own."""
    faster = [(n, sc / 2, ct / 2, sd, dt, k) for n, sc, ct, sd, dt, k in ROWS]
    zero, one = _new_table().splitlines(), _new_table(faster).splitlines()
    lines = [f"[rank{r}]:{line}" for pair in zip(zero, one, strict=True) for r, line in enumerate(pair)]
    dump, _ = _summary("\n".join(lines) + "\n", tmp_path)
    table = dump.traces["op_summary"]
    assert len(table) == 2 * len(ROWS)
    assert sorted(table.loc[table["name"] == "aten::addmm", "self_host_us"]) == [2_000.0, 4_000.0]


@pytest.mark.parametrize(
    "glued",
    ["test_profiler_aggregation (test_autograd.TestAutograd) ... ", "INFO 11-05 13:22:49 [profiling.py:88] "],
    ids=["test-runner", "logger-first-line-only"],
)
def test_a_rule_glued_to_the_line_before_is_read_alone(tmp_path, glued):
    dump, _ = _summary(f"$ python -m pytest test/autograd\n{glued}{_old_table()}", tmp_path)
    assert dump.traces["op_summary"]["calls"].sum() == sum(r[5] for r in ROWS)
    assert not any("without the table's header" in w for w in dump.warnings)


@pytest.mark.parametrize(
    "text",
    [
        # nvidia-smi pmon rows, header lost
        "    0      12345     C    45    20     -     -   python3\n    1      12346     C    40    18     -     -   python3\n",
        # ps aux
        "root         1  0.0  0.1 169436 11520 ?        Ss   Dec01   0:05 /sbin/init\n"
        "vllm      4220 98.5 12.3 9876543 2345678 ?     Rl   10:00 123:45 python3 -m vllm.entrypoints\n",
        # top, its %CPU and TIME+ columns
        " 4220 vllm      20   0   12.3g   2.1g  98304 R  98.5  12.3 123:45.67 python3\n"
        " 4221 vllm      20   0   12.3g   2.1g  98304 S   1.5  12.3   0:45.67 python3\n",
        # a pandas DataFrame print
        "          a         b         c\n0  0.469112 -0.282863 -1.509059\n1 -1.135632  1.212112 -0.173215\n",
        # shares and durations, but not in any order torch prints them
        "step 1     12.50%     1.234ms     3\nstep 2     10.00%     2.000ms     4\n",
    ],
    ids=["pmon", "ps", "top", "pandas", "other-order"],
)
def test_other_text_tables_are_not_taken_for_profiler_rows(text):
    assert not ProfilerTableImporter().recognise(text)


def test_a_few_row_shaped_lines_in_a_log_do_not_make_it_a_profiler_table():
    log = "\n".join(
        f"INFO 11-05 13:22:{n:02d} [engine.py:1] Avg prompt throughput: {n}.0 tokens/s" for n in range(9)
    )
    assert not ProfilerTableImporter().recognise(log + "\n" + _bare_rows("device", ROWS[:2]))


def test_rows_no_one_layout_fits_are_not_read():
    """A run of rows is read by one layout or not at all: two tables' rows run together are neither."""
    mixed = _bare_rows("device", ROWS[:3]) + _bare_rows("memory", ROWS[3:])
    assert not list(fragments(streams(mixed.splitlines())[0], set()))
    assert not ProfilerTableImporter().recognise(mixed)


def _read(text: str) -> pd.DataFrame:
    """The rows the importer reads from ``text`` itself, nothing undone before it."""
    tables = ProfilerTableImporter().read(Source("profile.txt", text, 0.0)).tables
    return tables.get("op_summary", pd.DataFrame(columns=["name"]))


def _wrapped(text: str, width: int) -> str:
    """Every line hard-wrapped at ``width`` columns, as a terminal or a chat box does."""
    return "\n".join(
        line[i : i + width] for line in text.split("\n") for i in range(0, max(len(line), 1), width)
    )


def _only_clean_figures(read: pd.DataFrame, clean: pd.DataFrame) -> None:
    """Every row read is a clean row, or one with figures missing: none with a figure or a kind it lacks."""
    for _, row in read.iterrows():
        same = clean[clean["name"] == row["name"]].iloc[0]
        for column, value in row.dropna().items():
            assert same[column] == value, (row["name"], column)


def test_a_hard_wrapped_header_does_not_shift_columns():
    """Tables kept as comments, hard-wrapped at 120 columns: mend rejoins the rules, not the header, which
    names only some of the rule's columns. Its rows, cut at the same width, would be read without their
    device time, a kernel taken for an operator."""
    commented = "\n".join(f"# {line}" for line in _new_table().splitlines())
    _only_clean_figures(_read(mend(_wrapped(commented, 120)).text), _read(_new_table()))


def test_the_rest_of_a_hard_wrapped_row_is_not_a_row():
    """Rows wrapped at 80 columns under a whole header (mend rejoined it, not them): a row's rest, read by
    the rule's columns, would be a row named "13.050us  1.00" with its figures under other columns."""
    lines = _old_table().split("\n")
    text = "\n".join([*lines[:3], *(_wrapped(line, 80) for line in lines[3:-2]), *lines[-2:]])
    read = _read(text)
    assert set(read["name"]) <= {name[:17] + "..." if len(name) > 20 else name for name, *_ in ROWS}
    _only_clean_figures(read, _read(_old_table()))


def test_each_table_takes_the_footer_printed_under_it():
    """Two tables and a third cut before its footer: each row has its own table's total, not the last one
    printed in the file; the cut table's rows have the total their own Self CPU % give."""
    second = _new_table(ROWS[:3]).replace("Self CPU time total: 194.300ms", "Self CPU time total: 97.150ms")
    cut = _new_table(ROWS[:3])[: _new_table(ROWS[:3]).index("cudaLaunchKernel")]
    table = _read(f"{_new_table()}\n{second}\n{cut}")
    totals = list(table["table_self_host_us"])
    assert totals[: len(ROWS)] == [HOST_TOTAL_US] * len(ROWS)
    assert totals[len(ROWS) : len(ROWS) + 3] == [97_150.0] * 3
    # cut before its footer: 41.000ms is 21.10 % of it (the largest share: the fewest digits lost)
    assert totals[len(ROWS) + 3 :] == [pytest.approx(HOST_TOTAL_US, rel=5e-4)] * 2


def test_a_table_without_its_footer_and_nothing_but_percentages_to_total_it_has_no_total():
    text = _new_table()
    for row in ROWS:
        text = text.replace(f"{row[1] / HOST_TOTAL_US:.2%}", "NaN", 1)
    table = _read(text[: text.index("Self CPU time total")])
    assert table["table_self_host_us"].isna().all() if "table_self_host_us" in table else True
    assert "self_host_pct" not in table  # read to total the table, never a column of op_summary


def test_a_row_cut_mid_figure_keeps_only_the_figures_left_whole():
    """A count cut short ("20" to "2") is still a count: it is read only where the line shows its end.
    A kernel cut before its device time is not read at all: its host time (0) does not say what it is."""
    text = _new_table()
    cut_count = text[: text.index("20  \n", text.index("Memcpy HtoD")) + 1]
    row = _read(cut_count).set_index("name").loc["Memcpy HtoD (Pageable -> Device)"]
    assert pd.isna(row["calls"]) and row["device_total_us"] == pytest.approx(300.0)
    kernel = text.index("ampere_sgemm_128x64_tn")
    cut_device = text[: text.index("us", text.index("us", kernel) + 2) + 2]  # after its CPU total
    assert "ampere_sgemm_128x64_tn" not in set(_read(cut_device)["name"])
    bare = _bare_rows("device").rstrip()[:-1]  # rows without their header, the last count cut to "2"
    assert pd.isna(_read(bare).set_index("name").loc["Memcpy HtoD (Pageable -> Device)", "calls"])
    assert _read(bare).set_index("name").loc["aten::addmm", "calls"] == 200  # its line ends where torch's did


FIELD_B = SHARED_DATA / "real-samples" / "field-2026-12-b" / "profiler"


@pytest.mark.skipif(not FIELD_B.is_dir(), reason="../shared/data/real-samples/field-2026-12-b absent")
@pytest.mark.parametrize(
    ("prefix", "rows", "name", "self_host_us", "calls"),
    [
        ("02_", 36, "aten::addmm", 586.0, 20),
        ("04_", 1, "lstm", 2_502.0, None),
        ("05_", 2, "_C::onednn_mm", 1_022_000.0, 11392),
        ("06_", 2, "nvjet_tst_448x64_64x3_2x1_2cta_v_bz_TNT", 0.0, 1),
        ("07_", 6, "aten::to", 2_120.0, 3584),
    ],
)
def test_field_pastes_behind_prefixes_and_without_headers(prefix, rows, name, self_host_us, calls):
    path = next(FIELD_B.glob(f"{prefix}*"))
    dump = load_dump(str(path))
    table = dump.traces["op_summary"]
    assert len(table) == rows
    row = table[table["name"] == name].iloc[0]
    assert row["self_host_us"] == pytest.approx(self_host_us)
    assert pd.isna(row["calls"]) if calls is None else row["calls"] == calls
