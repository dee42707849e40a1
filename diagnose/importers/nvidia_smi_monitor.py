"""``nvidia-smi dmon`` and ``pmon`` output (any column set, with or without ``-o DT``).

| dmon column | gpu column | pmon column | gpu_processes column |
|---|---|---|---|
| gpu | gpu | gpu, pid | gpu, pid |
| sm | util_pct | command | name |
| mem | mem_bw_util_pct | fb (MB) | mem_used_bytes |
| pwr | power_w | sm, mem | sm_pct, mem_pct |
| gtemp / temp | temp_c | | |
| pclk | sm_clock_mhz | | |
| fb (MB) | mem_used_bytes | | |
| rxpci / txpci (MB/s) | pcie_rx/tx_bytes_per_s | | |

``-`` means not available. With ``-o DT`` each row has its local date and
time (read as UTC, with a warning). Without it the rows carry no time: the
samples are taken as one second apart (dmon's default) and ending at the
file's modification time, with a warning.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from diagnose.importers.base import Imported, Importer, Source, local_epoch, zone_note

MIB = 2**20
_DMON = {
    "sm": ("util_pct", 1.0),
    "mem": ("mem_bw_util_pct", 1.0),
    "pwr": ("power_w", 1.0),
    "gtemp": ("temp_c", 1.0),
    "temp": ("temp_c", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
    "fb": ("mem_used_bytes", MIB),
    "rxpci": ("pcie_rx_bytes_per_s", MIB),
    "txpci": ("pcie_tx_bytes_per_s", MIB),
}
_PMON = {"sm": ("sm_pct", 1.0), "mem": ("mem_pct", 1.0), "fb": ("mem_used_bytes", MIB)}


def _header(lines: Iterable[str]) -> tuple[list[str], list[list[str]]] | None:
    """The column names (from the first ``# ... gpu ...`` line) and the data rows."""
    columns: list[str] | None = None
    rows = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            names = stripped.lstrip("#").split()
            if columns is None and "gpu" in [n.lower() for n in names]:
                columns = [n.lower() for n in names]
            continue
        if columns is not None and stripped:
            parts = stripped.split(None, len(columns) - 1)
            if len(parts) == len(columns):
                rows.append(parts)
    return (columns, rows) if columns else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _MonitorImporter(Importer):
    table = ""
    mapping: dict[str, tuple[str, float]] = {}

    def recognise(self, head: str) -> bool:
        parsed = _header(head.splitlines())
        return parsed is not None and len(parsed[0]) >= 4 and self._columns_fit(set(parsed[0]))

    def _columns_fit(self, columns: set[str]) -> bool:
        raise NotImplementedError

    def read(self, source: Source, tz: str | None = None) -> Imported:
        columns, rows = _header(source.lines()) or ([], [])
        result = Imported()
        if not rows:
            return result
        records = []
        for parts in rows:
            values = dict(zip(columns, parts, strict=True))
            record: dict[str, float | None] = {"gpu": int(values["gpu"]) if values["gpu"].isdigit() else None}
            for column, (target, scale) in self.mapping.items():
                if column in values and (number := _number(values[column])) is not None:
                    record[target] = number * scale
            self._extra(values, record)
            if "date" in values and "time" in values:
                record["ts"] = local_epoch(f"{values['date']} {values['time']}", tz)
            records.append(record)
        frame = pd.DataFrame(records)
        if "ts" in frame.columns:
            result.warnings.append(zone_note("nvidia-smi monitor times", tz))
        else:
            frame["ts"] = _one_second_apart(frame, source.mtime)
            result.warnings.append(
                "no times in the rows (run it with -o DT): samples taken as 1 s apart, "
                "ending at the file's modification time"
            )
        result.tables[self.table] = frame
        return result

    def _extra(self, values: dict[str, str], record: dict) -> None:
        pass


def _one_second_apart(frame: pd.DataFrame, end: float) -> list[float]:
    """A new sample starts whenever a GPU index comes round again."""
    sample, seen, stamps = 0, set[int](), []
    for gpu in frame["gpu"]:
        if gpu in seen:
            sample, seen = sample + 1, set()
        seen.add(gpu)
        stamps.append(sample)
    return [end - (stamps[-1] - s) for s in stamps]


class DmonImporter(_MonitorImporter):
    name = "nvidia-smi-dmon"
    description = "nvidia-smi dmon (per-GPU monitor; any -s column set, with or without -o DT)"
    example = "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk"
    table = "gpu"
    mapping = _DMON

    def _columns_fit(self, columns: set[str]) -> bool:
        """Any -s column set: some figure dmon alone prints per GPU, and no pid (that is pmon)."""
        return "pid" not in columns and bool(columns & {"pwr", "sm", "fb", "pclk", "mclk", "gtemp", "bar1"})


class PmonImporter(_MonitorImporter):
    name = "nvidia-smi-pmon"
    description = "nvidia-smi pmon (per-process monitor; with or without -o DT)"
    example = "# gpu         pid   type     sm    mem    enc    dec    command"
    table = "gpu_processes"
    mapping = _PMON

    def _columns_fit(self, columns: set[str]) -> bool:
        return "pid" in columns

    def _extra(self, values: dict[str, str], record: dict) -> None:
        record["pid"] = int(values["pid"]) if values.get("pid", "").isdigit() else None
        record["name"] = (values.get("command") or "").strip() or None
        record["type"] = values.get("type")
