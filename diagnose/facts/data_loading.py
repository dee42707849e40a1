"""How much of a profile the model spent fetching its next batch from a PyTorch DataLoader.

PyTorch's DataLoader wraps each fetch in a ``record_function`` named
``enumerate(DataLoader)#<iterator class>.__next__`` (torch/utils/data/dataloader.py, every release
since 1.8): in a profiler's summary it is a row, in its trace a span on the host. Time inside it is
time the step waited for input, whether the main process built the batch itself (no workers) or
waited for its workers: a CPU-side stage in front of the model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.intervals import union
from diagnose.facts.model import Facts

DATA_LOADER = "enumerate(DataLoader)#"


def add_data_loading_facts(facts: Facts, dump: Dump) -> None:
    summary = dump.traces.get("op_summary")
    calls = dump.traces.get("host_calls")
    if calls is not None and {"name", "ts", "dur_us"} <= set(calls.columns):
        _from_trace(facts, calls, dump.source("host_calls"))
    elif summary is not None and {"name", "host_total_us", "table_self_host_us"} <= set(summary.columns):
        _from_summary(facts, summary, dump.source("op_summary"))


def _from_summary(facts: Facts, summary: pd.DataFrame, source: str) -> None:
    loading = summary["name"].astype(str).str.startswith(DATA_LOADER).to_numpy()
    total = pd.to_numeric(summary["table_self_host_us"], errors="coerce").max()
    if not loading.any() or not total > 0:
        return
    inside = float(np.nansum(pd.to_numeric(summary["host_total_us"], errors="coerce").to_numpy()[loading]))
    facts.add(
        "trace.data_loading_share",
        min(1.0, inside / float(total)),
        f"{source}: CPU total of its {DATA_LOADER}...__next__ rows over the table's self CPU time",
    )


def _from_trace(facts: Facts, calls: pd.DataFrame, source: str) -> None:
    names = calls["name"].astype(str)
    loading = names.str.startswith(DATA_LOADER).to_numpy()
    if not loading.any():
        return
    start = pd.to_numeric(calls["ts"], errors="coerce").to_numpy(dtype="float64")
    end = start + pd.to_numeric(calls["dur_us"], errors="coerce").to_numpy(dtype="float64")
    span = float(np.nanmax(end) - np.nanmin(start))
    if not span > 0:
        return
    fetches = loading & np.isfinite(start) & np.isfinite(end)
    starts, ends = union(start[fetches], end[fetches])  # overlaps once: nested fetches, several threads
    facts.add(
        "trace.data_loading_share",
        min(1.0, float((ends - starts).sum()) / span),
        f"{source}: time inside {DATA_LOADER}...__next__ spans over the trace's host span",
    )
