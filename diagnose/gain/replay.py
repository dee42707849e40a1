"""A dynamic batcher replayed on the dump's own arrivals with another window: what a shorter window buys.

The requests reach the batcher when their other stages are done (their
arrival plus every stage but the queue, the batch wait and the forward
pass). The batcher takes the first request waiting once a model instance is
free, waits up to the window for more (up to the largest batch the dump
shows), and runs the batch; the batch takes as long as its slowest member
alone would: a request's forward pass alone is read from the dump's own
requests that ran alone, by input length (a batch padded to its longest
prompt costs about that prompt's time; a GPU that amortises a batch, about
one request's). The instances are as many as the dump's batches ran at once.

Everything the replay uses is the dump's: arrivals, other stages, forward
times alone, batch sizes. What it cannot see (a scheduler's own overheads, a
GPU whose batches cost more than their slowest member) it leaves out.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

_MIN_ALONE = 30  # requests that ran alone, to read a forward pass alone by length
_NEIGHBOURS = 15  # each length's forward pass alone: the median of the nearest lengths' runs


@dataclass(frozen=True)
class Replayed:
    latency_ms: np.ndarray  # each request's latency with the new window
    instances: int
    max_batch: int
    alone: int  # requests that ran alone, whose forward passes set the replay's
    growth: float  # a batch of n takes its slowest member's time alone x n ** growth (the dump's own)


def replay_window(requests: pd.DataFrame, window_ms: float) -> Replayed | None:
    """Each request's latency had the batcher waited at most ``window_ms``; None without the columns."""
    need = {"ts", "latency_ms", "stage_batch_wait_ms", "stage_forward_ms", "batch_size", "input_len"}
    if not need <= set(requests.columns):
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    latency, wait, forward, size, length = (
        pd.to_numeric(requests[c], errors="coerce").to_numpy(dtype="float64")
        for c in ("latency_ms", "stage_batch_wait_ms", "stage_forward_ms", "batch_size", "input_len")
    )
    queue = (
        pd.to_numeric(requests["stage_queue_ms"], errors="coerce").fillna(0.0).to_numpy(dtype="float64")
        if "stage_queue_ms" in requests.columns
        else np.zeros(ts.size)
    )
    known = np.isfinite(latency) & np.isfinite(wait) & np.isfinite(forward) & np.isfinite(length)
    alone = known & (size == 1)
    alone_of = _forward_alone(length[alone], forward[alone])
    if alone_of is None:
        return None
    other = np.maximum(latency - queue - wait - forward, 0.0)
    arrive = ts + other / 1000
    started = arrive + (queue + wait) / 1000
    batch = _batch_labels(started, forward)
    instances = _instances(started[known], forward[known])
    max_batch = int(np.nanmax(size)) if np.isfinite(size).any() else 1
    growth = _batch_growth(batch, size, length, forward, alone_of)
    # A request that ran alone keeps its own forward time; one that ran in a batch takes the time its
    # length takes alone, times one of the alone runs' own spreads around that (drawn in a fixed order):
    # a median alone would smooth away the slow runs the tail is made of.
    expected_alone = alone_of(length)
    spread = forward[alone] / np.where(expected_alone[alone] > 0, expected_alone[alone], np.nan)
    spread = spread[np.isfinite(spread)]
    drawn = np.random.default_rng(ts.size).choice(spread, size=ts.size) if spread.size else np.ones(ts.size)
    own = np.where(alone, forward, expected_alone * drawn)
    new = _batches(arrive[known], own[known] / 1000, window_ms / 1000, max_batch, instances, growth)
    replayed = latency.copy()  # a request the replay cannot place keeps its latency
    replayed[known] = other[known] + sum(new) * 1000
    return Replayed(replayed, instances, max_batch, int(alone.sum()), growth)


def _forward_alone(length: np.ndarray, forward: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function of input length: the forward pass of a request run alone, from those that did."""
    if length.size < _MIN_ALONE:
        return None
    order = np.argsort(length, kind="stable")
    lengths = length[order]
    medians = pd.Series(forward[order]).rolling(_NEIGHBOURS, center=True, min_periods=1).median().to_numpy()
    # Past the longest (or below the shortest) prompt that ran alone, the edge's time scaled by length to
    # the power the alone runs themselves follow (a log-log fit): the longest prompts of a recording are
    # the ones a batch window most often put in a batch, and they set the tail.
    positive = (length > 0) & (forward > 0)
    power = 1.0
    if positive.sum() >= _MIN_ALONE and np.ptp(np.log(length[positive])) > 0:
        fitted = np.polyfit(np.log(length[positive]), np.log(forward[positive]), 1)[0]
        power = float(np.clip(fitted, 0.5, 2.0))

    def alone(wanted: np.ndarray) -> np.ndarray:
        index = np.clip(np.searchsorted(lengths, wanted), 0, lengths.size - 1)
        edge = np.clip(wanted, max(lengths[0], 1e-9), lengths[-1])
        scale = np.where(wanted > 0, (np.maximum(wanted, 1e-9) / edge) ** power, 1.0)
        return medians[index] * scale

    return alone


def _batch_labels(started: np.ndarray, forward_ms: np.ndarray) -> np.ndarray:
    """Which batch each request ran in: its members share the batch's forward time and start within a
    few milliseconds of each other (each request's start is its own arrival plus its own stages)."""
    order = np.argsort(started, kind="stable")
    same = (np.diff(started[order]) < 0.005) & (np.diff(forward_ms[order]) == 0)
    labels = np.empty(started.size, dtype="int64")
    labels[order] = np.cumsum(np.concatenate([[True], ~same])) - 1
    return labels


def _batch_growth(
    batch: np.ndarray,
    size: np.ndarray,
    length: np.ndarray,
    forward: np.ndarray,
    alone_of: Callable[[np.ndarray], np.ndarray],
) -> float:
    """How a batch's time grows with its size, from the dump's own batches: time = the slowest member's
    alone x size ** growth, fitted (log-log) on batches of two or more. About 1 where a batch is padded
    to its longest prompt and run on a CPU; near 0 on a GPU that amortises it. 0 without such batches."""
    frame = pd.DataFrame({"batch": batch, "size": size, "length": length, "forward": forward})
    per = frame.groupby("batch").agg(
        size=("size", "max"), length=("length", "max"), forward=("forward", "max")
    )
    per = per[(per["size"] >= 2) & (per["forward"] > 0)]
    if len(per) < _MIN_ALONE:
        return 0.0
    ratio = per["forward"].to_numpy() / alone_of(per["length"].to_numpy())
    good = np.isfinite(ratio) & (ratio > 0)
    if good.sum() < _MIN_ALONE:
        return 0.0
    logs = np.log(per["size"].to_numpy()[good])
    return float(np.clip(np.sum(logs * np.log(ratio[good])) / np.sum(logs * logs), 0.0, 1.5))


def _instances(started: np.ndarray, forward_ms: np.ndarray) -> int:
    """How many batches ran at once (the 99th percentile, against the odd overlap of clocks).

    A batch's members share its forward time and start within a few milliseconds of each other (each
    request's start is its own arrival plus its own stages): consecutive starts with the same forward
    time within 5 ms are one batch.
    """
    order = np.argsort(started, kind="stable")
    starts, takes = started[order], forward_ms[order]
    same = (np.diff(starts) < 0.005) & (np.diff(takes) == 0)
    first = np.concatenate([[True], ~same])
    starts, ends = starts[first], starts[first] + takes[first] / 1000
    if starts.size < 2:
        return 1
    running = np.arange(1, starts.size + 1) - np.searchsorted(np.sort(ends), starts, side="right")
    return max(1, int(np.percentile(running, 99)))


def _batches(
    arrive: np.ndarray, alone_s: np.ndarray, window_s: float, max_batch: int, instances: int, growth: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FCFS batches on ``instances`` model instances: each request's queue, batch wait and forward (s)."""
    order = np.argsort(arrive, kind="stable")
    n = order.size
    queue, wait, forward = np.zeros(n), np.zeros(n), np.zeros(n)
    free = [float(arrive[order[0]])] * instances
    heapq.heapify(free)
    i = 0
    while i < n:
        first = order[i]
        formed = max(float(arrive[first]), heapq.heappop(free))  # the first waiting, once an instance is free
        deadline = formed + window_s
        j = i + 1
        while j < n and j - i < max_batch and arrive[order[j]] <= deadline:
            j += 1
        members = order[i:j]
        full = j - i == max_batch
        dispatched = max(formed, float(arrive[members[-1]])) if full else deadline
        takes = float(np.max(alone_s[members])) * len(members) ** growth
        heapq.heappush(free, dispatched + takes)
        joined = np.maximum(formed, arrive[members])
        queue[members] = joined - arrive[members]
        wait[members] = dispatched - joined
        forward[members] = takes
        i = j
    return queue, wait, forward
