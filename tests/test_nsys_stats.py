"""`nsys stats` summaries as pasted: text and CSV, this release's column names and older ones."""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts

KERNELS = [("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>>", 60_000, 3_000.0),
           ("ampere_sgemm_128x64_tn", 1_000, 76_000.0)]  # fmt: skip
API = [("cudaLaunchKernel", 61_000, 12_000.0), ("cudaStreamSynchronize", 1_000, 152_600.0)]
MEMORY = [("[CUDA memcpy Host-to-Device]", 2_000, 19_000.0)]


def _text(title: str, count: str, rows, name: str = "Name", old: bool = False) -> str:
    """One report in nsys's text layout: a header, a rule of dash groups, right-aligned figures with
    thousands separators, the name left-aligned last."""
    if old:
        columns = ["Time(%)", "Total Time (ns)", count, "Average", "Minimum", "Maximum", name]
    else:
        columns = [
            "Time (%)",
            "Total Time (ns)",
            count,
            "Avg (ns)",
            "Med (ns)",
            "Min (ns)",
            "Max (ns)",
            "StdDev (ns)",
            name,
        ]
    total = sum(k * avg for _, k, avg in rows)
    body = []
    for label, k, avg in rows:
        figures = [f"{100 * k * avg / total:.1f}", f"{k * avg:,.0f}", f"{k:,}", f"{avg:,.1f}"]
        figures += (
            [f"{avg:,.1f}", f"{avg * 0.9:,.0f}", f"{avg * 1.5:,.0f}"]
            if not old
            else [f"{avg * 0.9:,.0f}", f"{avg * 1.5:,.0f}"]
        )
        figures += [] if old else ["12.0"]
        body.append((figures, label))
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
        " " + "  ".join(f.rjust(w) for f, w in zip(figures, widths, strict=True)) + "  " + label
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


@pytest.mark.parametrize("old", [False, True], ids=["2024", "2021"])
def test_the_kernel_api_and_memory_reports_are_read_by_their_columns(tmp_path, old):
    text = "\n".join(
        [
            "Processing [report.sqlite] with [cuda_api_sum.py]...",
            _text("CUDA API Summary (cuda_api_sum)", "Num Calls", API, old=old),
            _text("CUDA GPU Kernel Summary (cuda_gpu_kern_sum)", "Instances", KERNELS, old=old),
            _text("CUDA GPU MemOps Summary (by Time)", "Count", MEMORY, name="Operation", old=old),
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
