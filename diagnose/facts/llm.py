"""Text generation's two latencies: time to the first token (TTFT) and time per output token (TPOT).

TTFT is set by queueing and prefill, TPOT by decode and whatever shares the
batch; a rise in one says something different from a rise in the other. They
come from the request log's ``ttft_ms`` and ``tpot_ms`` columns, or, where only
stages are logged, from them: TTFT as the latency before generation
(``latency_ms - stage_decode_ms``) and TPOT as ``stage_decode_ms / (output_len - 1)``.
Each figure's source says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.facts.length_shift import add_generation_shift_facts
from diagnose.facts.model import Facts, TokenLatency

_POINTS = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
_MIN_REQUESTS = 10
LONG_PROMPT_FACTOR = 4.0  # a prompt this many times the median: its prefill alone fills a step
MIN_LONG_PROMPTS = 3
LOCAL_WINDOW_S = 60.0
_MIN_GROUP = 20
_MIN_STRATUM = 5
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
        p50, p95, p99 = (float(points[k]) for k in ("p50", "p95", "p99"))
        facts.summary.llm[name] = TokenLatency(p50, p95, p99, how)
        for point, value in points.items():
            facts.add(f"{name}.{point}_ms", float(value), cite)


def add_llm_shift_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    """Longer prompts, longer answers, or a slower system? Asked of TTFT and TPOT separately."""
    ttft, _ = _ttft(requests)
    tpot, _ = _tpot(requests)
    add_generation_shift_facts(facts, requests, source, ttft, tpot)


@dataclass(frozen=True)
class InterferenceSplit:
    """The generating requests split by whether a long prompt was prefilled while they generated.

    The facts read its medians; the report's picture draws it (diagnose.pictures.evidence).
    """

    threshold: float  # prompt tokens from which a prompt counts as long
    long_prefills: np.ndarray  # epoch s of each long prompt's first token, sorted
    first: np.ndarray  # each request's first and last token, epoch s
    last: np.ndarray
    tpot: np.ndarray  # ms per output token
    relative: np.ndarray  # TPOT over the median of its minute
    usable: np.ndarray  # bool: generating, short prompt, times known
    overlapped: np.ndarray  # bool: a long prefill came between its first and last token

    @property
    def during(self) -> np.ndarray:
        return self.usable & self.overlapped

    @property
    def clear(self) -> np.ndarray:
        return self.usable & ~self.overlapped


def interference_split(requests: pd.DataFrame, source: str = "the log") -> InterferenceSplit | str | None:
    """Does generation slow down while long prompts are prefilled beside it?

    Without chunked prefill, a step that prefills a long prompt takes as long
    as that prefill, and every request generating in that step waits for it:
    its time per output token rises although nothing about it changed. So the
    requests are split by whether a long prompt (at least LONG_PROMPT_FACTOR x
    the median prompt) was prefilled while they were generating, i.e. whether
    that prompt's first token came between their own first and last token,
    each TPOT taken relative to the median of its minute. Busy periods, and a
    system that slowed down, raise TPOT for everyone in them; comparing within
    the minute, and by the prompts' length rather than their number, keeps
    both out of it.

    None where the log lacks what it needs; a reason (text) where there are too few requests.
    """
    ttft, _ = _ttft(requests)
    tpot, _ = _tpot(requests)
    if ttft is None or tpot is None or "input_len" not in requests.columns:
        return None
    arrival = _column(requests, "ts")
    prompt = _column(requests, "input_len")
    first = arrival + ttft / 1000
    last = arrival + _column(requests, "latency_ms") / 1000
    known_prompt = prompt[np.isfinite(prompt) & (prompt > 0)]
    if known_prompt.size < _MIN_REQUESTS:
        return None
    threshold = LONG_PROMPT_FACTOR * float(np.median(known_prompt))
    long_prefills = np.sort(first[(prompt >= threshold) & np.isfinite(first)])
    if long_prefills.size < MIN_LONG_PROMPTS:
        return (
            f"{MIN_LONG_PROMPTS} prompts of {LONG_PROMPT_FACTOR:g}x the median length "
            f"({threshold:,.0f} tokens) or more; {source} has {long_prefills.size}"
        )
    usable = (
        np.isfinite(tpot) & np.isfinite(first) & np.isfinite(last) & (last > first) & (prompt < threshold)
    )
    overlapped = (
        np.searchsorted(long_prefills, last, "right") - np.searchsorted(long_prefills, first, "right") > 0
    )
    # Each TPOT against the median of its own minute: a system that slowed down (or sped up) for other
    # reasons moves both groups alike, and must not read as interference. Then against the requests that
    # generated beside as many others: a request generating longer, or in a busier moment, meets more
    # long prefills and shares its steps with more requests, and a bigger batch is slower per token
    # whatever was prefilled in it; load must not read as interference either.
    relative = tpot / _local_median(first, tpot, usable)
    crowd = _crowd(_mean_in_flight(arrival, last, first), usable)
    beside_as_many = _stratum_median(relative, crowd, usable & ~overlapped)
    usable &= np.isfinite(beside_as_many)
    relative = relative / beside_as_many
    split = InterferenceSplit(threshold, long_prefills, first, last, tpot, relative, usable, overlapped)
    during, clear = int(split.during.sum()), int(split.clear.sum())
    if during < _MIN_GROUP or clear < _MIN_GROUP:
        return (
            f"{_MIN_GROUP} requests generating during a long prefill and {_MIN_GROUP} not "
            f"({during} and {clear})"
        )
    return split


def add_interference_facts(
    facts: Facts, requests: pd.DataFrame, source: str, sampled: str | None = None
) -> None:
    """TPOT while long prompts were prefilled against TPOT while none was (interference_split).
    ``sampled``: why not, where the table is a sample (a long prefill beside a request may not be in it)."""
    if sampled is not None:
        if {"ttft_ms", "input_len"} <= set(requests.columns):
            facts.cannot(_INTERFERENCE_FACTS, sampled)
        return
    split = interference_split(requests, source)
    if split is None:
        return
    if isinstance(split, str):
        facts.cannot(_INTERFERENCE_FACTS, split)
        return
    cite = f"{source}: ts, input_len, latency_ms and first-token times "
    cite += f"({len(split.long_prefills)} prompts of >= {split.threshold:,.0f} tokens)"
    during, clear = split.relative[split.during], split.relative[split.clear]
    facts.add("llm.long_prompt_tokens", split.threshold, cite)
    facts.add("tpot.during_long_prefill_p50_ms", float(np.median(split.tpot[split.during])), cite)
    facts.add("tpot.clear_p50_ms", float(np.median(split.tpot[split.clear])), cite)
    ratio = float(np.median(during) / np.median(clear))
    facts.add("tpot.long_prefill_ratio", ratio, f"{cite}; each TPOT against the median of its minute")
    facts.add("tpot.long_prefill_share", float(during.size / (during.size + clear.size)), cite)


def _mean_in_flight(arrival: np.ndarray, end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each request, the mean number of requests in flight (itself included) from its first token to
    its end: the integral of the in-flight count, which is piecewise constant, so its running integral is
    piecewise linear and read exactly by interpolation."""
    known = np.isfinite(arrival) & np.isfinite(end) & (end >= arrival)
    times = np.concatenate([arrival[known], end[known]])
    steps = np.concatenate([np.ones(int(known.sum())), -np.ones(int(known.sum()))])
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(steps[order])
    integral = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(times))])
    with np.errstate(invalid="ignore", divide="ignore"):
        spent = np.interp(end, times, integral) - np.interp(first, times, integral)
        return spent / (end - first)


def _crowd(in_flight: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Half-octave classes of the mean in flight (1, 1.4, 2, 2.8, 4, ...): as many others, near enough."""
    return np.where(usable & (in_flight >= 1), np.floor(2 * np.log2(np.maximum(in_flight, 1))), -1)


def _stratum_median(values: np.ndarray, stratum: np.ndarray, among: np.ndarray) -> np.ndarray:
    """For each request, the median of ``values`` over ``among`` in its stratum (NaN where fewer than
    _MIN_STRATUM of them are there to compare with)."""
    groups = pd.Series(values[among]).groupby(stratum[among])
    medians = groups.median()[groups.size() >= _MIN_STRATUM]
    return pd.Series(stratum).map(medians).to_numpy(dtype="float64")


def _local_median(when: np.ndarray, values: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """For each request, the median of ``values`` over the usable requests of its LOCAL_WINDOW_S window."""
    bins = np.floor(np.where(np.isfinite(when), when, 0) / LOCAL_WINDOW_S)
    medians = pd.Series(values[usable]).groupby(bins[usable]).median()
    return pd.Series(bins).map(medians).to_numpy(dtype="float64")


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
