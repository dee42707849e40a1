"""``sar`` and ``mpstat`` as pasted (sysstat) -> the ``system`` table.

Their layout is sysstat's (pr_stats.c, mpstat.c): a banner (sysstat_clock.py), then each report as a
header and rows, both starting with the interval's time; ``Average:`` rows close each report. A
header's names are activity.c's ``hdr_line`` for its report, and say which report it is:

- CPU (``-u``, ``-u ALL``, ``mpstat``; ``CPU %user .. %idle`` or ``CPU %usr .. %idle``): its ``all``
  row's ``cpu_pct`` (100 - %idle - %iowait: busy, as the recorder and vmstat count it) and
  ``cpu_system_pct`` (%system, %sys);
- queue (``-q``; ``runq-sz plist-sz ldavg-1 ..``): ``procs_running`` (runq-sz), ``load1`` (ldavg-1);
- task creation and switching (``-w``; ``proc/s cswch/s``): ``ctx_switches_per_s``;
- swapping (``-W``; ``pswpin/s pswpout/s``, pages): ``swap_in_per_s``, ``swap_out_per_s`` (4 KiB pages);
- memory (``-r``; ``kbmemfree .. kbmemused %memused ..``): ``mem_used_bytes``, ``mem_total_bytes``
  (used over %memused);
- swap space (``-S``; ``kbswpfree kbswpused %swpused ..``): ``swap_used_bytes``;
- I/O (``-b``; ``tps .. bread/s bwrtn/s ..``, 512-byte blocks): ``disk_read_bytes_per_s``,
  ``disk_write_bytes_per_s``;
- block devices (``-d``; ``DEV tps rkB/s wkB/s ..``, before 11.5 ``rd_sec/s wr_sec/s``): the same,
  summed over the devices, where ``-b`` is absent;
- network devices (``-n DEV``; ``IFACE rxpck/s txpck/s rxkB/s txkB/s ..``): ``net_rx_bytes_per_s``,
  ``net_tx_bytes_per_s``, summed over all but ``lo``.

Per-CPU rows and other reports are passed over. sysstat's kB are KiB. Each interval's reports make one
row. The clock is the host's, read in ``--tz``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, header_claim, local_epoch, zone_note
from diagnose.importers.sysstat_clock import RowClock, clock, figure
from diagnose.units import counted

KIB = 1024
_SECTOR = 512  # sar -b's blocks and -d's sectors (sysstat's "sectors", 512 bytes whatever the disk)
_PAGE = 4096  # sar -W counts pages; 4 KiB on x86_64, told by the banner


@dataclass(frozen=True)
class _Report:
    """One of sar's reports: the names its header starts with (after any per-item column) and how a row of
    it fills the interval's row."""

    starts: tuple[str, ...]
    fill: Callable[[dict[str, float], dict[str, str], dict[str, float]], None]


def _cpu(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    if cells.get("CPU") != "all" or "%idle" not in figures:
        return
    row["cpu_pct"] = 100.0 - figures["%idle"] - figures.get("%iowait", 0.0)  # busy, as psutil and vmstat
    system = figures.get("%system", figures.get("%sys"))
    if system is not None:
        row["cpu_system_pct"] = system


def _queue(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    _copy(row, figures, {"runq-sz": "procs_running", "ldavg-1": "load1"})


def _switching(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    _copy(row, figures, {"cswch/s": "ctx_switches_per_s"})


def _swapping(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    _copy(row, figures, {"pswpin/s": "swap_in_per_s", "pswpout/s": "swap_out_per_s"}, _PAGE)


def _memory(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    used, share = figures.get("kbmemused"), figures.get("%memused")
    if used is None:
        return
    row["mem_used_bytes"] = used * KIB
    if share:
        row["mem_total_bytes"] = used * KIB * 100.0 / share


def _swap_space(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    _copy(row, figures, {"kbswpused": "swap_used_bytes"}, KIB)


def _io(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    _copy(row, figures, {"bread/s": "disk_read_bytes_per_s", "bwrtn/s": "disk_write_bytes_per_s"}, _SECTOR)


def _devices(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    for names, unit in ((("rkB/s", "wkB/s"), KIB), (("rd_sec/s", "wr_sec/s"), _SECTOR)):
        for name, column in zip(names, ("disk_read_bytes_per_s", "disk_write_bytes_per_s"), strict=True):
            if name in figures:
                row[f"{column}:devices"] = row.get(f"{column}:devices", 0.0) + figures[name] * unit


def _network(row: dict[str, float], cells: dict[str, str], figures: dict[str, float]) -> None:
    if cells.get("IFACE") == "lo":
        return
    for name, column in (("rxkB/s", "net_rx_bytes_per_s"), ("txkB/s", "net_tx_bytes_per_s")):
        if name in figures:
            row[column] = row.get(column, 0.0) + figures[name] * KIB


_REPORTS = (
    _Report(("CPU", "%user"), _cpu),
    _Report(("CPU", "%usr"), _cpu),
    _Report(("runq-sz", "plist-sz"), _queue),
    _Report(("proc/s", "cswch/s"), _switching),
    _Report(("pswpin/s", "pswpout/s"), _swapping),
    _Report(("kbmemfree",), _memory),
    _Report(("kbswpfree", "kbswpused"), _swap_space),
    _Report(("tps", "rtps"), _io),
    _Report(("DEV", "tps"), _devices),
    _Report(("IFACE", "rxpck/s"), _network),
)
_ITEM_COLUMNS = ("CPU", "DEV", "IFACE")  # a report with a row per item names it first


class SarImporter(Importer):
    name = "sar"
    description = (
        "`sar` and `mpstat` (sysstat): CPU, run queue, context switches, swapping, memory, disk and "
        "network, an interval a row"
    )

    def recognise(self, head: str) -> Claim | None:
        return header_claim(head, lambda line: _header(line) is not None)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows_clock = RowClock(datetime.fromtimestamp(source.mtime, UTC).date())
        report: tuple[_Report, int, list[str]] | None = None  # the report, its time's words, its names
        rows: dict[float, dict[str, float]] = {}
        unread: set[str] = set()
        start: tuple[time, date] | None = None  # the first header's time, and its day
        for raw in source.lines():
            line = raw.strip()
            if rows_clock.banner(line) or not line:
                continue
            if (found := _header(line)) is not None:
                report = found
                began = clock(" ".join(line.split()[: found[1]]))
                if start is None and began is not None:
                    start = (began, rows_clock.day)
                elif start is not None and began == start[0]:
                    rows_clock.restart(start[1])  # the next report, over the same stretch of time
                continue
            words = line.split()
            if (known := _names_of_unknown_report(words)) is not None:
                report = None
                unread.add(known)
                continue
            if report is None:
                continue
            kind, clock_words, names = report
            when = clock(" ".join(words[:clock_words]))
            if when is None or len(words) != clock_words + len(names):  # Average:, LINUX RESTART
                continue
            cells = dict(zip(names, words[clock_words:], strict=True))
            figures = {name: value for name, cell in cells.items() if (value := figure(cell)) is not None}
            ts = local_epoch(pd.Timestamp(rows_clock.at(when)), tz)
            kind.fill(rows.setdefault(ts, {"ts": ts}), cells, figures)
        if not rows:
            return result
        result.tables["system"] = pd.DataFrame([_settled(row) for row in rows.values()])
        result.warnings.append(zone_note("sar's clock times", tz))
        if not rows_clock.dated:
            result.warnings.append("no banner with the date: the rows are taken on the file's date")
        if rows_clock.machine not in (None, "x86_64") and any("swap_in_per_s" in r for r in rows.values()):
            result.warnings.append(
                f"swapped pages taken as 4 KiB on {rows_clock.machine} (its page size may be larger)"
            )
        if unread:
            result.warnings.append(f"passed over {counted(len(unread), 'report')} this reader does not use")
        return result


def _header(line: str) -> tuple[_Report, int, list[str]] | None:
    """A report's header: its time's words, then names that start as one of the reports' do."""
    words = line.split()
    for at in range(1, min(3, len(words))):  # "10:00:01" or "10:00:01 AM" (or a locale's two words)
        names = words[at:]
        for report in _REPORTS:
            if tuple(names[: len(report.starts)]) == report.starts and clock(" ".join(words[:at])):
                return report, at, names
    return None


def _names_of_unknown_report(words: list[str]) -> str | None:
    """A header of a report not read here (``-B``'s paging, ``-n EDEV``...): its first name, so that its
    rows are not taken for the last report's."""
    for at in range(1, min(3, len(words))):
        names = words[at:]
        if len(names) >= 2 and clock(" ".join(words[:at])) and all(_is_name(name) for name in names):
            return names[0]
    return None


def _is_name(word: str) -> bool:
    return figure(word) is None and (
        word.endswith("/s") or word.startswith("%") or word.isalpha() or "-" in word or word in _ITEM_COLUMNS
    )


def _settled(row: dict[str, float]) -> dict[str, float]:
    """The interval's row: ``-d``'s per-device sums stand in for ``-b``'s figures where it has none."""
    settled = {k: v for k, v in row.items() if not k.endswith(":devices")}
    for key, value in row.items():
        if key.endswith(":devices"):
            settled.setdefault(key.removesuffix(":devices"), value)
    return settled


def _copy(row: dict[str, float], figures: dict[str, float], names: dict[str, str], unit: float = 1.0) -> None:
    for name, column in names.items():
        if name in figures:
            row[column] = figures[name] * unit
