"""Was the environment the same? Hardware, software, settings and the load beside the service.

Before and after must differ in one variable: the change under test. A
different GPU model or count, card or host size, or a job running beside the
service on one side only, makes the two recordings not comparable: any
difference in latency could be that. Versions and settings that differ are
listed (one of them is usually the change itself); the reader decides whether
more than one thing changed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.compare.model import Difference
from diagnose.dump.model import Dump
from diagnose.dump.processes import GROUP, process_ids
from diagnose.units import human_bytes

GIB = 2**30
BACKGROUND_CPU_CORES = 1.0  # another job taking a core more on one side is background load
BACKGROUND_GPU_BYTES = 1 * GIB  # or a GiB more of GPU memory
_HARDWARE = ("GPU model", "GPU count", "GPU memory (per card)", "CPU cores", "host memory")


def differences(
    before: dict[str, str], after: dict[str, str], before_load: dict[str, float], after_load: dict[str, float]
) -> list[Difference]:
    """What differs between two sides' environments (``describe``) and background loads (``background``)."""
    found = []
    b, a = before, after
    for key in sorted(set(b) | set(a), key=lambda k: (_order(k), k)):
        if key in b and key in a and b[key] != a[key]:
            kind = "hardware" if key in _HARDWARE else _kind(key)
            found.append(Difference(key, kind, b[key], a[key], kind == "hardware"))
        elif key in _HARDWARE and (key in b) != (key in a):
            found.append(
                Difference(key, "recording", b.get(key, "not recorded"), a.get(key, "not recorded"), False)
            )
    for key, (what, threshold, show) in _BACKGROUND.items():
        if key in before_load and key in after_load and abs(after_load[key] - before_load[key]) >= threshold:
            found.append(Difference(what, "background", show(before_load[key]), show(after_load[key]), True))
    return found


def describe(dump: Dump) -> dict[str, str]:
    """What the evidence says of the machine and the software, as text to compare."""
    facts: dict[str, str] = {}
    extra = dump.manifest.extra
    gpus = extra.get("gpus")
    if isinstance(gpus, list) and gpus:
        facts["GPU model"] = ", ".join(sorted(set(map(str, gpus))))
        facts["GPU count"] = str(len(gpus))
    gpu = dump.table("gpu")
    if gpu is not None and "gpu" in gpu.columns:
        facts.setdefault("GPU count", str(int(pd.to_numeric(gpu["gpu"], errors="coerce").nunique())))
        if "mem_total_bytes" in gpu.columns:
            total = pd.to_numeric(gpu["mem_total_bytes"], errors="coerce").max()
            if np.isfinite(total):
                facts["GPU memory (per card)"] = human_bytes(float(total))
    system = dump.table("system")
    if system is not None:
        for column, key in (("cpu_count", "CPU cores"), ("mem_total_bytes", "host memory")):
            if column in system.columns:
                value = pd.to_numeric(system[column], errors="coerce").median()
                if np.isfinite(value):
                    facts[key] = human_bytes(float(value)) if column.endswith("_bytes") else f"{value:g}"
    if dump.manifest.host:
        facts["host"] = str(dump.manifest.host)
    if dump.manifest.interval_s:
        facts["sampling interval"] = f"{dump.manifest.interval_s:g} s"
    for section, prefix in (("environment", ""), ("settings", "setting ")):
        entries = extra.get(section)
        if isinstance(entries, dict):
            facts.update({f"{prefix}{key}": str(value) for key, value in entries.items()})
    # A profiler trace names the GPU it ran on, and a pulled dump the one dcgm-exporter labels: hardware,
    # as a recording's is.
    for named in ("profiled_gpu", "gpu_model"):
        if named in facts:
            facts.setdefault("GPU model", facts.pop(named))
    return facts


def _kind(key: str) -> str:
    if key.startswith("setting ") or key == "server_cmdline":
        return "settings"
    if key in ("host", "sampling interval"):
        return "recording"
    return "software"


def _order(key: str) -> int:
    return {"hardware": 0, "software": 1, "settings": 2, "recording": 3}[
        "hardware" if key in _HARDWARE else _kind(key)
    ]


def background(dump: Dump) -> dict[str, float]:
    """Other processes' CPU (95th percentile over time, % of a core) and GPU memory (peak), where recorded."""
    found = {}
    servers = dump.server_pids
    for key, table, column, q in (
        ("cpu", "processes", "cpu_pct", 0.95),
        ("gpu_mem", "gpu_processes", "mem_used_bytes", 1.0),
    ):
        value = _others(dump, servers, table, column, q)
        if value is not None:
            found[key] = value
    return found


_BACKGROUND = {
    "cpu": (
        "other processes' CPU (p95 over time)",
        BACKGROUND_CPU_CORES * 100,
        lambda v: f"{v / 100:.1f} cores",
    ),
    "gpu_mem": ("other processes' GPU memory (peak)", BACKGROUND_GPU_BYTES, human_bytes),
}


def _others(dump: Dump, servers: frozenset[int], table: str, column: str, q: float) -> float | None:
    frame = dump.table(table)
    if frame is None or column not in frame.columns or not {"pid", GROUP} & set(frame.columns):
        return None
    pids = process_ids(frame)
    values = pd.to_numeric(frame[column], errors="coerce").where(~pids.isin(servers), 0.0).fillna(0.0)
    per_sample = values.groupby(frame["ts"].to_numpy()).sum()
    return float(per_sample.quantile(q)) if len(per_sample) else None
