"""What a load test's own report says of the server under its load (``load_steps``: perf_analyzer's steps).

Triton's statistics split a request's time in the server into its queue (waiting for an instance, the
dynamic batcher's wait included) and its compute. The share of a request's time spent waiting reads
like a utilisation: in an M/M/1 queue it is rho exactly (W_q / W = rho), and a closed loop of N clients
on c instances, saturated, waits 1 - c/N of it. But a queue share alone can also be a batcher holding
requests while the model idles; the model's own busy time tells the two apart: executions times the
compute each took, over the step's window (the server's inferences over the client's inferences a
second). A single instance is busy that share of the time; more than 1 means several computed at once.

A step with one request outstanding (concurrency 1) queues behind nothing: its queue is the scheduler's
own wait, not load, and it is left out of the share. In perf_analyzer's closed loop (a concurrency: each
answer sends the next request) requests queue behind one another only while the model computes, so a
queue share longer than the model's busy share is the batcher holding them for a batch (Triton's
max_queue_delay_microseconds), not load: the ``loadtest.held_*`` facts, batch-window-too-long's evidence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

_BUSY = ("server_executions", "server_compute_ms", "server_inferences")
_BUSY_HOW = "the model's busy time: executions x their compute over the step's window"


def add_load_step_facts(facts: Facts, dump: Dump) -> None:
    steps = dump.summaries.get("load_steps")
    if steps is None or not len(steps) or not {"server_queue_ms", "server_latency_ms"} <= set(steps.columns):
        return
    where = dump.source("load_steps")
    facts.add("loadtest.steps", len(steps), f"{where}: the load test's steps that reported figures")
    queue, latency = _number(steps, "server_queue_ms"), _number(steps, "server_latency_ms")
    ratio = queue / np.where(latency > 0, latency, np.nan)
    _add_held(facts, steps, ratio, where)
    loaded = (_number(steps, "concurrency") >= 2) | np.isfinite(_number(steps, "rate_rps"))
    share = np.where(loaded, ratio, np.nan)
    if not np.isfinite(share).any():
        return
    at = int(np.nanargmax(share))
    step = steps.iloc[at]
    cited = _cited(where, step)
    facts.add("loadtest.queue_load", _load(step), cited)
    facts.add("loadtest.queue_share", float(share[at]), cited)
    facts.add("loadtest.queue_ms", float(queue[at]), cited)
    facts.add("loadtest.server_latency_ms", float(latency[at]), cited)
    busy = _busy(step)
    if busy is not None:
        facts.add("loadtest.model_busy", busy, cited)


def _add_held(facts: Facts, steps: pd.DataFrame, share_of: np.ndarray, where: str) -> None:
    """The step of the closed loop whose queue the load cannot make, a share of the server's time longer
    than the model's busy share: the longest such share."""
    busy = np.array([np.nan if (b := _busy(row)) is None else b for _, row in steps.iterrows()])
    closed = np.isfinite(_number(steps, "concurrency"))
    held = closed & np.isfinite(share_of) & np.isfinite(busy) & (share_of > busy)
    if not held.any():
        return
    at = int(np.nanargmax(np.where(held, share_of, np.nan)))
    step = steps.iloc[at]
    cited = _cited(where, step)
    facts.add("loadtest.held_load", _load(step), cited)
    facts.add("loadtest.held_share", float(share_of[at]), cited)
    facts.add("loadtest.held_ms", _value(step, "server_queue_ms"), cited)
    facts.add("loadtest.held_compute_ms", _value(step, "server_compute_ms"), cited)
    facts.add("loadtest.held_busy", float(busy[at]), cited)


def _cited(where: str, step: pd.Series) -> str:
    """One citation for every figure of a step: its file, load and line, and how the busy time is had."""
    line = f", line {int(step['line'])}" if pd.notna(step.get("line")) else ""
    return f"{where} (the step at {_load(step)}{line}: the server's statistics; {_BUSY_HOW})"


def _busy(step: pd.Series) -> float | None:
    """Seconds the model computed per second of the step, where the report gives what it takes."""
    executions, compute_ms, inferences = (_value(step, name) for name in _BUSY)
    batch = _value(step, "batch_size")
    per_second = _value(step, "throughput_rps") * (batch if np.isfinite(batch) else 1.0)  # inferences
    window_s = inferences / per_second if per_second > 0 else np.nan
    busy = executions * compute_ms / 1000 / window_s
    return float(busy) if np.isfinite(busy) else None


def _load(step: pd.Series) -> str:
    concurrency = _value(step, "concurrency")
    if np.isfinite(concurrency):
        return f"concurrency {concurrency:.0f}"
    return f"{_value(step, 'rate_rps'):.3g} req/s offered"


def _value(step: pd.Series, name: str) -> float:
    value = pd.to_numeric(pd.Series([step.get(name)]), errors="coerce").iloc[0]
    return float(value) if pd.notna(value) else np.nan


def _number(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
