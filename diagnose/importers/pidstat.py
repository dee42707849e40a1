"""``pidstat`` as pasted (sysstat) -> the ``processes`` table.

Its layout is pidstat.c's (sysstat 9 to 12.7): an optional banner
(``Linux 5.15.0 (host)  12/07/26  _x86_64_  (64 CPU)``), then for each interval a header and one row
per task, each starting with the interval's time as the locale prints it (``14:05:27``,
``02:05:27 PM``, ``14时05分27秒``); ``Average:`` rows close the paste. The header names the columns,
in the order of the reports asked for (``-u``, ``-r``, ``-w``, ``-v``, ...), each report's block with
a header of its own:

    14:05:26      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command
    14:05:27     1010    219296  100.00   16.00    0.00    0.00  100.00     1  pigz

With ``-t`` a task is ``TGID TID``: its process's row (``TID`` ``-``) and then its threads' (``TGID``
``-``, the command ``|__name``). What a row gives, by the header's names:

- ``%CPU`` (100 = one core, unless ``-I`` divided it by the CPUs): ``cpu_pct``; with ``-t``, the
  busiest thread's is the process's ``max_thread_cpu_pct``;
- ``%wait`` (the task's time runnable but waiting for a CPU, since sysstat 12.5): summed over a
  process's threads with ``-t``, its ``run_queue_wait_pct``; a process row alone reads the main
  thread's scheduler statistics only, so it is not used;
- ``RSS`` (kB): ``rss_bytes``; ``minflt/s``: ``minor_faults_per_s``;
- ``cswch/s`` and ``nvcswch/s``: ``ctx_switches_voluntary_per_s`` and
  ``ctx_switches_involuntary_per_s``; ``threads`` (``-v``): ``num_threads``.

The rows' day and clock are read as every sysstat tool prints them (sysstat_clock.py); the clock is
the host's, read in ``--tz``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, header_claim, local_epoch, zone_note
from diagnose.importers.sysstat_clock import RowClock, clock

# The header: the time, the task's id columns, at least one of pidstat's figures, and Command last.
_ID = r"(?:UID|USER)\s+(?:PID|TGID\s+TID)"
_FIGURES = ("%usr", "%user", "%CPU", "minflt/s", "cswch/s", "kB_rd/s", "threads", "StkSize", "usr-ms")
_HEADER = re.compile(rf"^(?P<time>.*?)\s*\b{_ID}\s+(?P<columns>.*?)\s+Command\s*$")
_COLUMNS = {
    "%CPU": "cpu_pct",
    "minflt/s": "minor_faults_per_s",
    "cswch/s": "ctx_switches_voluntary_per_s",
    "nvcswch/s": "ctx_switches_involuntary_per_s",
    "threads": "num_threads",
}


class PidstatImporter(Importer):
    name = "pidstat"
    description = (
        "`pidstat` (sysstat): each task's CPU, run-queue wait, memory, faults and context switches a "
        "second, with -t its busiest thread"
    )

    def recognise(self, head: str) -> Claim | None:
        return header_claim(head, _header)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows_clock = RowClock(datetime.fromtimestamp(source.mtime, UTC).date())
        columns: list[str] | None = None
        clock_words = 0
        rows: dict[tuple[float, int], dict] = {}
        threads: dict[tuple[float, int], list[tuple[float | None, float | None]]] = {}
        process: int | None = None  # the TGID the thread rows that follow belong to
        for raw in source.lines():
            line = raw.strip()
            if rows_clock.banner(line):
                continue
            if header := _header(line):
                clock_words = len(header["time"].split())
                columns = [*_ids(line), *header["columns"].split()]
                continue
            if columns is None or not line:
                continue
            words = line.split()
            when = clock(" ".join(words[:clock_words])) if clock_words else None
            if when is None:  # "Average:" (in any language), a note, a wrapped command
                continue
            cells = words[clock_words : clock_words + len(columns)]
            if len(cells) < len(columns):
                continue
            ts = local_epoch(pd.Timestamp(rows_clock.at(when)), tz)
            by_name = dict(zip(columns, cells, strict=True))
            command = " ".join(words[clock_words + len(columns) :])
            tid = by_name.get("TID")
            if tid is not None and tid != "-":  # a thread of the process above it
                if process is not None:
                    threads.setdefault((ts, process), []).append(
                        (_number(by_name.get("%CPU")), _number(by_name.get("%wait")))
                    )
                continue
            pid = _integer(by_name.get("TGID") or by_name.get("PID"))
            if pid is None:
                continue
            process = pid
            row = rows.setdefault((ts, pid), {"ts": ts, "pid": pid, "name": command.removeprefix("|__")})
            for column, field in _COLUMNS.items():
                if (value := _number(by_name.get(column))) is not None:
                    row[field] = value
            if (resident := _number(by_name.get("RSS"))) is not None:
                row["rss_bytes"] = resident * 1024
        for key, seen in threads.items():
            if (owner := rows.get(key)) is None:
                continue
            cpus = [cpu for cpu, _ in seen if cpu is not None]
            if cpus:
                owner["max_thread_cpu_pct"] = max(cpus)
            waits = [wait for _, wait in seen]
            if waits and all(wait is not None for wait in waits):
                owner["run_queue_wait_pct"] = sum(w for w in waits if w is not None)
        if rows:
            result.tables["processes"] = pd.DataFrame(list(rows.values()))
            result.warnings.append(zone_note("pidstat's clock times", tz))
            if not rows_clock.dated:
                result.warnings.append("no banner with the date: the rows are taken on the file's date")
        return result


def _header(line: str) -> re.Match[str] | None:
    """A report's header: the task's id columns and at least one of pidstat's figures before Command."""
    header = _HEADER.match(line.strip())
    if header is None or not any(figure in header["columns"].split() for figure in _FIGURES):
        return None
    return header


def _ids(line: str) -> list[str]:
    """The task's id columns, as the header names them (UID or USER, then PID or TGID and TID)."""
    found = re.search(_ID, line)
    return found.group(0).split() if found else []


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None and text != "-" else None
    except ValueError:
        return None


def _integer(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
