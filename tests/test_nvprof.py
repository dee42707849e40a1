"""nvprof's summary read as its documentation lays it out: both layouts, each row's figures checked."""

from __future__ import annotations

import pytest

from diagnose.dump.reader import load_dump
from diagnose.importers import IMPORTERS, recognise
from diagnose.importers.base import Source
from diagnose.importers.nvprof import NvprofImporter

# CUDA 9 and later: a Type column labels each section's first row.
TYPED = """\
==2811== NVPROF is profiling process 2811, command: python serve.py
==2811== Profiling application: python serve.py
==2811== Profiling result:
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
 GPU activities:   61.20%  1.22400s     40000  30.600us  29.100us  41.000us  volta_sgemm_128x64_nn
                   30.00%  600.00ms    200000  3.0000us  2.1000us  9.0000us  void elementwise_kernel<float>(float*, int)
                    8.00%  160.00ms      2000  80.000us  75.000us  120.00us  [CUDA memcpy HtoD]
                    0.80%  16.000ms      2000  8.0000us  7.0000us  11.000us  [CUDA memset]
      API calls:   70.00%  2.10000s    242000  8.6776us  3.1000us  1.2000ms  cudaLaunchKernel
                   25.00%  750.00ms      2000  375.00us  80.000us  2.0000ms  cudaMemcpy
                    5.00%  150.00ms         3  50.000ms  10.000ms  100.00ms  cudaMalloc
==2811== Unified Memory profiling result:
Device "Tesla V100-SXM2-16GB (0)"
   Count  Avg Size  Min Size  Max Size  Total Size  Total Time  Name
      12  170.67KB  4.0000KB  0.9961MB  2.000000MB  230.0000us  Host To Device
"""

# Before CUDA 9: each section under its own "==PID== ..." line and header.
UNTYPED = """\
==1234== Profiling result:
Time(%)      Time     Calls       Avg       Min       Max  Name
 64.54%  1.3011ms         2  650.55us  649.18us  651.91us  [CUDA memcpy HtoD]
 35.46%  714.80us         1  714.80us  714.80us  714.80us  add(int, float*, float*)

==1234== API calls:
Time(%)      Time     Calls       Avg       Min       Max  Name
 97.06%  243.56ms         3  81.186ms  5.2990us  243.55ms  cudaMalloc
  2.94%  7.3800ms         1  7.3800ms  7.3800ms  7.3800ms  cudaLaunch
"""


def _read(text: str):
    return NvprofImporter().read(Source("nvprof.txt", text, 0.0))


def test_each_section_gives_its_kind_and_its_time_in_microseconds_on_the_right_side():
    table = _read(TYPED).tables["op_summary"].set_index("name")
    assert table.loc["volta_sgemm_128x64_nn", "kind"] == "kernel"
    assert table.loc["volta_sgemm_128x64_nn", "self_device_us"] == pytest.approx(1_224_000)
    assert table.loc["[CUDA memcpy HtoD]", "kind"] == "memcpy"
    assert table.loc["[CUDA memset]", "kind"] == "memset"
    assert table.loc["cudaLaunchKernel", "kind"] == "runtime"
    assert table.loc["cudaLaunchKernel", "self_host_us"] == pytest.approx(2_100_000)
    assert table.loc["cudaLaunchKernel", "calls"] == 242000
    assert "Host To Device" not in table.index  # the Unified Memory table is another grammar


def test_the_old_layout_reads_each_section_under_its_own_header():
    table = _read(UNTYPED).tables["op_summary"].set_index("name")
    assert table.loc["add(int, float*, float*)", "self_device_us"] == pytest.approx(714.80)
    assert table.loc["cudaMalloc", "kind"] == "runtime"
    assert table.loc["cudaLaunch", "self_host_us"] == pytest.approx(7380)


def test_a_row_whose_figures_disagree_is_left_out_and_said():
    # 5 calls of 1 ms cannot total 50 ms: not a summary's row
    text = TYPED.replace("5.00%  150.00ms         3  50.000ms", "5.00%  150.00ms         5  50.000ms")
    imported = _read(text)
    assert "cudaMalloc" not in set(imported.tables["op_summary"]["name"])
    assert any("figures disagree" in w for w in imported.warnings)


def test_the_summary_is_recognised_by_its_own_grammar_and_nothing_else_claims_it():
    importer = recognise(TYPED)
    assert importer is not None and importer.name == "nvprof"
    assert recognise(UNTYPED).name == "nvprof"
    assert not NvprofImporter().recognise("Time(%) Time Calls Avg Min Max Name\n")
    assert any(isinstance(i, NvprofImporter) for i in IMPORTERS)


def test_a_pasted_summary_gives_the_trace_facts_a_summary_carries(tmp_path, report_of):
    (tmp_path / "nvprof.log").write_text(TYPED, encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert len(dump.traces["op_summary"]) == 7
    facts = report_of(tmp_path)["facts"]
    assert facts["trace.kernels"]["value"] == 240000  # the copies and memsets are not kernels
    assert facts["trace.launches"]["value"] == 242000
