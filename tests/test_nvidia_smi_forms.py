"""The nvidia-smi forms people paste: the default table, -q, CSV with prompts and notes, dmon -o TD.

Each test reads a real sample and checks the figures it holds, not only that
something was read.
"""

from __future__ import annotations

import pandas as pd
import pytest

from diagnose.dump import load_dump
from tests.conftest import SHARED_DATA

FIELD = SHARED_DATA / "real-samples" / "field-2026-12" / "smi"
FORMATS = SHARED_DATA / "real-samples" / "formats"
pytestmark = pytest.mark.skipif(not FIELD.is_dir(), reason="../shared/data/real-samples is not here")
MIB = 2**20


def _load(path):
    return load_dump(str(path))


def _utc(epoch: float) -> str:
    return pd.Timestamp(epoch, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%S")


def test_nvidia_smi_q_gives_every_figure_the_rules_use_and_the_versions():
    dump = _load(FIELD / "05_query_q_a10.txt")
    gpu = dump.tables["gpu"].iloc[0]
    assert dump.importers[0]["importer"] == "nvidia-smi-q"
    assert gpu["gpu_name"] == "NVIDIA A10" and gpu["gpu"] == 0
    assert (gpu["mem_total_bytes"], gpu["mem_used_bytes"]) == (23028 * MIB, 1 * MIB)
    assert (gpu["util_pct"], gpu["sm_clock_mhz"], gpu["max_sm_clock_mhz"]) == (0, 210, 1695)
    assert (gpu["power_w"], gpu["power_limit_w"], gpu["default_power_limit_w"]) == (21.3, 150, 150)
    assert gpu["temp_c"] == 33 and gpu["throttle_reasons"] == "gpu_idle"
    assert _utc(gpu["ts"]) == "2025-01-22T04:28:41"
    assert dump.manifest.extra["environment"] == {"driver_version": "550.127.05", "cuda_version": "12.4"}


def test_nvidia_smi_q_of_eight_gpus_reads_eight_in_bus_order():
    gpu = _load(FIELD / "22_query_q_h100x8_535.txt").tables["gpu"]
    assert list(gpu["gpu"]) == list(range(8))
    assert gpu["mem_total_bytes"].notna().all() and gpu["util_pct"].notna().all()


def test_the_default_table_gives_gpus_processes_and_the_snapshot_time():
    dump = _load(FORMATS / "nvidia_smi_default" / "01.txt")
    gpu = dump.tables["gpu"].iloc[0]
    assert (gpu["mem_used_bytes"], gpu["mem_total_bytes"]) == (214 * MIB, 8192 * MIB)
    assert (gpu["temp_c"], gpu["power_w"], gpu["power_limit_w"], gpu["util_pct"]) == (40, 37, 250, 0)
    assert _utc(gpu["ts"]) == "2026-06-24T10:26:34"
    processes = dump.tables["gpu_processes"]
    assert list(processes["name"]) == ["/usr/bin/gnome-shell", "/usr/bin/Xwayland"]
    assert list(processes["mem_used_bytes"]) == [176 * MIB, 3 * MIB]


def test_a_default_table_of_eight_gpus_and_one_with_a_fan_error():
    assert len(_load(FIELD / "23_default_table_h100x8_550.txt").tables["gpu"]) == 8
    gpu = _load(FIELD / "24_default_table_err_fan_525.txt").tables["gpu"].iloc[0]
    assert (gpu["temp_c"], gpu["mem_used_bytes"]) == (38, 2021 * MIB)


def test_csv_with_the_command_pasted_above_reads_the_processes_under_the_real_header():
    dump = _load(FIELD / "19_compute_apps_vllm_enginecore.txt")
    processes = dump.tables["gpu_processes"]
    assert list(processes["pid"]) == [3858903, 3880364]
    assert list(processes["mem_used_bytes"]) == [6265 * MIB, 5530 * MIB]
    assert any("removed 1 shell prompt line" in w for w in dump.warnings)


def test_incident_notes_with_two_runs_give_two_timed_snapshots_and_processes_on_their_gpus():
    dump = _load(FIELD / "09_h200_incident_notes_mixed.md")
    gpu, processes = dump.tables["gpu"], dump.tables["gpu_processes"]
    assert sorted({_utc(t) for t in gpu["ts"]}) == ["2026-06-21T16:11:49", "2026-06-21T16:12:20"]
    assert len(gpu) == 16
    after = gpu[gpu["ts"] == gpu["ts"].max()].set_index("gpu")
    assert after.loc[2, "mem_used_bytes"] == 0 and after.loc[7, "mem_used_bytes"] == 58071 * MIB
    assert processes.loc[processes["pid"] == 1758887, "gpu"].unique().tolist() == [7]


def test_dmon_with_time_and_date_and_another_column_set():
    gpu = _load(FIELD / "13_dmon_TD_fb_bar1_ccpm.txt").tables["gpu"]
    assert (
        len(gpu) == 6 and gpu["mem_used_bytes"].iloc[0] == 239 * MIB and gpu["sm_clock_mhz"].iloc[0] == 1695
    )
    assert _utc(gpu["ts"].iloc[0]) == "2024-01-04T13:54:35"
