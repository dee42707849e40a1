"""Which of a signal's episodes are its routine, and which stand out from it.

A job that runs every hour makes an episode every hour in its process's CPU:
each is real, and alignment with latency needs every one. Someone asking what
went wrong on a given day wants the other kind: the episode unlike the
signal's others. On NAB's operational series, where a server's routine bursts
are not the labelled anomalies, every episode counted as a detection gave a
window precision of 0.17 (benchmarks/bench_changepoint.py).

An episode is *routine* when its signal has at least ``MIN_POPULATION``
episodes in the same direction and both its height (peak minus baseline) and
its length lie within the population's fence: the median plus ``FENCE``
robust standard deviations (1.4826 x MAD) of their logarithms, since heights
and lengths are positive and skewed. The spread is floored at a factor of
``SPREAD_FLOOR``, so that a population of near-identical bursts does not make
one slightly taller burst news. Every episode of a signal with fewer is
unusual: a handful of episodes is no routine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from diagnose.detect.episodes import Episode

MIN_POPULATION = 8
FENCE = 3.0
SPREAD_FLOOR = 1.25


def routine_flags(
    episodes: Sequence[Episode],
    population: int = MIN_POPULATION,
    fence: float = FENCE,
    spread_floor: float = SPREAD_FLOOR,
) -> list[bool]:
    """For each episode, in order: True when it is like the signal's others in its direction.

    The three options are there for the benchmark's sensitivity table; the analysis uses the defaults.
    """
    flags = [False] * len(episodes)
    for direction in (1, -1):
        members = [i for i, e in enumerate(episodes) if e.direction == direction]
        if len(members) < population:
            continue
        heights = np.log([max(abs(episodes[i].peak - episodes[i].baseline), 1e-300) for i in members])
        lengths = np.log([max(episodes[i].duration, 1e-300) for i in members])
        within = (heights <= _fence(heights, fence, spread_floor)) & (
            lengths <= _fence(lengths, fence, spread_floor)
        )
        for i, inside in zip(members, within.tolist(), strict=True):
            flags[i] = inside
    return flags


def _fence(logs: np.ndarray, fence: float, spread_floor: float) -> float:
    centre = float(np.median(logs))
    spread = max(1.4826 * float(np.median(np.abs(logs - centre))), float(np.log(spread_floor)))
    return centre + fence * spread
