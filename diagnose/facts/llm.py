"""Text generation's two latencies: time to the first token (TTFT) and time per output token (TPOT).

TTFT is set by queueing and prefill, TPOT by decode and whatever shares the
batch; a rise in one says something different from a rise in the other. They
come from the request log's ``ttft_ms`` and ``tpot_ms`` columns, or, where only
stages are logged, from them: TTFT as the latency before generation
(``latency_ms - stage_decode_ms``) and TPOT as ``stage_decode_ms / (output_len - 1)``.
Each figure's source says which.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.facts.model import Facts

_POINTS = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
_MIN_REQUESTS = 10
LONG_PROMPT_FACTOR = 4.0  # a prompt this many times the median: its prefill alone fills a step
MIN_LONG_PROMPTS = 3
_MIN_GROUP = 20
_INTERFERENCE_FACTS = (
    "llm.long_prompt_tokens",
    "tpot.during_long_prefill_p50_ms",
    "tpot.clear_p50_ms",
    "tpot.long_prefill_ratio",
    "tpot.long_prefill_share",
)


def add_llm_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    for name, (values, how) in {"ttft": _ttft(requests), "tpot": _tpot(requests)}.items():
        if values is None:
            continue
        known = values[np.isfinite(values) & (values >= 0)]
        if known.size < _MIN_REQUESTS:
            continue
        cite = f"{source}: {how}, {known.size:,} requests"
        points = dict(zip(_POINTS, np.percentile(known, list(_POINTS.values())), strict=True))
        facts.summary.llm[name] = {**{k: float(v) for k, v in points.items()}, "source": how}
        for point, value in points.items():
            facts.add(f"{name}.{point}_ms", float(value), cite)


def add_interference_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    """Does generation slow down while long prompts are prefilled beside it?

    Without chunked prefill, a step that prefills a long prompt takes as long
    as that prefill, and every request generating in that step waits for it:
    its time per output token rises although nothing about it changed. So the
    requests are split by whether a long prompt (at least LONG_PROMPT_FACTOR x
    the median prompt) was prefilled while they were generating, i.e. whether
    that prompt's first token came between their own first and last token,
    and their median TPOTs compared. Busy periods raise TPOT for everyone;
    comparing by the prompts' length, not their number, keeps load out of it.
    """
    ttft, _ = _ttft(requests)
    tpot, _ = _tpot(requests)
    if ttft is None or tpot is None or "input_len" not in requests.columns:
        return
    arrival = _column(requests, "ts")
    prompt = _column(requests, "input_len")
    first = arrival + ttft / 1000
    last = arrival + _column(requests, "latency_ms") / 1000
    known_prompt = prompt[np.isfinite(prompt) & (prompt > 0)]
    if known_prompt.size < _MIN_REQUESTS:
        return
    threshold = LONG_PROMPT_FACTOR * float(np.median(known_prompt))
    long_prefills = np.sort(first[(prompt >= threshold) & np.isfinite(first)])
    cite = f"{source}: ts, input_len, latency_ms and first-token times ({len(long_prefills)} prompts of >= "
    cite += f"{threshold:,.0f} tokens)"
    if long_prefills.size < MIN_LONG_PROMPTS:
        facts.cannot(
            _INTERFERENCE_FACTS,
            f"{MIN_LONG_PROMPTS} prompts of {LONG_PROMPT_FACTOR:g}x the median length "
            f"({threshold:,.0f} tokens) or more; {source} has {long_prefills.size}",
        )
        return
    usable = (
        np.isfinite(tpot) & np.isfinite(first) & np.isfinite(last) & (last > first) & (prompt < threshold)
    )
    overlapped = (
        np.searchsorted(long_prefills, last, "right") - np.searchsorted(long_prefills, first, "right") > 0
    )
    during, clear = tpot[usable & overlapped], tpot[usable & ~overlapped]
    if during.size < _MIN_GROUP or clear.size < _MIN_GROUP:
        facts.cannot(
            _INTERFERENCE_FACTS,
            f"{_MIN_GROUP} requests generating during a long prefill and "
            f"{_MIN_GROUP} not ({during.size} and {clear.size})",
        )
        return
    facts.add("llm.long_prompt_tokens", threshold, cite)
    facts.add("tpot.during_long_prefill_p50_ms", float(np.median(during)), cite)
    facts.add("tpot.clear_p50_ms", float(np.median(clear)), cite)
    facts.add("tpot.long_prefill_ratio", float(np.median(during) / np.median(clear)), cite)
    facts.add("tpot.long_prefill_share", float(during.size / (during.size + clear.size)), cite)


def _ttft(requests: pd.DataFrame) -> tuple[np.ndarray | None, str]:
    if "ttft_ms" in requests.columns:
        return _column(requests, "ttft_ms"), "ttft_ms"
    if "stage_decode_ms" in requests.columns:
        before = _column(requests, "latency_ms") - _column(requests, "stage_decode_ms")
        return before, "latency_ms - stage_decode_ms (the time before generation)"
    return None, ""


def _tpot(requests: pd.DataFrame) -> tuple[np.ndarray | None, str]:
    if "tpot_ms" in requests.columns:
        return _column(requests, "tpot_ms"), "tpot_ms"
    if {"stage_decode_ms", "output_len"} <= set(requests.columns):
        tokens = _column(requests, "output_len") - 1
        per_token = np.where(tokens > 0, _column(requests, "stage_decode_ms") / np.maximum(tokens, 1), np.nan)
        return per_token, "stage_decode_ms / (output_len - 1)"
    return None, ""


def _column(requests: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(requests[name], errors="coerce").to_numpy(dtype="float64")
