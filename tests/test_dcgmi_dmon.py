"""dcgmi dmon read as DCGM's DeviceMonitor.cpp prints it (diagnose/importers/dcgmi_dmon.py): fields by their
short names (dcgm_fields.cpp), in the gpu table's columns and units as dcgm-exporter's catalogue says."""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.dcgmi_dmon import DcgmiDmonImporter

MTIME = 1_780_000_000.0


def _read(text: str):
    mended = mend(text)
    imported = DcgmiDmonImporter().read(Source("dmon.txt", mended.text, MTIME, commands=mended.commands))
    return imported.tables.get("gpu"), imported.warnings


def test_dcgm_2s_layout_its_units_and_the_command_lines_delay():
    text = (
        "$ dcgmi dmon -e 203,1002,252,254 -d 500\n"
        "# Entity  GPUTL  SMACT  FBUSD  FBTTL\n"
        "      Id                  MB     MB\n"
        "    GPU 0     41  0.402  61234  81559\n"
        "    GPU 0     43  0.431  61240  81559\n"
    )
    assert recognise(mend(text).text).name == "dcgmi-dmon"
    gpu, warnings = _read(text)
    assert list(gpu["util_pct"]) == [41.0, 43.0]
    assert list(gpu["sm_active_pct"]) == pytest.approx([40.2, 43.1])  # a ratio in DCGM, a share here
    assert gpu["mem_used_bytes"].iloc[0] == 61234 * 2**20 and gpu["mem_total_bytes"].iloc[0] == 81559 * 2**20
    assert list(gpu["ts"]) == [MTIME - 0.5, MTIME]
    assert any("its -d of 500 ms" in w for w in warnings)


def test_only_gpu_rows_na_is_unknown_a_repeated_header_and_unread_fields_are_said():
    header = "#Entity           GPUTL      TENSO      POWER\nID                                     W\n"
    text = (
        header
        + "GPU 0             90         0.311      N/A\n"
        + "GPU-I 1           45         0.150      N/A\n"
        + header
        + "GPU 0             92         0.322      305.5\n"
    )
    gpu, warnings = _read(text)
    assert list(gpu["gpu"]) == [0, 0] and list(gpu["util_pct"]) == [90.0, 92.0]
    assert gpu["power_w"].isna().tolist() == [True, False]
    assert any("1 field not read (TENSO)" in w for w in warnings)
    assert any("dcgmi's default -d of 1000 ms" in w for w in warnings)


def test_an_error_after_the_header_is_no_sample_and_no_other_output_is_claimed():
    failed = "# Entity  TENSO\n      Id\nError setting watches. Result: The third-party Profiling module returned an error\n"
    assert _read(failed)[0] is None
    pmon = "# gpu   pid  type  sm  mem  enc  dec  command\n# Idx     #   C/G   %    %    %    %  name\n"
    assert DcgmiDmonImporter().recognise(pmon) is None
    assert DcgmiDmonImporter().recognise("#Entity GPUTL\nGPU 0 12\n") is None  # no units line: not dmon's


def test_clock_event_reasons_in_dmon_are_the_throttle_facts(tmp_path):
    rows = "".join(
        f"GPU 0             95         {1410 if i % 2 else 1005}       1980       {0 if i % 2 else 4}\n"
        for i in range(20)
    )
    (tmp_path / "dmon.txt").write_text(
        "#Entity           GPUTL      SMCLK      SMMAX      DVCCTR\nID\n" + rows
    )
    facts = compute_facts(load_dump(str(tmp_path)))
    assert facts.number("gpu.throttled_share") == pytest.approx(0.5)
    assert "power" in str(facts.get("gpu.throttle_reason")).lower()
