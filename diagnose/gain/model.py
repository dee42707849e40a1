"""What a fix is expected to gain: plain data, shown beside a hypothesis in every report format."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GainFigure:
    """One latency figure now and without the cause, with the 95 % interval of the latter (ms)."""

    name: str  # p50, p99
    now_ms: float
    expected_ms: float
    low_ms: float | None
    high_ms: float | None


@dataclass(frozen=True)
class ExpectedGain:
    figures: tuple[GainFigure, ...]
    how: str  # the counterfactual, in words: what was set aside or changed
    method: str  # how the interval was drawn
    source: str  # the evidence it was computed from
