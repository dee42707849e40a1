"""sar and mpstat read as sysstat prints them (diagnose/importers/sar.py): each report by its header's names
(activity.c), one row an interval, the day from the banner and carried past midnight."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.sar import SarImporter

BANNER = "Linux 5.15.0-105-generic (gpu-node-1) \t06/07/2026 \t_x86_64_\t(64 CPU)\n\n"
MTIME = datetime(2026, 12, 7, tzinfo=UTC).timestamp()


def _system(text: str, tz: str | None = None):
    imported = SarImporter().read(Source("sar.txt", mend(text).text, MTIME), tz)
    return imported.tables["system"], imported.warnings


def _at(hour: int, minute: int, day: int = 7, second: int = 1) -> float:
    return datetime(2026, 6, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_sar_f_prints_each_report_over_the_whole_file_and_each_interval_makes_one_row():
    text = BANNER + (
        "11:40:01 PM     CPU     %user     %nice   %system   %iowait    %steal     %idle\n"
        "11:50:01 PM     all     62.51      0.00      9.75      2.25      0.00     25.49\n"
        "12:00:01 AM     all     71.02      0.00     11.13      3.61      0.00     14.24\n"
        "Average:        all     66.77      0.00     10.44      2.93      0.00     19.86\n"
        "\n"
        "11:40:01 PM   runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked\n"
        "11:50:01 PM        41      2310     38.12     36.90     35.41         0\n"
        "12:00:01 AM        58      2322     52.40     44.71     39.02         2\n"
        "Average:           50      2316     45.26     40.81     37.22         1\n"
        "\n"
        "11:40:01 PM  pswpin/s pswpout/s\n"
        "11:50:01 PM      0.00      0.00\n"
        "12:00:01 AM    812.40   1260.55\n"
    )
    system, warnings = _system(text)
    assert list(system["ts"]) == [_at(23, 50), _at(0, 0, day=8)]  # past midnight, each report alike
    first, second = system.iloc[0], system.iloc[1]
    assert first["cpu_pct"] == pytest.approx(100 - 25.49 - 2.25) and first["cpu_system_pct"] == 9.75
    assert (first["procs_running"], first["load1"]) == (41, 38.12)
    assert second["swap_in_per_s"] == pytest.approx(812.40 * 4096)  # pages of 4 KiB on x86_64
    assert second["swap_out_per_s"] == pytest.approx(1260.55 * 4096)
    assert not any("banner" in w for w in warnings)


def test_interactive_sar_repeats_each_header_every_interval_and_the_24_hour_clock_is_read():
    text = BANNER + "".join(
        f"10:00:0{s} CPU %usr %nice %sys %iowait %steal %irq %soft %guest %gnice %idle\n"
        f"10:00:0{s + 1} all 10.00 0.00 5.00 0.00 0.00 0.00 0.00 0.00 0.00 {85 - s}.00\n\n"
        f"10:00:0{s} proc/s cswch/s\n"
        f"10:00:0{s + 1} 12.00 {9000 + s}.00\n\n"
        for s in range(3)
    )
    system, _ = _system(text)
    assert list(system["ts"]) == [_at(10, 0, second=s) for s in (1, 2, 3)]
    assert list(system["cpu_pct"]) == [15.0, 16.0, 17.0]
    assert list(system["ctx_switches_per_s"]) == [9000.0, 9001.0, 9002.0]


def test_devices_and_interfaces_are_summed_and_the_block_report_comes_first():
    text = BANNER + (
        "10:00:01 AM       DEV       tps     rkB/s     wkB/s     dkB/s   areq-sz    aqu-sz     await     %util\n"
        "10:00:02 AM   nvme0n1     10.00    100.00    400.00      0.00     50.00      0.01      0.50      1.00\n"
        "10:00:02 AM   nvme1n1     10.00     50.00    200.00      0.00     50.00      0.01      0.50      1.00\n"
        "\n"
        "10:00:01 AM     IFACE   rxpck/s   txpck/s    rxkB/s    txkB/s   rxcmp/s   txcmp/s  rxmcst/s   %ifutil\n"
        "10:00:02 AM        lo     50.00     50.00   9000.00   9000.00      0.00      0.00      0.00      0.00\n"
        "10:00:02 AM      eth0    900.00    800.00   1200.00    300.00      0.00      0.00      0.00      1.00\n"
        "10:00:02 AM      eth1    100.00    100.00     20.00     10.00      0.00      0.00      0.00      0.00\n"
    )
    (row,) = _system(text)[0].to_dict("records")
    assert row["disk_read_bytes_per_s"] == 150 * 1024 and row["disk_write_bytes_per_s"] == 600 * 1024
    assert row["net_rx_bytes_per_s"] == 1220 * 1024 and row["net_tx_bytes_per_s"] == 310 * 1024
    blocks = text + (
        "\n10:00:01 AM       tps      rtps      wtps      dtps   bread/s   bwrtn/s   bdscd/s\n"
        "10:00:02 AM     20.00     10.00     10.00      0.00    300.00   1200.00      0.00\n"
    )
    (row,) = _system(blocks)[0].to_dict("records")
    assert row["disk_read_bytes_per_s"] == 300 * 512 and row["disk_write_bytes_per_s"] == 1200 * 512


def test_memory_gives_used_and_total_and_a_report_not_read_is_passed_over_whole():
    text = BANNER + (
        "10:00:01 AM kbmemfree   kbavail kbmemused  %memused kbbuffers  kbcached  kbcommit   %commit  kbactive"
        "   kbinact   kbdirty\n"
        "10:00:02 AM   1048576   4194304  31457280     93.75     10240   2097152  40000000    119.21  20000000"
        "   9000000      1024\n"
        "\n"
        "10:00:01 AM  pgpgin/s pgpgout/s   fault/s  majflt/s  pgfree/s pgscank/s pgscand/s pgsteal/s    %vmeff\n"
        "10:00:02 AM   9000.00  12000.00   5000.00     80.00   9000.00   4000.00      0.00   3900.00     97.50\n"
    )
    (row,), warnings = (lambda s: (s[0].to_dict("records"), s[1]))(_system(text))
    assert row["mem_used_bytes"] == 31457280 * 1024
    assert row["mem_total_bytes"] == pytest.approx(31457280 * 1024 / 0.9375)
    assert set(row) == {"ts", "mem_used_bytes", "mem_total_bytes"}  # -B's rows are not -r's
    assert any("passed over 1 report" in w for w in warnings)


def test_mpstat_gives_the_all_row_and_a_paste_without_banner_says_whose_date():
    text = (
        "$ mpstat -P ALL 1\n"
        "03:50:09     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
        "03:50:10     all   13.25    0.00   23.75    0.00    0.00   48.25    0.00    0.00    0.00   14.75\n"
        "03:50:10       0   14.00    0.00   28.00    0.00    0.00   49.00    0.00    0.00    0.00    9.00\n"
        "03:50:10       1   11.00    0.00   19.00    0.00    0.00   46.00    0.00    0.00    0.00   24.00\n"
    )
    assert recognise(mend(text).text).name == "sar"
    system, warnings = _system(text)
    assert list(system["cpu_pct"]) == [85.25] and list(system["cpu_system_pct"]) == [23.75]
    assert any("taken on the file's date" in w for w in warnings)


def test_pidstat_vmstat_and_sars_lookalikes_are_not_claimed():
    pidstat = "14:05:26      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n"
    assert (
        recognise(
            pidstat + "14:05:27     1010    219296  100.00   16.00    0.00    0.00  100.00     1  pigz\n"
        ).name
        == "pidstat"
    )
    assert SarImporter().recognise("CPU %usr %nice %sys %idle\nall 1 2 3 4\n") is None  # no time: no report
    assert SarImporter().recognise("see 10:00:01 CPU %user in the output\n") is None


def test_a_swapping_host_in_sar_is_a_swapping_fact(tmp_path):
    rows = "".join(
        f"10:{m:02d}:01 AM  {800.0 * (m % 2):8.2f} {1200.0 * (m % 2):9.2f}\n" for m in range(1, 31)
    )
    (tmp_path / "sar-W.txt").write_text(BANNER + "10:00:01 AM  pswpin/s pswpout/s\n" + rows)
    facts = compute_facts(load_dump(str(tmp_path)))
    assert facts.number("host.swapping_share") == pytest.approx(0.5)
