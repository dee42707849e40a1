"""pidstat (sysstat) read as pidstat.c prints it: its header's columns, -t's threads, any locale's clock."""

from __future__ import annotations

from datetime import UTC, datetime

from diagnose.dump import load_dump
from diagnose.importers.base import Source
from diagnose.importers.pidstat import PidstatImporter

THREADS = """Linux 5.15.0-91-generic (gpu-node-3) \t12/07/26 \t_x86_64_\t(64 CPU)

02:05:26 PM   UID      TGID       TID    %usr %system  %guest   %wait    %CPU   CPU  Command
02:05:27 PM  1010    219296         -  100.00   16.00    0.00    0.00  116.00     1  python3
02:05:27 PM  1010         -    219296    1.00   14.00    0.00    2.00   15.00     1  |__python3
02:05:27 PM  1010         -    219298   99.00    1.00    0.00   30.00  100.00    25  |__tokenizer
02:05:27 PM  1010         -    219299    1.00    0.00    0.00    0.00    1.00    55  |__python3

Average:      UID      TGID       TID    %usr %system  %guest   %wait    %CPU   CPU  Command
Average:     1010    219296         -   99.00   14.00    0.00    0.00  113.00     -  python3
"""


def _read(text: str, mtime: float = 0.0):
    return PidstatImporter().read(Source("pidstat.txt", text, mtime))


def test_threads_give_their_process_its_busiest_thread_and_their_summed_wait_for_a_core():
    rows = _read(THREADS).tables["processes"]
    assert len(rows) == 1  # the threads are the process's; Average is no sample
    row = rows.iloc[0]
    assert (row["pid"], row["name"], row["cpu_pct"]) == (219296, "python3", 116.0)
    assert (row["max_thread_cpu_pct"], row["run_queue_wait_pct"]) == (100.0, 32.0)
    assert row["ts"] == datetime(2026, 12, 7, 14, 5, 27, tzinfo=UTC).timestamp()  # the banner's day, PM


def test_each_report_of_one_interval_fills_the_same_row_and_a_locales_clock_is_read():
    text = (
        "14时05分26秒   UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n"
        "14时05分27秒  1010    219296  100.00   16.00    0.00    5.00  100.00     1  pigz\n"
        "\n"
        "14时05分26秒   UID       PID  minflt/s  majflt/s     VSZ     RSS   %MEM  Command\n"
        "14时05分27秒  1010    219296     12.00      0.00   12340    2048   0.01  pigz\n"
        "\n"
        "14时05分26秒   UID       PID   cswch/s nvcswch/s  Command\n"
        "14时05分27秒  1010    219296    310.00     42.00  pigz\n"
    )
    day = datetime(2026, 3, 2, tzinfo=UTC)
    result = _read(text, mtime=day.timestamp())
    row = result.tables["processes"].iloc[0]
    assert row["ts"] == datetime(2026, 3, 2, 14, 5, 27, tzinfo=UTC).timestamp()
    assert (row["cpu_pct"], row["rss_bytes"], row["minor_faults_per_s"]) == (100.0, 2048 * 1024, 12.0)
    assert (row["ctx_switches_voluntary_per_s"], row["ctx_switches_involuntary_per_s"]) == (310.0, 42.0)
    assert "run_queue_wait_pct" not in row  # a process row's %wait is its main thread's alone
    assert any("file's date" in w for w in result.warnings)


def test_the_clock_passing_midnight_moves_to_the_next_day():
    text = (
        "11:59:59 PM   UID       PID    %usr %system  %guest    %CPU   CPU  Command\n"
        "11:59:59 PM     0      4242   50.00    0.00    0.00   50.00     3  server\n"
        "12:00:00 AM     0      4242   60.00    0.00    0.00   60.00     3  server\n"
    )
    ts = list(_read(text).tables["processes"]["ts"])
    assert ts[1] - ts[0] == 1.0


def test_a_pidstat_paste_in_a_folder_is_recognised_and_read(tmp_path):
    (tmp_path / "pidstat.txt").write_text(THREADS)
    dump = load_dump(str(tmp_path))
    assert dump.tables["processes"]["max_thread_cpu_pct"].iloc[0] == 100.0


def test_a_table_with_uid_and_pid_but_none_of_pidstats_figures_is_not_pidstat():
    assert not PidstatImporter().recognise("10:00:00  UID  PID  NAME  Command\n")
