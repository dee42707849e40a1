"""What the default table, ``nvidia-smi -q`` and ``-q -x`` have in common: snapshots of GPUs and their
processes, a GPU's ``-q`` fields by section and key, and the dump tables made of them.

The three forms are read by their own modules (nvidia_smi_report, nvidia_smi_xml); the XML's elements
are named as ``-q``'s sections and keys, so :func:`query_field` serves both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from diagnose.importers.base import Imported, local_epoch, zone_note
from diagnose.units import counted

MIB = 2**20
DATE = re.compile(r"^\s*(\w{3} \w{3}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\s*$")
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)")
_REASONS = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks",
}


@dataclass
class Snapshot:
    stamp: str | None = None
    gpus: list[dict] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)
    # MIG devices (the default table's "MIG devices:" section): a GPU instance's memory, a row of its own
    mig: list[dict] = field(default_factory=list)
    # The paste starts inside the report, after its header: the GPUs before the first one shown are
    # not known, so each GPU's index is its Minor Number (nvidia-smi's index on a default system).
    headless: bool = False
    # A section pasted without its GPU line: kept only if no GPU line follows (a report cut at its
    # start shows a section's tail, then the next GPU's line: that GPU is the first one whole).
    fragment: bool = False


def query_field(gpu: dict, snapshot: Snapshot, process: dict | None, keys: tuple, value: str) -> dict | None:
    """One ``key : value`` line of a GPU's section, by its path of section names."""
    section, key = (keys[0] if len(keys) > 1 else ""), keys[-1]
    if keys == ("Product Name",):
        gpu["gpu_name"] = value
    elif keys == ("Minor Number",) and snapshot.headless and value.isdigit():
        gpu["gpu"] = int(value)
    elif section == "FB Memory Usage" and key in ("Total", "Used"):
        gpu[f"mem_{key.lower()}_bytes"] = _mib(value)
    elif section == "Utilization" and key == "Gpu":
        gpu["util_pct"] = _number(value)
    elif section == "Utilization" and key == "Memory":
        gpu["mem_bw_util_pct"] = _number(value)
    elif section == "Clocks" and key == "SM":
        gpu["sm_clock_mhz"] = _number(value)
    elif section == "Max Clocks" and key == "SM":
        gpu["max_sm_clock_mhz"] = _number(value)
    elif section in ("Clocks Event Reasons", "Clocks Throttle Reasons") and key.lower() in _REASONS:
        # "none" is said only where the reasons were read: a paste that lost them says nothing
        gpu["reasons"] = gpu["reasons"] or []
        if value == "Active":
            gpu["reasons"].append(_REASONS[key.lower()])
    elif section == "Temperature" and key == "GPU Current Temp":
        gpu["temp_c"] = _number(value)
    elif section in ("GPU Power Readings", "Power Readings") and len(keys) == 2:
        column = {
            "Power Draw": "power_w",
            "Instantaneous Power Draw": "power_w",
            "Current Power Limit": "power_limit_w",
            "Power Limit": "power_limit_w",
            "Default Power Limit": "default_power_limit_w",
        }.get(key)
        if column and (column != "power_w" or "power_w" not in gpu):
            gpu[column] = _number(value)
    elif section == "Processes":
        if key == "Process ID":
            pid = int(_number(value) or 0)
            process = {"gpu": gpu["gpu"], "pid": pid, "name": None, "mem_used_bytes": None}
            snapshot.processes.append(process)
        elif process is not None and key == "Name":
            process["name"] = value
        elif process is not None and key == "Used GPU Memory":
            process["mem_used_bytes"] = _mib(value)
    return process


def snapshot_tables(result: Imported, snapshots: list[Snapshot], mtime: float, tz: str | None) -> None:
    """The snapshots' ``gpu`` and ``gpu_processes`` rows, each at its snapshot's date (else ``mtime``)."""
    gpus, processes, untimed = [], [], 0
    for snapshot in snapshots:
        if not snapshot.gpus and not snapshot.processes and not snapshot.mig:
            continue
        when = _epoch(snapshot.stamp, tz)
        if when is None:
            untimed += 1
            when = mtime
        for row in snapshot.gpus:
            reasons = row.pop("reasons", None)
            if reasons is not None:
                row["throttle_reasons"] = ";".join(reasons) or "none"
            gpus.append({"ts": when, **{k: v for k, v in row.items() if k != "bus"}})
        gpus += [{"ts": when, **row} for row in snapshot.mig]
        processes += [{"ts": when, **row} for row in snapshot.processes]
    if untimed:
        result.warnings.append(
            f"{counted(untimed, 'snapshot')} without a date: each taken at the file's modification time"
        )
    if untimed < len([s for s in snapshots if s.gpus or s.processes or s.mig]):
        result.warnings.append(zone_note("nvidia-smi dates", tz))
    if gpus:
        result.tables["gpu"] = pd.DataFrame(gpus)
    if processes:
        result.tables["gpu_processes"] = pd.DataFrame(processes)


def versions(driver: str | None, cuda: str | None) -> dict[str, str]:
    found = {"driver_version": driver, "cuda_version": cuda}
    return {key: value for key, value in found.items() if value}


def query_stamp(text: str) -> str | None:
    match = DATE.match(text)
    return match.group(1) if match else text.strip() or None


def _number(value: str) -> float | None:
    match = _NUMBER.match(value.strip())
    return float(match.group(1)) if match else None


def _mib(value: str) -> float | None:
    number = _number(value)
    return None if number is None else number * MIB


def _epoch(stamp: str | None, tz: str | None) -> float | None:
    if not stamp:
        return None
    parsed = pd.to_datetime(" ".join(stamp.split()), format="%a %b %d %H:%M:%S %Y", errors="coerce")
    return None if pd.isna(parsed) else local_epoch(parsed, tz)
