"""Batching: is the batch window or the batch size what costs latency?

Two different mistakes look alike from outside (latency up, GPU busy):

- waiting for a batch to fill: the ``batch_wait`` stage is a large share of
  latency while batches leave part-empty, closed by the window's timer;
- batches past the throughput knee: a GPU is memory-bound at small batches
  (a batch costs about the same whatever its size) and compute-bound at large
  ones (time grows with size, throughput stops rising). Past that knee a
  bigger batch only adds latency.

The throughput curve comes from the requests themselves: a request's
``stage_forward_ms`` is its batch's run time, so ``batch_size / forward`` is
what the GPU processed per second at that size. Sizes are grouped on a
geometric grid so sparse large sizes still form bins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.facts.model import Facts

_MIN_PER_BIN = 30
_KNEE_LEVEL = 0.9  # the knee: the smallest batch that reaches 90 % of the best throughput


def add_batch_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    if "stage_batch_wait_ms" in requests.columns:
        _add_wait_facts(facts, requests, latency, source)
    if {"batch_size", "stage_forward_ms"} <= set(requests.columns):
        _add_size_facts(facts, requests, source)


def _add_wait_facts(facts: Facts, requests: pd.DataFrame, latency: np.ndarray, source: str) -> None:
    wait = requests["stage_batch_wait_ms"].to_numpy(dtype="float64")
    known = np.isfinite(wait) & np.isfinite(latency)
    if known.sum() < _MIN_PER_BIN or latency[known].mean() <= 0:
        return
    wait, latency = wait[known], latency[known]
    cite = f"{source}: stage_batch_wait_ms against latency_ms"
    facts.add("batch.wait.share_mean", float(wait.mean() / latency.mean()), cite)
    # The typical request's share as well: where the batches the window makes collapse throughput,
    # queueing behind them swells mean latency and dilutes the mean share of the wait that began it.
    positive = latency > 0
    if positive.any():
        facts.add("batch.wait.share_p50", float(np.median(wait[positive] / latency[positive])), cite)
    p50, p99 = np.percentile(wait, [50, 99])
    facts.add("batch.wait.p50_ms", float(p50), cite)
    facts.add("batch.wait.p99_ms", float(p99), cite)
    if "stage_forward_ms" in requests.columns:
        forward = np.nanmedian(requests["stage_forward_ms"].to_numpy(dtype="float64"))
        if forward > 0:
            facts.add(
                "batch.wait_to_forward",
                float(p50 / forward),
                f"{source}: stage_batch_wait_ms, stage_forward_ms",
            )


def _add_size_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    size = requests["batch_size"].to_numpy(dtype="float64")
    forward = requests["stage_forward_ms"].to_numpy(dtype="float64")
    known = np.isfinite(size) & (size >= 1) & np.isfinite(forward) & (forward > 0)
    if known.sum() < _MIN_PER_BIN:
        return
    size, forward = size[known], forward[known]
    cite = f"{source}: batch_size"
    facts.add("batch.size.p50", float(np.median(size)), cite)
    facts.add("batch.size.max", float(size.max()), cite)
    facts.add("batch.fill_ratio", float(np.median(size) / size.max()), cite)
    curve = throughput_curve(size, forward)
    if len(curve) < 3:
        return
    cite = f"{source}: batch_size and stage_forward_ms ({len(curve)} batch-size bins)"
    best = curve["items_per_s"].max()
    knee = curve[curve["items_per_s"] >= _KNEE_LEVEL * best].iloc[0]
    facts.add("batch.curve", _describe(curve), cite)
    facts.add("batch.knee_size", float(knee["size"]), cite)
    facts.add("batch.knee_items_per_s", float(knee["items_per_s"]), cite)
    facts.add("batch.capacity_items_per_s", float(best), cite)
    oversized = size >= 2 * knee["size"]
    facts.add("batch.share_oversized", float(oversized.mean()), cite)
    past = curve[curve["size"] >= 2 * knee["size"]]
    if len(past):
        facts.add(
            "batch.throughput_gain_past_knee",
            float(past["items_per_s"].max() / knee["items_per_s"] - 1),
            cite,
        )
        facts.add(
            "batch.forward_cost_past_knee", float(np.median(forward[oversized]) / knee["forward_ms"]), cite
        )


def throughput_curve(size: np.ndarray, forward: np.ndarray) -> pd.DataFrame:
    """Per size bin (edges a factor sqrt(2) apart): median size, forward time and items per second."""
    edges = np.unique(np.floor(np.sqrt(2.0) ** np.arange(0, 2 * np.log2(size.max()) + 2)))
    bin_of = np.searchsorted(edges, size, side="right")
    frame = pd.DataFrame({"bin": bin_of, "size": size, "forward_ms": forward})
    curve = frame.groupby("bin").agg(
        size=("size", "median"), forward_ms=("forward_ms", "median"), requests=("size", "size")
    )
    curve = curve[curve["requests"] >= _MIN_PER_BIN].reset_index(drop=True)
    curve["items_per_s"] = curve["size"] / curve["forward_ms"] * 1000
    return curve


def _describe(curve: pd.DataFrame) -> str:
    return "; ".join(
        f"size {row.size:g}: {row.items_per_s:,.0f}/s ({row.forward_ms:,.0f} ms)"
        for row in curve.itertuples()
    )
