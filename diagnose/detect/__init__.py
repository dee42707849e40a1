"""Spikes in time: change points, episodes, periodicity and cross-signal alignment."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnose.detect.alignment import Alignment, align
from diagnose.detect.episodes import Episode
from diagnose.detect.helper import SignalQueue, SpikeHelper
from diagnose.detect.periodicity import Periodicity
from diagnose.detect.search import SignalFindings, search_signal
from diagnose.detect.signals import Signal, build_signals, grid_note, server_pids
from diagnose.dump.model import Dump
from diagnose.isolation import isolated

REFERENCE_SIGNALS = ("requests.latency_ms.p99", "requests.latency_ms.p50")
MIN_COINCIDENCE = 0.2  # below this an alignment is not worth a significance test

__all__ = [
    "Alignment",
    "Episode",
    "Periodicity",
    "Signal",
    "SignalFindings",
    "SpikeAnalysis",
    "SpikeHelper",
    "SpikeSearch",
    "analyse_spikes",
]


@dataclass
class SpikeAnalysis:
    findings: dict[str, SignalFindings] = field(default_factory=dict)
    alignments: list[Alignment] = field(default_factory=list)
    reference: str | None = None
    span: tuple[float, float] = (0.0, 0.0)
    warnings: list[str] = field(default_factory=list)


def analyse_spikes(dump: Dump, helper: bool = False) -> SpikeAnalysis:
    """Every signal's episodes, change points and periodicity, and how they align with latency."""
    return SpikeSearch(dump, helper).finish()


class SpikeSearch:
    """The spike analysis in two steps, so that other work can run while a helper searches.

    Creating it builds the signals and, with ``helper`` and enough of them,
    starts a helper process that takes signals from the queue at once;
    :meth:`finish` searches what the helper has not taken, collects what it
    returned, and aligns the signals with latency.
    """

    def __init__(self, dump: Dump, helper: bool = False) -> None:
        self._warnings = [note] if (note := grid_note(dump)) else []
        # Started before the signals are built, so that it has imported by the time they are.
        self._helper = SpikeHelper.start() if helper and SpikeHelper.may_help(dump) else None
        built = isolated(self._warnings, "the signals", lambda: build_signals(dump, server_pids(dump)))
        self._signals: list[Signal] = built or []
        self._span = (
            (
                min(s.start for s in self._signals),
                max(s.start + s.step * s.values.size for s in self._signals),
            )
            if self._signals
            else (0.0, 0.0)
        )
        self._queue = SignalQueue(self._signals)
        if self._helper is not None and not SpikeHelper.worth_it(self._signals):
            self._helper.close()
            self._helper = None
        if self._helper is not None:
            self._helper.serve(self._queue, self._span)

    def finish(self) -> SpikeAnalysis:
        try:
            return self._finish()
        finally:
            if self._helper is not None:
                self._helper.close()

    def _finish(self) -> SpikeAnalysis:
        if not self._signals:
            return SpikeAnalysis(warnings=self._warnings)
        analysis = SpikeAnalysis(span=self._span, warnings=self._warnings)
        found: dict[str, SignalFindings | None] = {}
        while (signal := self._queue.take_front()) is not None:
            found[signal.name] = self._search(signal)
        if self._helper is not None:
            returned, unreturned = self._helper.collect()
            found.update(returned)
            found.update((signal.name, self._search(signal)) for signal in unreturned)
        for signal in self._signals:  # in the signals' order, whoever searched them
            if found.get(signal.name) is not None:
                analysis.findings[signal.name] = found[signal.name]
        _align(analysis)
        return analysis

    def _search(self, signal: Signal) -> SignalFindings | None:
        return isolated(self._warnings, f"spikes of {signal.name}", lambda: search_signal(signal, self._span))


def _align(analysis: SpikeAnalysis) -> None:
    # The latency spikes may show in the tail (P99) or, when every request slows, more
    # cleanly in the median (P50): align against whichever found more of them.
    counts = {name: len(_rising(analysis, name)) for name in REFERENCE_SIGNALS}
    reference = max(REFERENCE_SIGNALS, key=lambda name: counts[name])
    if counts[reference] == 0:
        return
    analysis.reference = reference
    spikes = _rising(analysis, reference)
    step = analysis.findings[reference].signal.step
    for name, found in analysis.findings.items():
        if name.startswith("requests.latency_ms") or not found.episodes:
            continue
        result = align(reference, spikes, name, found.episodes, analysis.span, step)
        if result is not None and result.coincidence >= MIN_COINCIDENCE:
            analysis.alignments.append(result)
    analysis.alignments.sort(key=lambda a: (a.p_value, -a.locked, -a.coincidence, a.b))


def _rising(analysis: SpikeAnalysis, name: str) -> list[Episode]:
    found = analysis.findings.get(name)
    return [e for e in found.episodes if e.direction > 0] if found else []
