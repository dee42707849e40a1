"""What a profiler's summary says (``key_averages().table()``, ``nsys stats``): the trace facts a summary
can carry, each cited as a summary's.

A summary gives each name's calls and total time, not single events: the
kernel durations are each name's average (so the median and the share under
10 µs are over names weighted by their calls), and nothing that needs a
timeline (the GPU's idle time, what the host did meanwhile) can be computed.
What it adds instead: the kernels' time against the host's traced time. On a
host that issues its work from one thread, the GPU can have been busy at most
that share of the time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.gpu_timeline import LAUNCH, SYNC, matches
from diagnose.facts.gpu_trace import SHORT_KERNEL_US, add_kernel_classes
from diagnose.facts.model import Facts


def add_summary_facts(facts: Facts, dump: Dump) -> None:
    if "gpu_activity" in dump.traces:  # a timeline says all of this and more
        return
    summary = dump.traces.get("op_summary")
    if summary is None or not len(summary) or not {"name", "kind", "calls"} <= set(summary.columns):
        return
    where = f"{dump.source('op_summary')} (a summary: each name's calls and total time)"
    calls = summary["calls"].to_numpy(dtype="float64")
    kind = summary["kind"].to_numpy()
    device = summary["self_device_us"].to_numpy(dtype="float64") if "self_device_us" in summary else None
    host = summary["self_host_us"].to_numpy(dtype="float64") if "self_host_us" in summary else None
    kernel = (kind == "kernel") & np.isfinite(calls) & (calls > 0)
    if device is not None and kernel.any():
        counts, totals = calls[kernel], device[kernel]
        averages = totals / counts
        facts.add("trace.kernels", int(counts.sum()), f"{where}: calls of kernels")
        facts.add("trace.kernel_median_us", _weighted_median(averages, counts), f"{where}: kernels' averages")
        facts.add(
            "trace.short_kernel_share",
            float(counts[averages < SHORT_KERNEL_US].sum() / counts.sum()),
            f"{where}: calls of kernels averaging under {SHORT_KERNEL_US:.0f} µs",
        )
        add_kernel_classes(facts, summary["name"][kernel], totals, where, counts)
        bound = _host_total(summary, host, calls)
        if bound is not None:
            facts.add(
                "trace.device_over_host_share",
                float(totals.sum() / bound[0]),
                f"{where}: kernel time over {bound[1]}",
            )
    runtime = kind == "runtime"
    if host is not None and runtime.any():
        launch = runtime & matches(summary["name"], LAUNCH) & (calls > 0)
        facts.add("trace.launches", int(calls[launch].sum()), f"{where}: calls of launch functions")
        if launch.any():
            facts.add(
                "trace.launch_median_us",
                _weighted_median(host[launch] / calls[launch], calls[launch]),
                f"{where}: launch calls' averages",
            )
        sync = runtime & matches(summary["name"], SYNC)
        facts.add("trace.sync_calls", int(np.nansum(calls[sync])), f"{where}: synchronising calls")


def _host_total(
    summary: pd.DataFrame, host: np.ndarray | None, calls: np.ndarray
) -> tuple[float, str] | None:
    """Time the host's work took at least, and what it is: the table's footer (all its self time)
    where it was pasted; else its rows' self time where operators are among them (key_averages);
    else its launch calls alone (an nsys API summary: its synchronising calls wait while the GPU
    works, so only the launches bound the span from below)."""
    if "table_self_host_us" in summary and summary["table_self_host_us"].notna().any():
        return float(summary["table_self_host_us"].max()), "the host's self time (the table's total)"
    if host is None:
        return None
    kind = summary["kind"].to_numpy()
    if (kind == "operator").any():
        total, what = float(np.nansum(host)), "the host's self time in the listed operators and calls"
    else:
        launch = (kind == "runtime") & matches(summary["name"], LAUNCH) & (calls > 0)
        total, what = float(np.nansum(host[launch])), "the host's time in launch calls alone"
    return (total, what) if total > 0 else None


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])
