"""nvprof's trace modes read as its documentation lays them out (diagnose/importers/nvprof_trace.py): cells
by the header's columns, times and sizes in their units, kernels joined to their launches by id."""

from __future__ import annotations

import math

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.nvprof_trace import NvprofTraceImporter

# The CUDA 7 layout (no memory types), columns as wide as their widest cell
GPU_TRACE_7 = """\
==27706== Profiling application: matrixMul
==27706== Profiling result:
   Start  Duration            Grid Size      Block Size     Regs*    SSMem*    DSMem*      Size  Throughput           Device   Context    Stream  Name
133.81ms  135.78us                    -               -         -         -         -  409.60KB  3.0167GB/s  GeForce GT 640M         1         2  [CUDA memcpy HtoD]
134.90ms  3.7037ms            (20 10 1)       (32 32 1)        29  8.1920KB        0B         -           -  GeForce GT 640M         1         2  void matrixMulCUDA<int=32>(float*, float*, float*, int, int) [94]
1.25089s  248.13us                    -               -         -         -         -  819.20KB  3.3015GB/s  GeForce GT 640M         1         2  [CUDA memcpy DtoH]
"""
API_TRACE = """\
==27722== Profiling result:
   Start  Duration  Name
108.38ms  6.2130us  cuDeviceGetCount
134.88ms  23.737us  cudaLaunch (void matrixMulCUDA<int=32>(float*, float*, float*, int, int) [94])
134.91ms  6.6290ms  cudaEventSynchronize
"""


def _read(text: str):
    return NvprofTraceImporter().read(Source("nvprof.txt", mend(text).text, 0.0))


def test_the_gpu_trace_by_its_columns_sizes_in_decimal_units_and_launch_ids():
    assert recognise(mend(GPU_TRACE_7).text).name == "nvprof-trace"
    activity = _read(GPU_TRACE_7).tables["gpu_activity"]
    assert list(activity["kind"]) == ["memcpy", "kernel", "memcpy"]
    assert list(activity["ts"]) == [133_810.0, 134_900.0, 1_250_890.0]  # microseconds from the start
    assert activity["dur_us"].tolist() == pytest.approx([135.78, 3703.7, 248.13])
    assert activity["bytes"].iloc[0] == 409_600 and math.isnan(activity["bytes"].iloc[1])
    kernel = activity.iloc[1]
    assert kernel["name"] == "void matrixMulCUDA<int=32>(float*, float*, float*, int, int)"
    assert kernel["correlation"] == 94 and kernel["stream"] == 2 and kernel["gpu"] == 0
    assert activity["pinned"].isna().all()  # before CUDA 8 the trace does not say the memory's type
    assert list(activity["copy_kind"].iloc[[0, 2]]) == ["HtoD", "DtoH"]


def test_the_api_trace_after_its_result_line_joins_its_launches_by_id():
    calls = _read(API_TRACE).tables["host_calls"]
    assert list(calls["name"]) == ["cuDeviceGetCount", "cudaLaunch", "cudaEventSynchronize"]
    assert calls["correlation"].iloc[1] == 94 and math.isnan(calls["correlation"].iloc[2])
    assert calls["dur_us"].iloc[2] == pytest.approx(6629.0)
    assert (
        NvprofTraceImporter().recognise("   Start  Duration  Name\n1.0ms  2.0us  foo\n") is None
    )  # not nvprof's


def test_a_step_of_pageable_copies_is_found_from_the_trace(tmp_path, report_of):
    header = (
        "   Start  Duration            Grid Size      Block Size     Regs*    SSMem*    DSMem*      Size  Throughput"
        "  SrcMemType  DstMemType           Device   Context    Stream  Name\n"
    )
    rows = []
    for step in range(30):
        start = 100.0 + step * 3.0  # ms: a 2 ms pageable copy, then a 0.6 ms kernel
        rows.append(
            f"{start:.2f}ms  2.0000ms                    -               -         -         -         -  "
            f"8.0000MB  4.0000GB/s    Pageable      Device  Tesla T4                 1         7  [CUDA memcpy HtoD]"
        )
        rows.append(
            f"{start + 2.1:.2f}ms  600.00us           (1024 1 1)       (256 1 1)        32        0B        0B"
            f"         -           -           -           -  Tesla T4                 1         7  gemm_kernel [{step}]"
        )
    (tmp_path / "trace.txt").write_text("==1== Profiling result:\n" + header + "\n".join(rows) + "\n")
    top = report_of(tmp_path)["hypotheses"][0]
    assert top["id"] == "pageable-host-copies" and top["score"] >= 0.5
