"""One signal's search: its episodes, its change points, and whether its rising episodes recur."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.detect.episodes import Episode, find_episodes
from diagnose.detect.periodicity import Periodicity, periodicity
from diagnose.detect.shifts import change_points
from diagnose.detect.signals import Signal

_LOG_KINDS = ("latency", "stage")  # positive, with multiplicative noise


@dataclass
class SignalFindings:
    signal: Signal
    change_points: list[float]
    episodes: list[Episode]
    periodicity: Periodicity | None


def search_signal(signal: Signal, span: tuple[float, float]) -> SignalFindings:
    """``span`` is the whole analysis's (first, last) time: periodicity is judged against it."""
    log_scale = signal.kind in _LOG_KINDS
    episodes = find_episodes(signal.values, signal.start, signal.step, log_scale)
    starts = np.array([e.start for e in episodes if e.direction > 0])
    return SignalFindings(
        signal,
        change_points(signal.values, signal.start, signal.step, episodes, log_scale),
        episodes,
        periodicity(starts, span),
    )
