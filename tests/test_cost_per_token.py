"""A tokenize stage's cost per token: the slope of its time over the requests' lengths, so that a call's
fixed cost never reads as a slow tokenizer, and unknown where the evidence cannot give it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.facts.model import Facts
from diagnose.facts.stages import add_stage_facts

N = 2_000


def _requests(
    us_per_token: float, fixed_ms: float, lengths: np.ndarray, stage: str = "tokenize"
) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    spent = (fixed_ms + us_per_token / 1000 * lengths) * rng.lognormal(0, 0.1, lengths.size)
    forward = rng.lognormal(np.log(20), 0.2, lengths.size)
    return pd.DataFrame(
        {
            "ts": 1.7e9 + np.arange(lengths.size) / 10,
            "latency_ms": spent + forward,
            f"stage_{stage}_ms": spent,
            "stage_forward_ms": forward,
            "input_len": lengths,
        }
    )


def _facts(requests: pd.DataFrame) -> Facts:
    facts = Facts()
    add_stage_facts(facts, requests, "requests.csv")
    return facts


def _lengths(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(120), 0.6, N).round().clip(1)


def test_the_slope_is_the_cost_of_each_further_token_whatever_the_fixed_cost():
    slow = _facts(_requests(100.0, 0.3, _lengths())).get("cpu_stage.us_per_token")
    fast_with_overhead = _facts(_requests(1.0, 5.0, _lengths())).get("cpu_stage.us_per_token")
    assert slow == pytest.approx(100.0, rel=0.15)
    assert fast_with_overhead == pytest.approx(1.0, abs=2.0)  # 5 ms a call is 40 us a token over time/tokens


def test_the_cost_is_cited_to_the_columns_it_came_from():
    facts = _facts(_requests(100.0, 0.3, _lengths()))
    assert "stage_tokenize_ms against input_len" in facts.values["cpu_stage.us_per_token"].source


def test_a_stage_not_counted_in_tokens_has_no_cost_per_token_and_says_why():
    facts = _facts(_requests(100.0, 0.3, _lengths(), stage="image_decode"))
    assert facts.get("cpu_stage.us_per_token") is None
    assert "tokenize or detokenize" in facts.absent["cpu_stage.us_per_token"]


def test_prompts_all_of_one_length_give_no_slope():
    facts = _facts(_requests(100.0, 0.3, np.full(N, 128.0)))
    assert facts.get("cpu_stage.us_per_token") is None
    assert "differing lengths" in facts.absent["cpu_stage.us_per_token"]
