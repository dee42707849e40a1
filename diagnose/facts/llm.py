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
