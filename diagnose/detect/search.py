"""One signal's search: its episodes, its change points, and how its episodes recur."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.detect.episodes import Episode, find_episodes
from diagnose.detect.periodicity import Periodicity, periodicity
from diagnose.detect.routine import routine_flags
from diagnose.detect.shifts import change_points
from diagnose.detect.signals import Signal

_LOG_KINDS = ("latency", "stage")  # positive, with multiplicative noise


@dataclass
class SignalFindings:
    signal: Signal
    change_points: list[float]
    episodes: list[Episode]
    periodicity: Periodicity | None
    routine: list[bool] | None = None  # per episode: like the signal's others (routine.py); derived if None

    def __post_init__(self) -> None:
        if self.routine is None:
            self.routine = routine_flags(self.episodes)


def search_signal(signal: Signal, span: tuple[float, float]) -> SignalFindings:
    """``span`` is the whole analysis's (first, last) time: periodicity is judged against it."""
    return with_periodicity(search_shape(signal), span)


def search_shape(signal: Signal) -> SignalFindings:
    """Episodes and change points: the costly part, which needs no other signal (periodicity left None)."""
    log_scale = signal.kind in _LOG_KINDS
    episodes = find_episodes(signal.values, signal.start, signal.step, log_scale)
    return SignalFindings(
        signal, change_points(signal.values, signal.start, signal.step, episodes, log_scale), episodes, None
    )


def with_periodicity(found: SignalFindings, span: tuple[float, float]) -> SignalFindings:
    """Whether the rising episodes recur, judged against the whole span (known once every signal is)."""
    starts = np.array([e.start for e in found.episodes if e.direction > 0])
    return SignalFindings(
        found.signal, found.change_points, found.episodes, periodicity(starts, span), found.routine
    )
