"""vmstat read as procps prints it (diagnose/importers/vmstat.py): columns by the header's names, the first
row (averages since boot) left out, units and times as the command line and -t say."""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.importers import recognise
from diagnose.importers.base import Source
from diagnose.importers.vmstat import VmstatImporter

HEADER = (
    "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"
    " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n"
)
SWAPPING = (
    "$ vmstat 2\n"
    + HEADER
    + " 1  0 102400 300000  10000 900000    3    5    40    60  300  500  5  2 92  1  0\n"  # since boot
    + " 9  4 512000  40000   2000  90000 8000 12000  9000 14000 4000 9000 20 15 25 40  0\n"
    + "12  6 640000  30000   1800  80000 9500 15000 11000 16000 4200 9900 18 17 20 45  0\n"
)


def _system(text: str, mtime: float = 1_800_000_000.0, tz: str | None = None):
    imported = VmstatImporter().read(Source("vmstat.txt", text, mtime), tz)
    return imported.tables["system"], imported.warnings


def test_a_swapping_host_reads_as_the_recorder_writes_it_and_the_since_boot_row_is_left_out():
    system, warnings = _system(SWAPPING)
    assert len(system) == 2 and any("averages since boot" in w for w in warnings)
    first = system.iloc[0]
    assert first["swap_in_per_s"] == 8000 * 1024 and first["swap_out_per_s"] == 12000 * 1024
    assert first["swap_used_bytes"] == 512000 * 1024 and first["procs_running"] == 9
    assert first["disk_write_bytes_per_s"] == 14000 * 1024 and first["ctx_switches_per_s"] == 9000
    assert first["cpu_pct"] == 35 and first["cpu_system_pct"] == 15  # 100 - idle - I/O wait
    assert list(system["ts"]) == [1_800_000_000.0 - 2, 1_800_000_000.0]  # the command line's delay


def test_the_timestamp_option_and_its_zone_date_the_rows_and_units_follow_its_s_option():
    text = (
        "vmstat -t -S M 5\n"
        "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu----- -----timestamp-----\n"
        " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st                 UTC\n"
        " 1  0    100   3000    100    900    0    0    40    60  300  500  5  2 92  1  0 2026-03-01 10:00:00\n"
        " 2  0    100   2990    100    900    1    0    40    60  300  500  5  2 92  1  0 2026-03-01 10:00:05\n"
    )
    system, warnings = _system(text, tz=None)
    (row,) = system.to_dict("records")
    assert (
        row["ts"] == 1_772_359_205.0
        and row["swap_in_per_s"] == 2**20
        and row["swap_used_bytes"] == 100 * 2**20
    )
    assert any("-S" in w for w in warnings)


def test_the_delay_of_a_command_typed_after_a_prompt_still_times_the_rows(tmp_path):
    # mending takes the prompt line off the text and keeps its command for the importer
    (tmp_path / "vmstat.txt").write_text(SWAPPING.replace("$ vmstat 2", "root@gpu-3:~# vmstat -S k 2"))
    system = load_dump(str(tmp_path)).tables["system"]
    assert system["ts"].diff().dropna().tolist() == [2.0]
    assert system["swap_in_per_s"].iloc[0] == 8000 * 1000  # -S k: thousands of bytes


def test_a_header_repeated_every_screen_leaves_no_further_row_out_and_rows_without_a_delay_are_said():
    body = " 0  0      0 300000  10000 900000    0    0     0     0   30   40  1  1 98  0  0\n"
    system, warnings = _system(HEADER + body * 3 + HEADER + body * 2)
    assert len(system) == 4
    assert any("one second apart" in w for w in warnings)


def test_a_swapping_dump_gives_the_swap_facts(tmp_path, report_of):
    (tmp_path / "vmstat.txt").write_text(SWAPPING, encoding="utf-8")
    facts = report_of(tmp_path)["facts"]
    assert facts["host.swapping_share"]["value"] == 1.0
    assert facts["host.swap_traffic_per_s.p95"]["value"] > 20_000_000


def test_only_vmstats_header_is_claimed():
    assert recognise(SWAPPING).name == "vmstat"
    free = "              total        used        free      shared  buff/cache   available\nMem:  16 8 4 1 4 7\n"
    importer = recognise(free)
    assert importer is None or importer.name != "vmstat"


@pytest.mark.parametrize("extra", ["gu", ""])
def test_procps_4s_guest_column_is_read_by_name(extra):
    header = HEADER.replace(" st\n", f" st {extra}\n") if extra else HEADER
    row = " 3  0      0 300000  10000 900000    0    0     0     0   30   40 10 5 85  0  0" + (
        " 0" if extra else ""
    )
    system, _ = _system(header + row + "\n" + row + "\n")
    assert list(system["cpu_pct"]) == [15.0]
