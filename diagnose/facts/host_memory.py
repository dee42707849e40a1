"""Host memory pressure: does the host swap, does throughput collapse, whose memory grew?

Whether the host paged *while latency spiked* is read with the spike analysis (facts/spikes.py).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.processes import describe, process_ids
from diagnose.facts.model import Facts
from diagnose.facts.process_identity import add_process_identity

PAGING_BYTES_PER_S = 1 << 20  # 1 MiB/s of swap traffic counts as swapping


def add_host_memory_facts(facts: Facts, dump: Dump) -> None:
    system = dump.table("system")
    if system is None:
        return
    source = dump.source("system")
    if {"mem_used_bytes", "mem_total_bytes"} <= set(system.columns):
        used = system["mem_used_bytes"] / system["mem_total_bytes"].where(system["mem_total_bytes"] > 0)
        facts.add(
            "host.mem_used_pct.max", float(used.max() * 100), f"{source}: mem_used_bytes / mem_total_bytes"
        )
    _add_rss_growth(facts, dump)
    traffic, cite = _swap_traffic(system, source)
    if traffic is None:
        return
    paging = (traffic >= PAGING_BYTES_PER_S).to_numpy()
    facts.add("host.swapping_share", float(paging.mean()), cite)
    facts.add("host.swap_traffic_per_s.p95", float(np.percentile(traffic, 95)), cite)
    _add_throughput_during_paging(facts, dump, system["ts"].to_numpy(), paging)


def _swap_traffic(system: pd.DataFrame, source: str) -> tuple[pd.Series | None, str]:
    """Bytes a second moved to or from swap: the paging rates where recorded; else the growth of swap
    in use, which is a lower bound on what was swapped out (gigabytes of growth are swapping even
    where no one recorded the rates, as a node_exporter without vmstat or a hand-made dump)."""
    rates = [c for c in ("swap_in_per_s", "swap_out_per_s") if c in system.columns]
    if rates and system[rates].notna().any().any():
        return system[rates].fillna(0).sum(axis=1), f"{source}: {', '.join(rates)}"
    if "swap_used_bytes" not in system.columns or len(system) < 3:
        return None, ""
    used = pd.to_numeric(system["swap_used_bytes"], errors="coerce")
    elapsed = system["ts"].diff()
    growth = (used.diff() / elapsed.where(elapsed > 0)).clip(lower=0).fillna(0.0)
    return growth, f"{source}: growth of swap_used_bytes (no paging rates; a lower bound on swap-out)"


def _add_throughput_during_paging(facts: Facts, dump: Dump, ts: np.ndarray, paging: np.ndarray) -> None:
    requests = dump.table("requests")
    if requests is None or paging.sum() < 10 or (~paging).sum() < 10:
        return
    edges = np.append(ts, ts[-1] + (np.median(np.diff(ts)) if ts.size > 1 else 1.0))
    counts = np.histogram(requests["ts"].to_numpy(), bins=edges)[0] / np.diff(edges)
    during, rest = counts[paging].mean(), counts[~paging].mean()
    if rest > 0:
        facts.add(
            "host.swap_throughput_ratio",
            float(during / rest),
            f"{dump.source('requests')}: requests per second while swapping and otherwise",
        )


def _add_rss_growth(facts: Facts, dump: Dump) -> None:
    processes = dump.table("processes")
    if processes is None or "rss_bytes" not in processes.columns:
        return
    ids = process_ids(processes)
    rss = pd.to_numeric(processes["rss_bytes"], errors="coerce")
    known = ids.notna() & rss.notna()
    if not known.any():
        return
    # To its peak, not its last sample: a process that filled the host's memory may end swapped out or
    # killed (a testbed job holding 24 GB was last seen at 0 bytes), and its peak is what pushed others out.
    by_process = rss[known].groupby(ids[known])
    growth = by_process.max() - by_process.first()
    pid = float(cast(float, growth.idxmax()))  # the index holds pids
    who = describe(processes, ids, pid)
    cite = f"{dump.source('processes')}: rss_bytes of {who}, first sample to its peak"
    facts.add("host.rss_growth.bytes", float(growth.max()), cite)
    add_process_identity(facts, "host.rss_growth", processes, ids, pid, who, cite)
