"""`nsys stats` summaries as pasted: text and CSV, this release's column names and older ones."""

from __future__ import annotations

import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers.base import Source
from diagnose.importers.nsys_stats import NsysStatsImporter
from tests.conftest import SHARED_DATA

KERNELS = [("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>>", 60_000, 3_000.0),
           ("ampere_sgemm_128x64_tn", 1_000, 76_000.0)]  # fmt: skip
API = [("cudaLaunchKernel", 61_000, 12_000.0), ("cudaStreamSynchronize", 1_000, 152_600.0)]
MEMORY = [("[CUDA memcpy Host-to-Device]", 2_000, 19_000.0)]


# Each release's columns after the count, as its report scripts print them.
_RELEASES = {
    "2024": ["Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)"],
    "2021.2": ["Average (ns)", "Minimum (ns)", "Maximum (ns)", "StdDev (ns)"],
    "2021": ["Average", "Minimum", "Maximum"],
}


def _text(title: str, count: str, rows, name: str = "Name", release: str = "2024") -> str:
    """One report in nsys's text layout: a header, a rule of dash groups, right-aligned figures with
    thousands separators, the name left-aligned last and padded to its column (after nvtx_sum's Style,
    where ``name`` is Range)."""
    percent = "Time(%)" if release.startswith("2021") else "Time (%)"
    style = ["Style"] if name == "Range" else []
    columns = [percent, "Total Time (ns)", count, *_RELEASES[release], *style, name]
    total = sum(k * avg for _, k, avg in rows)
    body = []
    for label, k, avg in rows:
        figures = [f"{100 * k * avg / total:.1f}", f"{k * avg:,.0f}", f"{k:,}", f"{avg:,.1f}"]
        figures += [f"{avg:,.1f}"] if release == "2024" else []
        figures += [f"{avg * 0.9:,.0f}", f"{avg * 1.5:,.0f}"]
        figures += [] if release == "2021" else ["12.0"]
        body.append((figures + (["PushPop"] if style else []), label))
    widths = [max(len(c), *(len(f[i]) for f, _ in body)) for i, c in enumerate(columns[:-1])]
    name_width = max(len(name), *(len(label) for _, label in body))
    header = (
        " "
        + "  ".join(c.rjust(w) for c, w in zip(columns[:-1], widths, strict=True))
        + "  "
        + name.center(name_width)
    )
    rule = " " + "  ".join("-" * w for w in widths) + "  " + "-" * name_width
    rows_text = [
        " "
        + "  ".join(f.rjust(w) for f, w in zip(figures, widths, strict=True))
        + "  "
        + label.ljust(name_width)
        for figures, label in body
    ]
    return "\n".join([f" ** {title}:", "", header, rule, *rows_text, ""])


def _csv(count: str, rows) -> str:
    lines = [
        f'"Time (%)","Total Time (ns)","{count}","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"'
    ]
    for label, k, avg in rows:
        lines.append(f'50.0,{k * avg:.0f},{k},{avg},{avg},{avg * 0.9:.0f},{avg * 1.5:.0f},12.0,"{label}"')
    return "\n".join(lines) + "\n"


def _facts(text: str, tmp_path):
    path = tmp_path / "nsys.txt"
    path.write_text(text, encoding="utf-8")
    dump = load_dump(str(path))
    return dump, compute_facts(dump)


@pytest.mark.parametrize("release", list(_RELEASES))
def test_the_kernel_api_and_memory_reports_are_read_by_their_columns(tmp_path, release):
    text = "\n".join(
        [
            "Processing [report.sqlite] with [cuda_api_sum.py]...",
            _text("CUDA API Summary (cuda_api_sum)", "Num Calls", API, release=release),
            _text("CUDA GPU Kernel Summary (cuda_gpu_kern_sum)", "Instances", KERNELS, release=release),
            _text("CUDA GPU MemOps Summary (by Time)", "Count", MEMORY, name="Operation", release=release),
        ]
    )
    dump, facts = _facts(text, tmp_path)
    assert dump.importers[0]["importer"] == "nsys-stats"
    table = dump.traces["op_summary"]
    assert dict(zip(table["name"], table["kind"], strict=True))["[CUDA memcpy Host-to-Device]"] == "memcpy"
    assert facts.number("trace.kernels") == 61_000
    assert facts.number("trace.kernel_median_us") == pytest.approx(3.0)
    assert facts.number("trace.launches") == 61_000
    assert facts.number("trace.launch_median_us") == pytest.approx(12.0)
    assert facts.number("trace.sync_calls") == 1_000
    # Launch calls alone bound the host's time: 732 ms of launches for 256 ms of kernels.
    assert facts.number("trace.device_over_host_share") == pytest.approx((180_000 + 76_000) / 732_000)


def test_csv_reports_read_the_same(tmp_path):
    _, facts = _facts(_csv("Instances", KERNELS) + "\n" + _csv("Num Calls", API), tmp_path)
    assert facts.number("trace.kernels") == 61_000
    assert facts.number("trace.launches") == 61_000


def test_launches_outlasting_tiny_kernels_are_unfused_operators(tmp_path, report_of):
    path = tmp_path / "nsys.txt"
    path.write_text(
        _text("CUDA API Summary", "Num Calls", API)
        + "\n"
        + _text("CUDA GPU Kernel Summary", "Instances", KERNELS)
    )
    report = report_of(path)
    assert report["hypotheses"][0]["id"] == "unfused-operators"
    assert report["hypotheses"][0]["score"] >= 0.5


def test_kernels_alone_cannot_say_the_gpu_waited(tmp_path, report_of):
    """Tiny kernels with no word of the host: whether the GPU idled is unknown, and said so."""
    path = tmp_path / "nsys.txt"
    path.write_text(_text("CUDA GPU Kernel Summary", "Instances", KERNELS))
    report = report_of(path)
    assert "unfused-operators" in {r["id"] for r in report["not_run"]}


# Rows pasted without their report's header: read by the columns the report scripts print.
def _bare(count: str, rows, release: str = "2024", name: str = "Name") -> str:
    """A report's rows alone, its title, header and rule cut off: a paste that starts mid-table."""
    return "\n".join(_text("", count, rows, name=name, release=release).splitlines()[4:])


@pytest.mark.parametrize("release", list(_RELEASES))
def test_rows_without_their_header_are_read_by_the_documented_layout(tmp_path, release):
    dump, facts = _facts(
        _bare("Num Calls", API, release) + "\n\n" + _bare("Instances", KERNELS, release), tmp_path
    )
    table = dump.traces["op_summary"].set_index("name")
    assert table.loc["cudaLaunchKernel", "kind"] == "runtime"
    assert table.loc["cudaLaunchKernel", "self_host_us"] == pytest.approx(61_000 * 12_000.0 / 1000)
    assert table.loc["ampere_sgemm_128x64_tn", "kind"] == "kernel"
    assert table.loc["ampere_sgemm_128x64_tn", "self_device_us"] == pytest.approx(76_000.0)
    assert table.loc["ampere_sgemm_128x64_tn", "calls"] == 1_000
    assert facts.number("trace.kernels") == 61_000
    assert any("documented layout" in w and "nanoseconds" in w for w in dump.warnings)


def test_rows_a_paste_joined_and_names_cut_with_an_ellipsis_are_read(tmp_path):
    """Full-width lines joined into one, each row glued to the last name's ellipsis: rows are found by
    their figures, not by the line ends."""
    kernels = [("void flash_attn_fwd<(int)256, (bool)0>(const char *, const float *, floa…", 180, 9_962.0),
               ("void mul_mat_q<(ggml_type)8, (int)128>(const char *, const char *, float *, flo…", 4_376, 333.0)]  # fmt: skip
    joined = "".join(line.strip() for line in _bare("Instances", kernels).splitlines())
    dump, _ = _facts(joined + "\n", tmp_path)
    table = dump.traces["op_summary"]
    assert list(table["name"]) == [name for name, _, _ in kernels]
    assert list(table["calls"]) == [180, 4_376]


def test_os_calls_and_nvtx_ranges_without_a_header_are_told_by_their_names_and_columns(tmp_path):
    calls = [("poll", 8_725, 100_569.0), ("pthread_cond_wait", 677, 1_271_720.0), ("ioctl", 5_068, 3_387.0)]
    ranges = [(":forward", 100, 50_000.0), (":decode_step", 4_000, 900.0)]
    text = _bare("Num Calls", calls) + "\n\n" + _bare("Instances", ranges, name="Range") + "\n"
    dump, _ = _facts(text, tmp_path)  # its last line ended by its writer: the widest name is whole
    kinds = dict(zip(dump.traces["op_summary"]["name"], dump.traces["op_summary"]["kind"], strict=True))
    assert kinds == {"poll": "os", "pthread_cond_wait": "os", "ioctl": "os", ":forward": "annotation",
                     ":decode_step": "annotation"}  # fmt: skip


def test_an_nvtx_report_with_its_header_is_ranges_not_kernels(tmp_path):
    dump, facts = _facts(
        _text("NVTX Range Summary (nvtx_sum)", "Instances", [(":step", 10, 5e6)], "Range"), tmp_path
    )
    assert list(dump.traces["op_summary"]["kind"]) == ["annotation"]
    assert facts.number("trace.kernels") is None


@pytest.mark.parametrize(
    "text",
    [
        # figures in a report's shapes that do not agree as a summary's must: min above max, a wrong total
        "     60.0        1,000,000        100   10,000.0   10,000.0   20,000    5,000   12.0  foo\n"
        "     40.0          999,999         10   10,000.0   10,000.0    9,000   11,000   12.0  bar\n",
        # a pandas DataFrame of numbers with a name column
        "   share     total  count      avg  name\n0   60.0   1000000    100  10000.0   foo\n1   40.0    500000     50  10000.0   bar\n",
        # ps aux
        "root         1  0.0  0.1 169436 11520 ?        Ss   Dec01   0:05 /sbin/init\n"
        "vllm      4220 98.5 12.3 9876543 2345678 ?     Rl   10:00 123:45 python3 -m vllm.entrypoints\n",
        # nvidia-smi pmon rows
        "    0      12345     C    45    20     -     -   python3\n    1      12346     C    40    18     -     -   python3\n",
    ],
    ids=["disagreeing", "pandas", "ps", "pmon"],
)
def test_other_number_tables_are_not_taken_for_nsys_rows(text):
    assert not NsysStatsImporter().recognise(text)
    assert NsysStatsImporter().read(Source("x.txt", text, 0.0)).rows == 0


def _read(text: str) -> pd.DataFrame:
    """The rows the importer reads from ``text`` itself, nothing undone before it."""
    tables = NsysStatsImporter().read(Source("nsys.txt", text, 0.0)).tables
    return tables.get("op_summary", pd.DataFrame(columns=["name"]))


def test_a_hard_wrapped_header_takes_the_documented_layout_and_its_unit():
    """A header wrapped before its StdDev names no Name column: its last column (Max) would be read as the
    names. Its rows are read by the report's documented layout, in the unit the header states."""
    lines = _text("CUDA API Summary", "Num Calls", API).replace("(ns)", "(us)").split("\n")
    at = lines[2].index("StdDev")
    lines[2:3] = [lines[2][:at], lines[2][at:]]
    table = _read("\n".join(lines)).set_index("name")
    assert list(table.index) == [name for name, _, _ in API]
    assert table.loc["cudaLaunchKernel", "self_host_us"] == pytest.approx(61_000 * 12_000.0)


def test_rows_glued_under_their_header_are_split_where_a_row_starts():
    """Two lines a paste joined: the row read by the rule's columns would take the next row for the end of
    its name. The next row starts where the layout's run of figures does."""
    calls = [("cudaLaunchKernel", 61_000, 12_000.0), ("cudaMemcpyAsync", 2_000, 5_000.0), *API[1:]]
    lines = _text("CUDA API Summary", "Num Calls", calls).split("\n")
    lines[4:6] = [lines[4] + lines[5]]
    table = _read("\n".join(lines))
    assert list(table["name"]) == [name for name, _, _ in calls]
    assert list(table["calls"]) == [k for _, k, _ in calls]


@pytest.mark.parametrize("header", [True, False], ids=["with-header", "rows-alone"])
def test_a_name_cut_where_the_paste_ends_is_not_read(header):
    """The name ends the row: a paste cut mid-name gives another name ("ampere_sgemm"), whose line shows
    no end of its own: nsys's padding, its ellipsis, a line end after it."""
    text = _text("CUDA GPU Kernel Summary", "Instances", KERNELS) if header else _bare("Instances", KERNELS)
    cut = text[: text.index("ampere_sgemm_128x64_tn") + len("ampere_sgemm")]
    assert list(_read(cut)["name"]) == [KERNELS[0][0]]


FIELD_B = SHARED_DATA / "real-samples" / "field-2026-12-b" / "profiler"


@pytest.mark.skipif(not FIELD_B.is_dir(), reason="../shared/data/real-samples/field-2026-12-b absent")
@pytest.mark.parametrize(
    ("prefix", "rows", "name", "kind", "us", "calls"),
    [
        ("08_", 9, "cuMemCreate", "runtime", 7_770.997, 151),
        ("09_", 7, "void mmq_ids_helper<(int)0>(const int *, int *, int *, int *, int, int, int, int, int)",
         "kernel", 2_143_309.81, 2_596),
        ("10_", 7, "sem_wait", "os", 767_172_271.759, 117_905),
    ],
)  # fmt: skip
def test_field_reports_without_their_header(prefix, rows, name, kind, us, calls):
    table = load_dump(str(next(FIELD_B.glob(f"{prefix}*")))).traces["op_summary"]
    assert len(table) == rows
    row = table[table["name"] == name].iloc[0]
    column = "self_device_us" if kind == "kernel" else "self_host_us"
    assert (row["kind"], row[column], row["calls"]) == (kind, pytest.approx(us), calls)
