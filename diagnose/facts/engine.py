"""What a text-generation engine (vLLM, SGLang, TGI) says of itself: its KV cache, queue and progress.

The ``server`` table holds the engine's gauges, from its stats log lines or
its ``/metrics``; the events hold what it logged once: preemptions, stalled
steps, its death, and the KV capacity it found at start-up. Two failures
live here that no request log shows directly:

- **KV-cache pressure.** When the cache is full, the scheduler preempts
  running requests (recomputing or swapping their cache) and admits no new
  ones: the waiting queue grows while the cache stays full.
- **A stalled engine.** A step that never returns: vLLM's watchdog logs
  "Engine iteration timed out", the engine may die, and in between its stats
  show requests running and no token generated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

FULL_PCT = 95.0  # the cache is full: vLLM keeps a watermark of free blocks, so usage rarely reads 100
AT_CAPACITY = 0.9  # running this close to its highest, with requests waiting: the engine takes no more
QUEUED_FULL_PCT = 90.0  # requests waiting while usage is at least this: waiting for the cache
_ENGINE_EVENTS = (
    "preemption",
    "engine_stall",
    "engine_dead",
    "engine_start_failed",
    "kv_cache_config",
    "kv_cache_full",
    "engine_wait",
    "queue_full",
)
WAIT_S = 60.0  # what a wait line without its figure stands for: vLLM warns after each 60 s of waiting
_CUMULATIVE = re.compile(r"total_num_cumulative_preemption=(\d+)")
# vLLM's "GPU KV cache size: N tokens"; SGLang's "KV Cache is allocated. #tokens: N" and
# "max_total_num_tokens=N, ..., context_len=L" (which also gives the requests of full length it holds).
_CAPACITY_TOKENS = re.compile(
    r"GPU KV cache size: ([\d,]+) tokens|KV Cache is allocated\. #tokens: (\d+)|max_total_num_tokens=(\d+)"
)
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_CONTEXT_LEN = re.compile(r"max_total_num_tokens=(\d+).*?\bcontext_len=(\d+)")


def add_engine_facts(facts: Facts, dump: Dump) -> None:
    server = dump.table("server")
    events = dump.table("events")
    kinds = events["kind"].astype("string") if events is not None and "kind" in events.columns else None
    engine_events = kinds is not None and kinds.isin(list(_ENGINE_EVENTS)).any()
    if server is not None and len(server):
        _add_gauges(facts, server, dump.source("server"), dump.interval("server") or _gap(server))
    if server is None and not engine_events:
        return
    _add_preemptions(facts, server, events, kinds, dump)
    _add_stalls(facts, events, kinds, dump)
    if events is not None and kinds is not None:
        _add_capacity(facts, events[(kinds == "kv_cache_config").to_numpy()], dump.source("events"))


def _column(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in frame.columns:
        return None
    values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype="float64")
    return values if np.isfinite(values).any() else None


def _add_gauges(facts: Facts, server: pd.DataFrame, source: str, interval: float) -> None:
    """The engine's gauges; runs of samples are timed at the table's interval (Dump.interval: its
    writer's where known, a log silent while idle leaving gaps that are not samples)."""
    kv = _column(server, "kv_cache_usage_pct")
    waiting = _column(server, "queue_depth")
    running = _column(server, "running")
    if kv is not None:
        known = kv[np.isfinite(kv)]
        cite = f"{source}: kv_cache_usage_pct, {known.size:,} samples"
        facts.add("engine.kv_usage.max_pct", float(known.max()), cite)
        facts.add("engine.kv_usage.p50_pct", float(np.median(known)), cite)
        facts.add("engine.kv_full_share", float(np.mean(known >= FULL_PCT)), cite)
    for name, values in (("waiting", waiting), ("running", running)):
        if values is not None:
            facts.add(f"engine.{name}.max", float(np.nanmax(values)), f"{source}: {_GAUGE[name]}")
    swapped = _column(server, "swapped")
    if swapped is not None:
        facts.add("engine.swapped.max", float(np.nanmax(swapped)), f"{source}: swapped")
    if kv is not None and waiting is not None:
        both = np.isfinite(kv) & np.isfinite(waiting)
        if both.any():
            queued_full = (waiting[both] > 0) & (kv[both] >= QUEUED_FULL_PCT)
            facts.add(
                "engine.queued_while_full_share",
                float(queued_full.mean()),
                f"{source}: queue_depth > 0 with kv_cache_usage_pct >= {QUEUED_FULL_PCT:g}, "
                f"{int(queued_full.sum())} of {int(both.sum())} samples",
            )
    if waiting is not None and running is not None:
        both = np.isfinite(waiting) & np.isfinite(running)
        ceiling = float(np.nanmax(running)) if both.any() else 0.0
        if ceiling > 0:
            full = (waiting[both] > 0) & (running[both] >= AT_CAPACITY * ceiling)
            cite = (
                f"{source}: queue_depth > 0 with running >= {AT_CAPACITY:.0%} of its highest ({ceiling:.0f})"
            )
            facts.add(
                "engine.saturated_share",
                float(full.mean()),
                f"{cite}, {int(full.sum())} of {int(both.sum())} samples",
            )
            ts = pd.to_numeric(server["ts"], errors="coerce").to_numpy(dtype="float64")[both]
            facts.add(
                "engine.backlog_run_s", _longest_run_s(full, interval), f"{cite}, the longest unbroken run"
            )
            load = _busiest_window(running[both] / ceiling, ts)
            if load is not None:
                facts.add(
                    "engine.rho.max",
                    load,
                    f"{source}: running over its highest ({ceiling:.0f}), "
                    f"the busiest of {_LOAD_WINDOWS} windows",
                )
    _add_no_progress(facts, server, running, interval, source)
    _add_decode_paused(facts, server, running, interval, source)


_GAUGE = {"waiting": "queue_depth", "running": "running"}


def _add_no_progress(
    facts: Facts, server: pd.DataFrame, running: np.ndarray | None, interval: float, source: str
) -> None:
    """The longest run of samples in which requests were in the engine all through, running or waiting,
    and not one token was generated or prefilled. All through is the lesser of the gauges at the
    sample's start (the sample before) and its end: a request that arrived, or was admitted, as an idle
    sample closed was not held in it. A request waiting while nothing runs and nothing is prefilled is
    held as surely as a running one: the scheduler took no step (vLLM's "Running: 0 reqs, Pending: 22
    reqs" at 0 tokens/s). The first sample's start is not known: its gauges at its end stand for it."""
    generated = _column(server, "tokens_per_s")
    if running is None or generated is None:
        return
    prompt = _column(server, "prompt_tokens_per_s")
    progress = generated + (np.nan_to_num(prompt) if prompt is not None else 0.0)
    waiting = _column(server, "queue_depth")
    held = running + (np.nan_to_num(waiting) if waiting is not None else 0.0)
    stuck = (_all_through(held, first_known=True) > 0) & (progress == 0)
    facts.add(
        "engine.no_progress_s",
        _longest_run_s(stuck, interval),
        f"{source}: requests running or waiting from the sample before to this one (running + queue_depth) "
        f"with tokens_per_s = 0, samples every {interval:g} s",
    )


def _add_decode_paused(
    facts: Facts, server: pd.DataFrame, running: np.ndarray | None, interval: float, source: str
) -> None:
    """The longest run of samples in which the engine prefilled and not one decode step ran: a decode
    step gives every running request a token, so fewer tokens in a sample than requests running all
    through it is a sample with none (the first tokens of prompts just prefilled are all it generated).
    Running all through it is the lesser of the gauge at its start (the sample before) and at its end:
    a burst admitted as a sample closes was not waiting in it. vLLM V0 without chunked prefill runs a
    step of prompts alone; back to back, they pause every running request."""
    generated = _column(server, "tokens_per_s")
    prompt = _column(server, "prompt_tokens_per_s")
    if running is None or generated is None or prompt is None:
        return
    if interval <= 0:
        return
    throughout = _all_through(running, first_known=False)
    with np.errstate(invalid="ignore"):
        paused = (throughout >= 1) & (prompt > 0) & (generated * interval < throughout)
    facts.add(
        "engine.decode_paused_s",
        _longest_run_s(paused, interval),
        f"{source}: prompt_tokens_per_s > 0 and fewer tokens generated than requests running from the "
        f"sample before to this one, samples every {interval:g} s",
    )


def _all_through(gauge: np.ndarray, first_known: bool) -> np.ndarray:
    """Each sample's gauge all through it: the lesser of its value at the sample's start (the sample
    before) and at its end. The first sample's start is not known: its end stands for it where
    ``first_known``, else it is NaN."""
    through = np.fmin(gauge, np.concatenate([gauge[:1], gauge[:-1]]))
    if not first_known and through.size:
        through[0] = np.nan
    return through


_LOAD_WINDOWS = 20


def _busiest_window(load: np.ndarray, ts: np.ndarray) -> float | None:
    """The highest mean of ``load`` over equal spans of the samples' time (five samples or more each)."""
    if ts.size < 5 * _LOAD_WINDOWS // 2:
        return None
    edges = np.linspace(ts.min(), ts.max() + 1e-6, _LOAD_WINDOWS + 1)
    slots = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, _LOAD_WINDOWS - 1)
    per = pd.Series(load).groupby(slots).agg(["mean", "size"])
    per = per[per["size"] >= 5]
    return float(per["mean"].max()) if len(per) else None


def _gap(server: pd.DataFrame) -> float:
    """The median gap of a table too short for Dump.interval (two samples: their gap), else 0."""
    ts = pd.to_numeric(server["ts"], errors="coerce").to_numpy(dtype="float64")
    return float(np.median(np.diff(ts))) if ts.size > 1 else 0.0


def _longest_run_s(flags: np.ndarray, interval: float) -> float:
    """The longest run of consecutive flagged samples, in seconds (samples x the table's interval)."""
    longest, run = 0, 0
    for flag in flags:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    return longest * interval


def _add_preemptions(
    facts: Facts,
    server: pd.DataFrame | None,
    events: pd.DataFrame | None,
    kinds: pd.Series | None,
    dump: Dump,
) -> None:
    """The most preemptions any piece of evidence shows (vLLM V0 warns once per 50 of them)."""
    counts = {"events: preemption": 0.0}
    if events is not None and kinds is not None:
        preempted = events[(kinds == "preemption").to_numpy()]
        # SGLang retracts several requests in one line: count them, one where the event does not say
        per_event = (
            pd.to_numeric(preempted["requests"], errors="coerce").fillna(1.0)
            if "requests" in preempted.columns
            else pd.Series(1.0, index=preempted.index)
        )
        counts["events: preemption"] = float(per_event.sum())
        messages: Iterable[str] = (
            preempted["message"].astype("string").fillna("") if "message" in preempted else []
        )
        cumulative = [int(m.group(1)) for text in messages if (m := _CUMULATIVE.search(text))]
        if cumulative:
            counts["total_num_cumulative_preemption in vLLM's warning (since the engine started)"] = float(
                max(cumulative)
            )
    if server is not None and (rate := _column(server, "preemptions_per_s")) is not None:
        ts = pd.to_numeric(server["ts"], errors="coerce").to_numpy(dtype="float64")
        counts[f"{dump.source('server')}: preemptions_per_s"] = float(
            np.nansum(rate[1:] * np.diff(ts)) if ts.size > 1 else 0.0
        )
    where, value = max(counts.items(), key=lambda item: item[1])
    source = dump.source("events") if where.startswith(("events", "total_num")) else ""
    facts.add("engine.preemptions", value, f"{source}: {where}".lstrip(": "))


def _add_stalls(facts: Facts, events: pd.DataFrame | None, kinds: pd.Series | None, dump: Dump) -> None:
    """Stalled steps, deaths, and a full KV cache, each as the engine said it (the events' lines)."""
    source = dump.source("events") if events is not None else "no events"
    for kind, name in (
        ("engine_stall", "engine.stalls"),
        ("engine_dead", "engine.deaths"),
        ("kv_cache_full", "engine.cache_full_statements"),
        ("queue_full", "engine.queue_full_statements"),
    ):
        count = int((kinds == kind).sum()) if kinds is not None else 0
        facts.add(name, count, f"{source}: {kind} events")
    waits = events[(kinds == "engine_wait").to_numpy()] if events is not None and kinds is not None else None
    if waits is not None and len(waits):
        stated = pd.to_numeric(waits.get("seconds", pd.Series(index=waits.index)), errors="coerce")
        facts.add(
            "engine.waited_s",
            float(stated.fillna(WAIT_S).sum()),
            f"{source}: {len(waits)} engine_wait events (seconds each waited){said_by(waits.iloc[0])}",
        )
        facts.add(
            "engine.wait_line", str(waits.iloc[0].get("message", ""))[:200], f"{source}: first engine_wait"
        )
    else:
        facts.add("engine.waited_s", 0.0, f"{source}: engine_wait events")
    for kind, name in (
        ("engine_stall", "engine.stall_line"),
        ("kv_cache_full", "engine.cache_full_line"),
        ("queue_full", "engine.queue_full_line"),
    ):
        if events is not None and kinds is not None and (kinds == kind).any():
            first = events[(kinds == kind).to_numpy()].iloc[0]
            facts.add(name, str(first.get("message", ""))[:200], f"{source}: first {kind}{said_by(first)}")


def said_by(event: pd.Series) -> str:
    """Which catalogued statement an event is (statements/), where the catalogue found it."""
    statement = event.get("statement")
    if not isinstance(statement, str) or not statement:
        return ""
    return f", statement {statement} of {event.get('writer') or 'its writer'} (statements/)"


def _add_capacity(facts: Facts, config: pd.DataFrame, source: str) -> None:
    for text in config.get("message", pd.Series(dtype="string")).astype("string").fillna(""):
        if m := _CAPACITY_TOKENS.search(text):
            tokens = next(group for group in m.groups() if group)
            facts.add("engine.kv_capacity_tokens", int(tokens.replace(",", "")), f"{source}: {text[:120]}")
        if m := _CONCURRENCY.search(text):
            facts.add("engine.max_concurrency", float(m.group(2)), f"{source}: {text[:120]}")
        elif (m := _CONTEXT_LEN.search(text)) and int(m.group(2)) > 0:
            facts.add(
                "engine.max_concurrency",
                int(m.group(1)) / int(m.group(2)),
                f"{source}: max_total_num_tokens / context_len in {text[:120]}",
            )
