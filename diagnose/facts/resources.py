"""GPU, host CPU and per-process facts from the time-series tables."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.processes import describe, process_ids
from diagnose.facts.model import Facts
from diagnose.facts.process_identity import add_process_identity


def add_gpu_facts(facts: Facts, dump: Dump) -> None:
    gpu = dump.table("gpu")
    if gpu is None:
        return
    source = dump.source("gpu")
    if "gpu" in gpu.columns:
        facts.add("gpu.count", int(gpu["gpu"].nunique()), f"{source}: gpu")
    _add_mean_and_p95(facts, "gpu.util_pct", gpu, "util_pct", source)
    if {"mem_used_bytes", "mem_total_bytes"} <= set(gpu.columns):
        used = gpu["mem_used_bytes"] / gpu["mem_total_bytes"].where(gpu["mem_total_bytes"] > 0)
        facts.add(
            "gpu.mem_used_pct.max", float(used.max() * 100), f"{source}: mem_used_bytes / mem_total_bytes"
        )


def add_host_facts(facts: Facts, dump: Dump) -> None:
    system = dump.table("system")
    if system is None:
        return
    source = dump.source("system")
    _add_mean_and_p95(facts, "host.cpu_pct", system, "cpu_pct", source)
    if "cpu_count" in system.columns:
        count = system["cpu_count"].dropna()
        if len(count):
            facts.add("host.cpu_count", int(count.iloc[-1]), f"{source}: cpu_count")


def _add_mean_and_p95(facts: Facts, name: str, frame: pd.DataFrame, column: str, source: str) -> None:
    """``{name}.mean`` and ``{name}.p95`` of a utilisation column, over the samples that have it."""
    if column not in frame.columns:
        return
    values = frame[column].to_numpy(dtype="float64")
    values = values[np.isfinite(values)]
    if values.size:
        cite = f"{source}: {column}, {values.size:,} samples"
        facts.add(f"{name}.mean", float(values.mean()), cite)
        facts.add(f"{name}.p95", float(np.percentile(values, 95)), cite)


def add_thread_facts(facts: Facts, dump: Dump) -> None:
    """The server's busiest thread: a single-threaded stage, or an event loop doing CPU work, shows as
    ~100 % here. Where the dump names the server (or shows which steady process it is), another
    process's busy thread is none of its business; else the busiest thread of any process."""
    processes = dump.table("processes")
    if processes is None or "max_thread_cpu_pct" not in processes.columns:
        return
    source = dump.source("processes")
    ids = process_ids(processes)
    busy = pd.to_numeric(processes["max_thread_cpu_pct"], errors="coerce")
    known = ids.notna() & busy.notna()
    if not known.any():
        return
    servers = known & ids.isin(list(dump.server_pids))
    whose = "the server's" if servers.any() else "any process's"
    known = servers if servers.any() else known
    per_process = busy[known].groupby(ids[known]).quantile(0.95)
    pid = float(cast(float, per_process.idxmax()))  # the index holds pids
    who = describe(processes, ids, pid)
    cite = f"{source}: max_thread_cpu_pct of {who} ({whose} busiest thread), P95 over time"
    facts.add("thread.busiest.cpu_pct", float(per_process.max()), cite)
    rows = add_process_identity(facts, "thread.busiest", processes, ids, pid, who, cite)
    if "cpu_pct" in rows.columns:
        cpu = pd.to_numeric(rows["cpu_pct"], errors="coerce").mean()
        facts.add("thread.busiest.process_cpu_pct", float(cpu), f"{source}: cpu_pct of {who}")
