"""Counterfactuals on the evidence: the latency the dump would have shown without a cause.

Each sets aside the requests the cause touched, and P50 and P99 are those of
the others. Their interval is the block bootstrap compare uses
(diagnose/bootstrap.py): whole stretches of time resampled, since a slow
minute makes many slow requests, with the set-aside requests weighted out of
every replicate.

- Cold-start contamination: the requests served cold (the run of slow requests
  after each start that facts/coldstart.py finds). A warm-up before traffic
  (or a readiness probe that waits for it) buys about the difference.
- Co-located contention: the requests that arrived while the contending
  process ran (its episodes, as facts/spikes.py names it). Moving the job off
  the host, or out of the service's busy hours, buys about the difference.

Others change each request rather than set some aside, and say what they
assume:

- GPU throttling: the requests the throttled GPU served in its slowed seconds
  run their forward pass at the speed the same GPU's requests had in its other
  seconds (gpu.throttle_forward_cost, measured, not the clock ratio: memory-bound
  kernels slow less than the clock). The queue the slow seconds built is
  left as it was, so the gain is a floor where the GPU was busy.
- Queue saturation: each request's queue wait at most the mean wait of the
  dump's own windows whose arrivals were at or below 70 % of the knee (the rate
  the remedy runs at): what capacity for the busiest windows buys, said as the
  factor of today's capacity it takes.
- Batch window too long: each request waits for its batch no longer than the
  window the rule's remedy starts from (5 ms, or a quarter of the median
  forward pass if shorter). The forward pass is left as it was: at the light
  load this cause needs, the smaller batches cost the GPU about the same time
  each, which it has.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pandas as pd

from diagnose.bootstrap import Resampled, interval, replicate_weights, time_blocks
from diagnose.detect import SpikeAnalysis
from diagnose.dump.model import Dump
from diagnose.facts.coldstart import cold_requests
from diagnose.facts.queueing import RECOMMENDED, QueueWindows, knee_of, queue_windows
from diagnose.facts.spikes import contender
from diagnose.facts.throttle import slowed_requests
from diagnose.gain.model import ExpectedGain, GainFigure
from diagnose.gain.replay import replay_window

_QUANTILES = (("p50", 0.5), ("p99", 0.99))
_MIN_LEFT = 50  # requests left after setting the cause's aside, for a P99 worth stating
_SHORT_WINDOW_MS = 5.0  # where batch-window-too-long's remedy starts the window


# Causes whose fix's gain the evidence cannot honestly give, and why: the report says so rather than
# show nothing, or a constant.
_NO_COUNTERFACTUAL = {
    "cpu-bound-stage": (
        "none computed: what a fix gains depends on the remedy (a faster implementation removes the "
        "stage's CPU, more workers only the wait for it), and the dump times the stage as it runs, not "
        "as faster code would"
    ),
    "memory-fragmentation": (
        "none in latency: the fix gains the out-of-memory errors avoided and the memory the allocator "
        "holds in pieces (the evidence above gives it), not a latency the dump can replay"
    ),
    "kv-cache-pressure": (
        "none computed: the requests the engine preempted cannot be told in the request log (vLLM V0 "
        "names its own sequence groups, V1 and SGLang only count them), so their time to first token "
        "cannot be set aside"
    ),
}


Counterfactual = Callable[[Dump, SpikeAnalysis | None], ExpectedGain | None]
# Each cause's counterfactual, registered where it is written (``@counterfactual(rule_id)``).
_COUNTERFACTUALS: dict[str, Counterfactual] = {}


def counterfactual(rule_id: str) -> Callable[[Counterfactual], Counterfactual]:
    """Register the function below as what removing ``rule_id``'s cause would gain, on the dump."""

    def register(function: Counterfactual) -> Counterfactual:
        if rule_id in _COUNTERFACTUALS or rule_id in _NO_COUNTERFACTUAL:
            raise ValueError(f"{rule_id}: a second counterfactual")
        _COUNTERFACTUALS[rule_id] = function
        return function

    return register


def no_counterfactual(cause: str) -> str | None:
    """Why ``cause`` has no expected gain, where that is known rather than not yet written."""
    return _NO_COUNTERFACTUAL.get(cause)


def counterfactual_causes() -> frozenset[str]:
    """The causes that have a counterfactual here (whether a dump allows it is another matter)."""
    return frozenset(_COUNTERFACTUALS)


def expected_gain(cause: str, dump: Dump, spikes: SpikeAnalysis | None = None) -> ExpectedGain | None:
    """The counterfactual for ``cause`` where one exists and the evidence allows it; else None."""
    counterfactual = _COUNTERFACTUALS.get(cause)
    return counterfactual(dump, spikes) if counterfactual is not None else None


@counterfactual("cold-start-contamination")
def _cold_start(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    if requests is None:
        return None
    found = cold_requests(dump, requests)
    if found is None or not found[0].any():
        return None
    cold, windows = found
    longest = max(windows) if windows else 0.0
    starts = len(windows)
    how = (
        f"the {int(cold.sum()):,} requests served cold set aside (after {starts} start"
        f"{'s' if starts != 1 else ''}, up to {longest:.0f} s after one): what a warm-up before traffic buys"
    )
    return _without(dump, requests, cold, how)


@counterfactual("co-located-contention")
def _co_located(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    chosen = contender(spikes) if spikes is not None and requests is not None else None
    if chosen is None or requests is None:
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    during = np.zeros(ts.size, dtype=bool)
    # the dump's rows are sorted by ts (dump/model.py): each run's requests are a slice, found by a
    # search (a day's periodic job has a hundred runs; a comparison of every request with each was 1.5 s)
    starts = np.searchsorted(ts, [run.start for run in chosen.runs], side="left")
    ends = np.searchsorted(ts, [run.end for run in chosen.runs], side="left")
    for start, end in zip(starts, ends, strict=True):
        during[start:end] = True
    if not during.any():
        return None
    meta = chosen.found.signal.meta
    who = meta.get("cmdline") or meta.get("name") or chosen.found.signal.name
    how = (
        f"the {int(during.sum()):,} requests that arrived during the {len(chosen.runs)} runs of `{who}` "
        "set aside: "
        "what moving the job off the host, or out of the service's hours, buys"
    )
    return _without(dump, requests, during, how)


@counterfactual("gpu-throttling")
def _throttling(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    found = slowed_requests(dump, requests) if requests is not None else None
    if found is None or requests is None:
        return None
    slowed, cost, gpu = found
    if not slowed.any() or cost <= 1.0:
        return None
    forward = pd.to_numeric(requests["stage_forward_ms"], errors="coerce").to_numpy(dtype="float64")
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    saved = np.where(slowed & np.isfinite(forward), forward * (1 - 1 / cost), 0.0)
    how = (
        f"the forward pass of the {int(slowed.sum()):,} requests {gpu} served while it reported a slowing "
        f"reason made {cost:.2f}x faster, as fast as its other requests: what restoring its clocks buys "
        "(the queue its slow seconds built is left as it was: a floor where the GPU was busy)"
    )
    return _changed(dump, requests, latency - saved, how, "stage_forward_ms")


@counterfactual("batch-window-too-long")
def _batch_window(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    if requests is None or "stage_batch_wait_ms" not in requests.columns:
        return None
    wait = pd.to_numeric(requests["stage_batch_wait_ms"], errors="coerce").to_numpy(dtype="float64")
    window = _SHORT_WINDOW_MS
    if "stage_forward_ms" in requests.columns:
        forward = pd.to_numeric(requests["stage_forward_ms"], errors="coerce").to_numpy(dtype="float64")
        if np.isfinite(forward).any():
            window = min(window, float(np.nanmedian(forward)) / 4)
    saved = np.clip(np.nan_to_num(wait) - window, 0.0, None)
    if not (saved > 0).any():
        return None
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    # a batcher replayed on 1 in N of the arrivals would make batches N times too small
    replayed = replay_window(requests, window) if dump.request_sample is None else None
    if replayed is not None:
        how = (
            f"the batcher replayed on the dump's own arrivals with a {window:.1f} ms window, the one the "
            f"remedy starts from: batches of up to {replayed.max_batch} on {replayed.instances} model "
            f"instance{'s' if replayed.instances != 1 else ''}, a batch of n as long as its slowest member "
            f"alone x n^{replayed.growth:.2f} (members alone read by input length from the "
            f"{replayed.alone:,} requests that ran alone; the growth from the dump's own batches)"
        )
        columns = "stage_batch_wait_ms, stage_queue_ms, stage_forward_ms, batch_size, input_len"
        return _changed(dump, requests, replayed.latency_ms, how, columns)
    why = (
        "the request table is a sample, on which no batcher can be replayed"
        if dump.request_sample is not None
        else "too few requests ran alone, or the log has no batch_size or input_len"
    )
    how = (
        f"each request's wait for its batch cut to at most {window:.1f} ms, the window the remedy starts "
        f"from (forward passes as they were: {why}, to say what smaller batches cost)"
    )
    return _changed(dump, requests, latency - saved, how, "stage_batch_wait_ms")


@counterfactual("queue-saturation")
def _queue(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    found = queue_windows(dump) if requests is not None and "stage_queue_ms" in requests.columns else None
    if requests is None or not isinstance(found, QueueWindows):
        return None
    knee = knee_of(found)
    calm = found.wait_ms[found.rate_rps <= RECOMMENDED * knee] if knee is not None else np.array([])
    if knee is None or not calm.size:
        return None
    target, calm_wait = RECOMMENDED * knee, float(calm.mean())
    queue = np.nan_to_num(
        pd.to_numeric(requests["stage_queue_ms"], errors="coerce").to_numpy(dtype="float64")
    )
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    how = (
        f"each request's queue wait at most {calm_wait:.1f} ms, the mean wait of the dump's own windows "
        "whose "
        f"arrivals were at or below {target:.1f}/s ({RECOMMENDED:.0%} of the knee at {knee:.1f}/s): what "
        f"capacity for the busiest windows buys, {float(found.rate_rps.max()) / target:.1f}x what served "
        "them, as replicas or a faster model (a floor: that capacity leaves the other windows calmer still)"
    )
    return _changed(dump, requests, latency - queue + np.minimum(queue, calm_wait), how, "stage_queue_ms")


def _requests(dump: Dump) -> pd.DataFrame | None:
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns or len(requests) < _MIN_LEFT:
        return None
    return requests


def _without(dump: Dump, requests: pd.DataFrame, aside: np.ndarray, how: str) -> ExpectedGain | None:
    """P50 and P99 of the requests not ``aside``, with their intervals, against all of them now."""
    kept = ~aside
    if kept.sum() < _MIN_LEFT:
        return None
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    return _figures(dump, requests, latency, kept.astype("float64"), how, "latency_ms")


def _changed(
    dump: Dump, requests: pd.DataFrame, changed: np.ndarray, how: str, column: str
) -> ExpectedGain | None:
    """P50 and P99 of every request's latency as the counterfactual changed it, against them now."""
    return _figures(dump, requests, changed, None, how, f"latency_ms, {column}")


def _figures(
    dump: Dump, requests: pd.DataFrame, values: np.ndarray, weights: np.ndarray | None, how: str, cite: str
) -> ExpectedGain | None:
    ts = requests["ts"].to_numpy(dtype="float64")
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    blocks = time_blocks(ts, latency)  # the blocks the latency as it was asks for, on both sides
    salt = zlib.crc32(f"{ts.size}|{ts[0]:.3f}|{ts[-1]:.3f}".encode())
    resampled = Resampled(values, blocks, replicate_weights(blocks, salt), weights)
    qs = [q for _, q in _QUANTILES]
    now = np.quantile(latency[np.isfinite(latency)], qs)
    expected = resampled.quantiles(qs)
    replicates = resampled.replicate_quantiles(qs)
    figures = []
    for column, ((name, _), current, value) in enumerate(zip(_QUANTILES, now, expected, strict=True)):
        low, high = interval(replicates[column])  # rows: one per quantile
        figures.append(
            GainFigure(
                name,
                round(float(current), 2),
                round(float(value), 2),
                None if not np.isfinite(low) else round(float(low), 2),
                None if not np.isfinite(high) else round(float(high), 2),
            )
        )
    return ExpectedGain(tuple(figures), how, blocks.method, f"{dump.source('requests')}: {cite}")
