"""rocm-smi's Concise Info table read by its cells' units, in the layouts rocm_smi.py printed across ROCm."""

from __future__ import annotations

from diagnose.importers.base import Source
from diagnose.importers.rocm_smi import RocmSmiImporter

OLD = """========================ROCm System Management Interface========================
================================= Concise Info =================================
GPU  Temp (DieEdge)  AvgPwr  SCLK     MCLK     Fan     Perf  PwrCap  VRAM%  GPU%
0    61.0c           187.0W  1502Mhz  1200Mhz  40.78%  auto  220.0W   92%   100%
1    34.0c           N/A     800Mhz   350Mhz   0%      auto  Unsupported    0%   0%
================================================================================
============================= End of ROCm SMI Log ==============================
"""
NEW = """============================================ ROCm System Management Interface ============================================
====================================================== Concise Info ======================================================
Device  Node  IDs              Temp    Power  Partitions          SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%
              (DID,     GUID)  (Edge)  (Avg)  (Mem, Compute, ID)
==========================================================================================================================
0       2     0x740f,   12345  40.0°C  42.0W  N/A, N/A, 0         800Mhz  1600Mhz  0%   auto  500.0W  0%     0%
==========================================================================================================================
"""


def _gpu(text: str):
    return RocmSmiImporter().read(Source("rocm-smi.txt", text, 1_700_000_000.0)).tables["gpu"]


def test_the_old_layout_by_its_units_with_missing_power_and_cap_left_out():
    gpu = _gpu(OLD)
    first, second = gpu.iloc[0], gpu.iloc[1]
    assert (first["gpu"], first["temp_c"], first["power_w"], first["power_limit_w"]) == (
        0,
        61.0,
        187.0,
        220.0,
    )
    assert (first["sm_clock_mhz"], first["util_pct"]) == (1502.0, 100.0)
    assert second["sm_clock_mhz"] == 800.0 and second.isna()[["power_w", "power_limit_w"]].all()


def test_rocm_6s_layout_with_ids_and_partitions_between_the_figures():
    row = _gpu(NEW).iloc[0]
    assert (row["gpu"], row["temp_c"], row["power_w"], row["sm_clock_mhz"]) == (0, 40.0, 42.0, 800.0)
    assert (row["power_limit_w"], row["util_pct"], row["ts"]) == (500.0, 0.0, 1_700_000_000.0)


def test_a_table_of_other_columns_is_not_rocm_smi():
    assert not RocmSmiImporter().recognise("GPU  Temp  Power  Util\n0  40C  42W  3%\n")
