"""iostat read as sysstat prints it (diagnose/importers/iostat.py): avg-cpu and the Device report an interval,
times from -t or the command's interval, devices stacked on others left out of the sums."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from diagnose.dump import load_dump
from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.iostat import IostatImporter

MTIME = 1_780_000_000.0


def _read(text: str, tz: str | None = None):
    mended = mend(text)
    imported = IostatImporter().read(Source("iostat.txt", mended.text, MTIME, commands=mended.commands), tz)
    return imported.tables.get("system"), imported.warnings


def _report(user: float, iowait: float, idle: float, devices: str) -> str:
    return (
        "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
        f"          {user:.2f}    0.00    2.00   {iowait:.2f}    0.00   {idle:.2f}\n\n"
        "Device:            tps    kB_read/s    kB_wrtn/s    kB_read    kB_wrtn\n" + devices + "\n"
    )


def test_the_basic_report_before_11_5_after_a_prompt_its_interval_and_the_since_boot_report_left_out():
    devices = "sda              10.00       100.00       200.00       1000       2000\n"
    stacked = "dm-0             10.00       100.00       200.00       1000       2000\n"
    text = (
        "root@db-1:~# iostat 5\n"
        + _report(5.0, 1.0, 92.0, devices)  # since boot
        + _report(30.0, 20.0, 48.0, devices + stacked)
        + _report(35.0, 25.0, 38.0, devices + stacked)
    )
    assert recognise(mend(text).text).name == "iostat"
    system, warnings = _read(text)
    assert list(system["ts"]) == [MTIME - 5, MTIME]
    assert list(system["cpu_pct"]) == [32.0, 37.0]  # 100 - idle - iowait
    assert list(system["disk_read_bytes_per_s"]) == [100 * 1024] * 2  # dm-0 sits on sda: not twice
    assert list(system["disk_write_bytes_per_s"]) == [200 * 1024] * 2
    assert any("since boot" in w for w in warnings) and any("the command's interval" in w for w in warnings)


def test_t_stamps_in_either_layout_and_a_cut_paste_keeps_its_first_report():
    device = "Device            r/s     rMB/s   %util\nnvme0n1         43.00      2.71   4.00\n"
    iso = (
        "2026-06-07T10:00:01+0200\n"
        + _report(5.0, 1.0, 92.0, "").split("\n\nDevice")[0]
        + "\n\n"
        + device
        + "\n"
        "2026-06-07T10:00:02+0200\n" + device
    )
    system, _ = _read(iso)
    expected = datetime(2026, 6, 7, 8, 0, 1, tzinfo=UTC).timestamp()
    assert list(system["ts"]) == [expected, expected + 1]  # no banner: the first report is kept
    assert system["disk_read_bytes_per_s"].iloc[0] == pytest.approx(2.71 * 2**20)
    assert system["cpu_pct"].iloc[0] == 7.0 and system["cpu_pct"].isna().iloc[1]
    local = "06/07/2026 10:00:01 PM\n" + device
    (row,) = _read(local, tz="Asia/Shanghai")[0].to_dict("records")
    assert row["ts"] == datetime(2026, 6, 7, 14, 0, 1, tzinfo=UTC).timestamp()


def test_a_folder_with_iostat_has_the_hosts_io_wait_as_busy_cpu_left_out(tmp_path):
    (tmp_path / "iostat.txt").write_text(_report(10.0, 50.0, 38.0, "sda  1.00  2.00  3.00  4  5\n") * 2)
    system = load_dump(str(tmp_path)).tables["system"]
    assert list(system["cpu_pct"]) == [12.0, 12.0]
    assert IostatImporter().recognise("Device  Model  Serial\nsda  X  1\n") is None  # not iostat's names
