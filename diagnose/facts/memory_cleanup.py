"""Memory handed back after every request and taken again by the next: the cost of tidying up.

A caching allocator exists so that a warmed-up service never asks the device
for memory again: PyTorch's ``num_device_alloc`` (its cudaMalloc calls) stops
climbing once the shapes it serves have been seen. Emptying the cache after
each inference (``torch.cuda.empty_cache()``, an arena shrunk per run) makes
every request pay for fresh allocations again, and the evidence is the
allocator's own counter climbing second after second, in step with the
requests. Three forms carry it:

- the allocator table: device allocations per request, and the share of
  seconds in which they grew (a cache freed once, after a load spike, grows
  in one burst and then stays flat);
- a profiler trace: ``cudaFree`` (or ``hipFree``) in step after step, which a
  caching allocator never calls on its own;
- on the host, the server's minor page faults: memory handed back to the
  kernel and touched again faults a page at a time, request after request,
  where a warmed-up process reuses its pages and faults next to none. Pages
  faulted in while the resident memory stays where it was are pages given
  back as fast as they are taken: many times the resident range over the
  window is memory recycled, where a leak (the other reason to fault) would
  grow the resident memory by what it faulted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts
from diagnose.facts.parallelism import server_rows

PAGE_BYTES = 4096  # a dump carries fault counts, not the page size: the common one, the lower bound

# Device memory taken from or handed back to the driver; not the stream-ordered pool's
# cudaMallocAsync / cudaFreeAsync (cheap by design) nor pinned host memory (cudaMallocHost).
_DEVICE_ALLOC = re.compile(r"^(cuda|hip)(Malloc|Free)$|^cuMem(Alloc|Free)(_v2)?$")
_DEVICE_FREE = re.compile(r"^(cuda|hip)Free$|^cuMemFree(_v2)?$")


def add_memory_cleanup_facts(facts: Facts, dump: Dump) -> None:
    requests = dump.table("requests")
    arrivals: Arrivals | None = None
    if requests is not None and dump.request_sample is not None:
        # a sample holds 1 in N of each interval's requests: every request, counted per second, instead
        # (each second's requests at its start: the intervals are a second or more, as samples are)
        counted = dump.request_sample.per_second
        arrivals = Arrivals(counted.index.to_numpy(dtype="float64"), np.cumsum(counted.to_numpy()))
    elif requests is not None:
        arrivals = Arrivals(np.sort(requests["ts"].to_numpy(dtype="float64")))
    _add_allocator_facts(facts, dump, arrivals)
    _add_page_fault_facts(facts, dump, arrivals)
    _add_trace_facts(facts, dump)


def _add_allocator_facts(facts: Facts, dump: Dump, arrivals: Arrivals | None) -> None:
    allocator = dump.table("allocator")
    if allocator is None or "num_device_alloc" not in allocator.columns:
        return
    source = dump.source("allocator")
    keys = [c for c in ("pid", "device", "rank") if c in allocator.columns]
    counts = pd.to_numeric(allocator["num_device_alloc"], errors="coerce")
    frame = allocator.assign(count=counts).dropna(subset=["count"]).sort_values("ts", kind="stable")
    if len(frame) < 3:
        return
    grouped = frame.groupby(keys, dropna=False)["count"] if keys else frame["count"]
    # A counter that falls was restarted with its process: that interval counts nothing.
    growth = grouped.diff().clip(lower=0).fillna(0.0)
    per_sample = growth.groupby(frame["ts"]).sum()
    times = per_sample.index.to_numpy(dtype="float64")
    grew = per_sample.to_numpy() > 0
    total = float(per_sample.sum())
    facts.add("allocator.device_allocs", int(total), f"{source}: growth of num_device_alloc")
    served = _requests_between(arrivals, times)
    if served is not None:
        active = served > 0  # intervals in which requests arrived
        if active.sum() >= 3:
            facts.add(
                "allocator.alloc_growth_share",
                float(grew[1:][active].mean()),
                f"{source}: sampling intervals with requests in which num_device_alloc grew "
                f"({int(active.sum()):,} intervals)",
            )
        if served.sum() > 0:
            facts.add(
                "allocator.device_allocs_per_request",
                total / float(served.sum()),
                f"{source}: growth of num_device_alloc / {int(served.sum()):,} requests "
                f"({dump.source('requests')}) over the same time",
            )
    if {"reserved_bytes", "allocated_bytes"} <= set(allocator.columns):
        reserved = pd.to_numeric(allocator["reserved_bytes"], errors="coerce")
        allocated = pd.to_numeric(allocator["allocated_bytes"], errors="coerce")
        held = reserved > 0
        if held.any():
            cached = ((reserved - allocated).clip(lower=0) / reserved)[held].dropna()
            if len(cached):
                facts.add(
                    "allocator.cached_share.p50",
                    float(cached.median()),
                    f"{source}: (reserved_bytes - allocated_bytes) / reserved_bytes, median",
                )


@dataclass(frozen=True)
class Arrivals:
    """How many requests had arrived by each of ``times`` (ascending): each request's own time, or each
    second's count where the request table is a sample."""

    times: np.ndarray
    so_far: np.ndarray | None = None  # requests arrived up to each time; None: one request at each

    def by(self, moments: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.times, moments, side="right")
        if self.so_far is None:
            return at
        return np.where(at > 0, self.so_far[np.maximum(at - 1, 0)], 0)


def _requests_between(arrivals: Arrivals | None, times: np.ndarray) -> np.ndarray | None:
    """Requests that arrived in each interval between consecutive sample times."""
    if arrivals is None or times.size < 2:
        return None
    return np.diff(arrivals.by(times))


def _add_page_fault_facts(facts: Facts, dump: Dump, arrivals: Arrivals | None) -> None:
    server = server_rows(dump)
    if server is None or "minor_faults_per_s" not in server.columns or arrivals is None:
        return
    rows = server[["ts", "minor_faults_per_s"]].dropna().sort_values("ts")
    if len(rows) < 3:
        return
    times = rows["ts"].to_numpy(dtype="float64")
    # Each sample's rate covers the interval that ends at it.
    faults = rows["minor_faults_per_s"].to_numpy(dtype="float64")[1:] * np.diff(times)
    served = _requests_between(arrivals, times)
    if served is None:
        return
    active = served > 0
    if active.sum() < 3:
        return
    where = f"{dump.source('processes')}: minor_faults_per_s of the server"
    per_request = faults[active] / served[active]
    facts.add(
        "server.minor_faults_per_request.p50",
        float(np.median(per_request)),
        f"{where} / requests arriving ({dump.source('requests')}), "
        f"median over {int(active.sum()):,} intervals",
    )
    faulted = float(faults.sum()) * PAGE_BYTES
    facts.add("server.faulted_bytes", faulted, f"{where}, x {PAGE_BYTES} bytes a page, over the recording")
    if "rss_bytes" in server.columns:
        rss = server["rss_bytes"].dropna()
        if len(rss) >= 3:
            moved = float(rss.quantile(0.95) - rss.quantile(0.05))
            facts.add(
                "server.fault_recycling",
                faulted / max(moved, float(PAGE_BYTES)),
                f"{where} as bytes / the range of its rss_bytes (P5 to P95: {moved / 2**20:.0f} MiB)",
            )


def _add_trace_facts(facts: Facts, dump: Dump) -> None:
    calls = dump.traces.get("host_calls")
    if calls is None or not len(calls) or not {"name", "kind"} <= set(calls.columns):
        return
    names = calls["name"].astype(str)
    runtime = (calls["kind"].astype(str) == "runtime").to_numpy()
    device = runtime & names.str.match(_DEVICE_ALLOC.pattern).to_numpy()
    frees = runtime & names.str.match(_DEVICE_FREE.pattern).to_numpy()
    where = dump.source("host_calls")
    facts.add("trace.device_alloc_calls", int(device.sum()), f"{where}: cudaMalloc/cudaFree calls")
    if "dur_us" in calls.columns and device.any():
        ts = calls["ts"].to_numpy(dtype="float64")
        dur = calls["dur_us"].to_numpy(dtype="float64")
        span = float(np.nanmax(ts + dur) - np.nanmin(ts))
        if span > 0:
            facts.add(
                "trace.device_alloc_share",
                float(np.nansum(dur[device]) / span),
                f"{where}: time in cudaMalloc/cudaFree calls over the host calls' span",
            )
    if "step" not in calls.columns:
        return
    steps = pd.to_numeric(calls["step"], errors="coerce")
    known = steps.notna().to_numpy()
    every = np.unique(steps[known])
    if every.size < 3:
        return
    freeing = np.unique(steps[known & frees])
    facts.add(
        "trace.free_step_share",
        float(freeing.size / every.size),
        f"{where}: profiler steps with a cudaFree ({freeing.size} of {every.size})",
    )
