"""The spike analysis of a dump: every signal searched (here or by the helper), then aligned with latency."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnose.detect.alignment import Alignment, align
from diagnose.detect.episodes import Episode
from diagnose.detect.helper import SignalQueue, SpikeHelper
from diagnose.detect.search import SignalFindings, search_shape, with_periodicity
from diagnose.detect.signals import Batch, Signal, grid_note, in_order, iter_signals
from diagnose.dump.model import Dump
from diagnose.isolation import isolated

REFERENCE_SIGNALS = ("requests.latency_ms.p99", "requests.latency_ms.p50")
MIN_COINCIDENCE = 0.2  # below this an alignment is not worth a significance test


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

    Creating it builds the signals a table at a time into a queue; with a
    helper (started here, or given already running) and a big enough dump, the
    helper takes signals from the back of the queue as they arrive.
    :meth:`finish` searches what the helper has not taken, collects what it
    returned, judges periodicity against the whole span, and aligns the
    signals with latency.
    """

    def __init__(self, dump: Dump, helper: bool | SpikeHelper = False) -> None:
        self._warnings = [note] if (note := grid_note(dump)) else []
        self._helper = _helper_for(dump, helper)
        self._queue = SignalQueue(closed=False)
        if self._helper is not None:
            self._helper.serve(self._queue)
        built: list[Batch] = []

        def build() -> list[Signal]:
            for placed in iter_signals(dump, dump.server_pids):
                built.append(placed)
                self._queue.add(placed[1])
            return in_order(built)

        try:
            self._signals: list[Signal] = isolated(self._warnings, "the signals", build) or []
        finally:
            self._queue.close()
        self._span = (
            (
                min(s.start for s in self._signals),
                max(s.start + s.step * s.values.size for s in self._signals),
            )
            if self._signals
            else (0.0, 0.0)
        )

    def finish(self) -> SpikeAnalysis:
        try:
            return self._finish()
        finally:
            if self._helper is not None:
                self._helper.close()

    def _finish(self) -> SpikeAnalysis:
        found: dict[str, SignalFindings | None] = {}
        while (signal := self._queue.take_front()) is not None:
            found[signal.name] = self._search(signal)
        if self._helper is not None:
            returned, unreturned = self._helper.collect()
            found.update(returned)
            found.update((signal.name, self._search(signal)) for signal in unreturned)
        if not self._signals:
            return SpikeAnalysis(warnings=self._warnings)
        analysis = SpikeAnalysis(span=self._span, warnings=self._warnings)
        for signal in self._signals:  # in the signals' order, whoever searched them
            shape = found.get(signal.name)
            if shape is not None:
                analysis.findings[signal.name] = with_periodicity(shape, self._span)
        _align(analysis)
        return analysis

    def _search(self, signal: Signal) -> SignalFindings | None:
        return isolated(self._warnings, f"spikes of {signal.name}", lambda: search_shape(signal))


def _helper_for(dump: Dump, helper: bool | SpikeHelper) -> SpikeHelper | None:
    """The helper to use: one given (closed here if the dump proves small), one started, or none."""
    if isinstance(helper, SpikeHelper):
        if SpikeHelper.may_help(dump):
            return helper
        helper.close()
        return None
    return SpikeHelper.start() if helper and SpikeHelper.may_help(dump) else None


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
