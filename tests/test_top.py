"""top's batch screens read as procps's manual lays them out (diagnose/importers/top.py); figures our own."""

from __future__ import annotations

import pytest

from diagnose.importers import recognise
from diagnose.importers.base import Source
from diagnose.importers.top import TopImporter

SCREENS = """\
top - 10:00:00 up 12 days,  3:04,  2 users,  load average: 7.52, 6.10, 5.00
Tasks: 301 total,   9 running, 292 sleeping,   0 stopped,   0 zombie
%Cpu(s): 20.0 us, 15.0 sy,  0.0 ni, 25.0 id, 40.0 wa,  0.0 hi,  0.0 si,  0.0 st
MiB Mem :  15890.0 total,    210.0 free,  15000.0 used,    680.0 buff/cache
MiB Swap:   8192.0 total,   2192.0 free,   6000.0 used.    300.0 avail Mem

    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND
   4100 svc       20   0   30.1g  12.5g  20000 D 180.0  80.6  60:00.00 python -m serve
     49 root      20   0       0      0      0 R  66.0   0.0   2:23.56 kswapd0

top - 10:00:02 up 12 days,  3:04,  2 users,  load average: 7.80, 6.20, 5.05
Tasks: 301 total,  11 running, 290 sleeping,   0 stopped,   0 zombie
%Cpu(s): 18.0 us, 16.0 sy,  0.0 ni, 20.0 id, 46.0 wa,  0.0 hi,  0.0 si,  0.0 st
MiB Mem :  15890.0 total,    190.0 free,  15020.0 used,    680.0 buff/cache
MiB Swap:   8192.0 total,   1992.0 free,   6200.0 used.    280.0 avail Mem

    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND
   4100 svc       20   0   30.1g  12.6g  20000 D 150.0  81.2  60:03.00 python -m serve
"""

# Before procps 3.3.10: "Cpu(s):" with "%us" style, memory lines with k suffixes.
OLD = """\
top - 08:15:30 up 40 days,  1:00,  1 user,  load average: 1.00, 1.20, 1.10
Tasks: 120 total,   1 running, 119 sleeping,   0 stopped,   0 zombie
Cpu(s): 10.0%us,  5.0%sy,  0.0%ni, 80.0%id,  5.0%wa,  0.0%hi,  0.0%si,  0.0%st
Mem:  16331828k total, 15000000k used,  1331828k free,   200000k buffers
Swap:  8388604k total,  1000000k used,  7388604k free,  3000000k cached

  PID USER      PR  NI  VIRT  RES  SHR S %CPU %MEM    TIME+  COMMAND
 2000 app       20   0 10.0g 512m  10m S 99.0  3.2 100:00.00 java
"""


def _read(text: str, mtime: float = 1_800_000_000.0):
    return TopImporter().read(Source("top.txt", text, mtime))


def test_each_screen_is_a_system_row_and_its_tasks_process_rows():
    imported = _read(SCREENS)
    system, processes = imported.tables["system"], imported.tables["processes"]
    assert list(system["ts"].diff().dropna()) == [2.0]
    first = system.iloc[0]
    assert first["load1"] == 7.52 and first["procs_running"] == 9
    assert first["cpu_pct"] == pytest.approx(35.0) and first["cpu_system_pct"] == 15.0  # 100 - idle - I/O wait
    assert first["mem_total_bytes"] == pytest.approx(15890.0 * 2**20)
    assert list(system["swap_used_bytes"]) == [6000 * 2**20, 6200 * 2**20]
    serve = processes[processes["pid"] == 4100].iloc[0]
    assert serve["name"] == "python -m serve" and serve["cpu_pct"] == 180.0
    assert serve["rss_bytes"] == pytest.approx(12.5 * 2**30)
    assert len(processes) == 3


def test_the_older_layout_with_k_suffixes_is_read():
    imported = _read(OLD)
    row = imported.tables["system"].iloc[0]
    assert row["cpu_pct"] == pytest.approx(15.0) and row["swap_used_bytes"] == 1_000_000 * 1024
    assert row["mem_used_bytes"] == 15_000_000 * 1024
    assert imported.tables["processes"].iloc[0]["rss_bytes"] == 512 * 2**20


def test_a_screen_pasted_from_its_tasks_line_is_taken_at_the_files_time_and_said():
    imported = _read(SCREENS.split("\n", 1)[1].split("\ntop - ")[0])
    assert list(imported.tables["system"]["ts"]) == [1_800_000_000.0]
    assert any("without top's first line" in w for w in imported.warnings)


def test_top_is_claimed_by_its_summary_and_nothing_else_is():
    assert recognise(SCREENS).name == "top"
    pidstat = "10:00:01 AM   UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n" * 3
    importer = recognise(pidstat)
    assert importer is None or importer.name != "top"
