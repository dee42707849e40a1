"""Routine episodes: a signal's many like bursts are its routine; the one unlike them stands out."""

from __future__ import annotations

import numpy as np

from diagnose.detect.episodes import Episode
from diagnose.detect.routine import MIN_POPULATION, routine_flags
from diagnose.detect.search import search_signal
from diagnose.detect.signals import Signal


def _bursts(count: int, height: float = 10.0, length: float = 20.0, direction: int = 1) -> list[Episode]:
    return [
        Episode(100.0 * i, 100.0 * i + length, 5.0 + direction * height, 5.0, direction) for i in range(count)
    ]


def test_many_like_bursts_are_routine_and_a_taller_one_is_not():
    episodes = _bursts(20)
    episodes[7] = Episode(700.0, 720.0, 5.0 + 30.0, 5.0, 1)
    flags = routine_flags(episodes)
    assert flags[7] is False
    assert all(flags[:7]) and all(flags[8:])


def test_a_much_longer_episode_stands_out():
    episodes = [*_bursts(12), Episode(5000.0, 5300.0, 15.0, 5.0, 1)]
    assert routine_flags(episodes) == [True] * 12 + [False]


def test_a_burst_barely_taller_than_identical_ones_is_still_routine():
    """Near-identical bursts have no spread: the floor keeps a 10 % taller one in the routine."""
    episodes = [*_bursts(12), Episode(5000.0, 5020.0, 5.0 + 11.0, 5.0, 1)]
    assert all(routine_flags(episodes))


def test_too_few_episodes_have_no_routine():
    assert routine_flags(_bursts(MIN_POPULATION - 1)) == [False] * (MIN_POPULATION - 1)


def test_directions_are_separate_populations():
    """Twelve rises are a routine; three dips among them are not part of it."""
    episodes = sorted([*_bursts(12), *_bursts(3, direction=-1)], key=lambda e: e.start)
    flags = routine_flags(episodes)
    assert all(f for e, f in zip(episodes, flags, strict=True) if e.direction > 0)
    assert not any(f for e, f in zip(episodes, flags, strict=True) if e.direction < 0)


def test_a_searched_signal_marks_its_hourly_job_routine_and_the_incident_not():
    """End to end through the search: a job's 12 like bursts, and one burst three times as high."""
    rng = np.random.default_rng(3)
    values = 20.0 + rng.normal(0.0, 1.0, 7200)
    for start in range(300, 7200, 600):
        values[start : start + 30] += 15.0
    values[3900:3930] += 45.0  # the job's run at 3900, three times its usual height
    signal = Signal("processes.cpu_pct[name=job]", "process", 0.0, 1.0, values)
    found = search_signal(signal, (0.0, 7200.0))
    by_start = {round(e.start / 600): usual for e, usual in zip(found.episodes, found.routine, strict=True)}
    assert len(found.episodes) == 12
    assert by_start.pop(round(3900 / 600)) is False
    assert all(by_start.values())
