"""`prof.key_averages().table()` as pasted: any torch version's columns, prefixes, several tables, cuts."""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import recognise

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
