"""Spikes in time: change points, episodes, periodicity and cross-signal alignment."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from diagnose.detect.alignment import Alignment, align
from diagnose.detect.episodes import Episode, find_episodes
from diagnose.detect.periodicity import Periodicity, periodicity
from diagnose.detect.shifts import change_points
from diagnose.detect.signals import Signal, build_signals, grid_note, server_pids
from diagnose.dump.model import Dump
from diagnose.isolation import isolated

REFERENCE_SIGNALS = ("requests.latency_ms.p99", "requests.latency_ms.p50")
MIN_COINCIDENCE = 0.2  # below this an alignment is not worth a significance test
_LOG_KINDS = ("latency", "stage")  # positive, with multiplicative noise

__all__ = [
    "Alignment",
    "Episode",
    "Periodicity",
    "Signal",
    "SignalFindings",
    "SpikeAnalysis",
    "analyse_spikes",
]


@dataclass
class SignalFindings:
    signal: Signal
    change_points: list[float]
    episodes: list[Episode]
    periodicity: Periodicity | None


@dataclass
class SpikeAnalysis:
    findings: dict[str, SignalFindings] = field(default_factory=dict)
    alignments: list[Alignment] = field(default_factory=list)
    reference: str | None = None
    span: tuple[float, float] = (0.0, 0.0)
    warnings: list[str] = field(default_factory=list)


def analyse_spikes(dump: Dump) -> SpikeAnalysis:
    warnings = [note] if (note := grid_note(dump)) else []
    signals = isolated(warnings, "the signals", lambda: build_signals(dump, server_pids(dump))) or []
    if not signals:
        return SpikeAnalysis(warnings=warnings)
    span = (min(s.start for s in signals), max(s.start + s.step * s.values.size for s in signals))
    analysis = SpikeAnalysis(span=span, warnings=warnings)
    for signal in signals:
        found = isolated(warnings, f"spikes of {signal.name}", lambda signal=signal: _findings(signal, span))
        if found is not None:
            analysis.findings[signal.name] = found
    # The latency spikes may show in the tail (P99) or, when every request slows, more
    # cleanly in the median (P50): align against whichever found more of them.
    counts = {name: len(_rising(analysis, name)) for name in REFERENCE_SIGNALS}
    reference = max(REFERENCE_SIGNALS, key=lambda name: counts[name])
    if counts[reference] == 0:
        return analysis
    analysis.reference = reference
    spikes = _rising(analysis, reference)
    step = analysis.findings[reference].signal.step
    for name, found in analysis.findings.items():
        if name.startswith("requests.latency_ms") or not found.episodes:
            continue
        result = align(reference, spikes, name, found.episodes, span, step)
        if result is not None and result.coincidence >= MIN_COINCIDENCE:
            analysis.alignments.append(result)
    analysis.alignments.sort(key=lambda a: (a.p_value, -a.locked, -a.coincidence, a.b))
    return analysis


def _findings(signal: Signal, span: tuple[float, float]) -> SignalFindings:
    log_scale = signal.kind in _LOG_KINDS
    episodes = find_episodes(signal.values, signal.start, signal.step, log_scale)
    starts = np.array([e.start for e in episodes if e.direction > 0])
    return SignalFindings(
        signal,
        change_points(signal.values, signal.start, signal.step, episodes, log_scale),
        episodes,
        periodicity(starts, span),
    )


def _rising(analysis: SpikeAnalysis, name: str) -> list[Episode]:
    found = analysis.findings.get(name)
    return [e for e in found.episodes if e.direction > 0] if found else []
