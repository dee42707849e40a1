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

_BUSY_HOW = "the model's busy time: executions x their compute over the step's window"


def add_load_step_facts(facts: Facts, dump: Dump) -> None:
    steps = dump.summaries.get("load_steps")
    if steps is None or not len(steps):
        return
    _add_first_token_facts(facts, dump, steps)
    if {"server_queue_ms", "server_latency_ms"} <= set(steps.columns):
        _add_server_facts(facts, dump, steps)


def _add_first_token_facts(facts: Facts, dump: Dump, steps: pd.DataFrame) -> None:
    """A text-generation benchmark's runs: how much of the median request's time to first token its own
    work cannot account for. Without waiting, a request's first token comes after the engine's step in
    flight ends and a step with its prefill in it: two decode steps (TPOT, the pace of decoding; ITL where
    the tool printed no TPOT), plus its prompt's compute. The engine completed a request every D / N
    seconds of the run, prefilling one prompt on average in that time among everything else it did, so
    a prompt takes it at most that long. What a first token takes beyond that bound was spent behind
    other requests: a queue, the client's or the engine's."""
    first_token = _number(steps, "ttft_p50_ms")
    step_ms = _number(steps, "tpot_p50_ms")
    step_ms = np.where(np.isfinite(step_ms), step_ms, _number(steps, "itl_p50_ms"))
    throughput = _number(steps, "throughput_rps")
    bound = 2 * step_ms + 1000 / np.where(throughput > 0, throughput, np.nan)
    share = np.clip(1 - bound / np.where(first_token > 0, first_token, np.nan), 0, 1)
    if not np.isfinite(share).any():
        return
    at = int(np.nanargmax(share))
    line = _number(steps, "line")[at]
    cited = f"{dump.source('load_steps')} (the run at line {line:.0f}: the tool's own figures)"
    facts.add("loadtest.first_token_wait_share", float(share[at]), cited)
    facts.add("loadtest.first_token_load", _run_load(steps, at), cited)
    facts.add("loadtest.first_token_ms", float(first_token[at]), cited)
    facts.add("loadtest.first_token_bound_ms", float(bound[at]), cited)
    facts.add("loadtest.completed_while_waiting", float(first_token[at] / 1000 * throughput[at]), cited)


def _run_load(steps: pd.DataFrame, at: int) -> str:
    """A benchmark run's load as its tool said it: requests, rate (inf: all sent at once), concurrency."""
    requests, rate = _number(steps, "requests")[at], _number(steps, "rate_rps")[at]
    concurrency, in_flight = _number(steps, "concurrency")[at], _number(steps, "concurrency_mean")[at]
    said = [f"{requests:,.0f} requests"] if np.isfinite(requests) else []
    if np.isfinite(rate):
        said.append(f"at {rate:.3g} req/s")
    if np.isfinite(concurrency):
        said.append(f"at most {concurrency:.0f} outstanding")
    elif _number(steps, "sent_at_once")[at] == 1:
        said.append("all sent at once (request rate inf)")
    if np.isfinite(in_flight) and not np.isfinite(concurrency):
        said.append(f"{in_flight:,.0f} in flight on average")
    return ", ".join(said) or "its load not printed"


def _add_server_facts(facts: Facts, dump: Dump, steps: pd.DataFrame) -> None:
    """perf_analyzer's steps with Triton's statistics: the queue's share and the model's busy time."""
    where = dump.source("load_steps")
    facts.add("loadtest.steps", len(steps), f"{where}: the load test's steps that reported figures")
    queue, latency = _number(steps, "server_queue_ms"), _number(steps, "server_latency_ms")
    ratio = queue / np.where(latency > 0, latency, np.nan)
    busy = _busy(steps)
    concurrency = _number(steps, "concurrency")
    # The closed loop's steps whose queue the load cannot make: longer than the model's busy share
    held = np.isfinite(concurrency) & np.isfinite(ratio) & np.isfinite(busy) & (ratio > busy)
    if held.any():
        at = int(np.nanargmax(np.where(held, ratio, np.nan)))
        cited = _cited(where, steps, at)
        facts.add("loadtest.held_load", _load(steps, at), cited)
        facts.add("loadtest.held_share", float(ratio[at]), cited)
        facts.add("loadtest.held_ms", float(queue[at]), cited)
        facts.add("loadtest.held_compute_ms", float(_number(steps, "server_compute_ms")[at]), cited)
        facts.add("loadtest.held_busy", float(busy[at]), cited)
    share = np.where((concurrency >= 2) | np.isfinite(_number(steps, "rate_rps")), ratio, np.nan)
    if not np.isfinite(share).any():
        return
    at = int(np.nanargmax(share))
    cited = _cited(where, steps, at)
    facts.add("loadtest.queue_load", _load(steps, at), cited)
    facts.add("loadtest.queue_share", float(share[at]), cited)
    facts.add("loadtest.queue_ms", float(queue[at]), cited)
    facts.add("loadtest.server_latency_ms", float(latency[at]), cited)
    if np.isfinite(busy[at]):
        facts.add("loadtest.model_busy", float(busy[at]), cited)


def _busy(steps: pd.DataFrame) -> np.ndarray:
    """Seconds the model computed per second of each step (nan where the report lacks a figure it takes):
    executions x their compute over the step's window, the server's inferences over the client's a second."""
    batch = _number(steps, "batch_size")
    per_second = _number(steps, "throughput_rps") * np.where(np.isfinite(batch), batch, 1.0)  # inferences
    window_s = _number(steps, "server_inferences") / np.where(per_second > 0, per_second, np.nan)
    return _number(steps, "server_executions") * _number(steps, "server_compute_ms") / 1000 / window_s


def _cited(where: str, steps: pd.DataFrame, at: int) -> str:
    """One citation for every figure of a step: its file, load and line, and how the busy time is had."""
    line = _number(steps, "line")[at]
    said = f", line {line:.0f}" if np.isfinite(line) else ""
    return f"{where} (the step at {_load(steps, at)}{said}: the server's statistics; {_BUSY_HOW})"


def _load(steps: pd.DataFrame, at: int) -> str:
    concurrency = _number(steps, "concurrency")[at]
    if np.isfinite(concurrency):
        return f"concurrency {concurrency:.0f}"
    return f"{_number(steps, 'rate_rps')[at]:.3g} req/s offered"


def _number(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
