"""Prefill-decode interference is TPOT rising with long prompts, not with load (diagnose/facts/llm.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.facts.llm import add_interference_facts
from diagnose.facts.model import Facts

T0 = 1_796_549_000.0


def _requests(slowdown_beside_long: float, seed: int = 4) -> pd.DataFrame:
    """Busy half-minutes (5 arrivals a second) and quiet ones (1), long prompts arriving only when busy.
    Every request generates for 2 s; its TPOT grows with the requests beside it (a bigger batch is slower
    per token) and, where a long prompt's first token came while it generated, by ``slowdown_beside_long``."""
    rng = np.random.default_rng(seed)
    arrivals, busy = [], []
    t = 0.0
    while t < 1_200.0:
        is_busy = int(t // 30) % 2 == 0
        t += rng.exponential(1 / (5.0 if is_busy else 1.0))
        arrivals.append(t)
        busy.append(is_busy)
    arrivals, busy = np.array(arrivals), np.array(busy)
    long = busy & (rng.random(arrivals.size) < 0.05)
    first = arrivals + 0.01
    last = first + 2.0
    beside = np.array([((arrivals < b) & (last > a)).sum() for a, b in zip(first, last, strict=True)])
    tpot = 1.0 + 0.3 * beside
    long_firsts = np.sort(first[long])
    overlapped = np.searchsorted(long_firsts, last) - np.searchsorted(long_firsts, first, "right") > 0
    tpot = np.where(overlapped & ~long, tpot * slowdown_beside_long, tpot)
    return pd.DataFrame(
        {
            "ts": T0 + arrivals,
            "latency_ms": (last - arrivals) * 1000,
            "ttft_ms": 10.0,
            "tpot_ms": tpot,
            "input_len": np.where(long, 1_000, 100),
        }
    )


def _ratio(requests: pd.DataFrame) -> float:
    facts = Facts()
    add_interference_facts(facts, requests, "requests.jsonl")
    value = facts.get("tpot.long_prefill_ratio")
    assert isinstance(value, float)
    return value


def test_long_prompts_that_arrive_when_it_is_busy_are_not_blamed_for_the_load():
    plain = _requests(slowdown_beside_long=1.0)
    assert _ratio(plain) < 1.1


def test_generation_slowed_beside_long_prefills_is_found_at_equal_load():
    assert _ratio(_requests(slowdown_beside_long=1.6)) > 1.45
