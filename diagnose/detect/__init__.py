"""Spikes in time: change points, episodes, periodicity and cross-signal alignment.

The names below load on first use (PEP 562), so that the CLI can start the
spike helper (``diagnose.detect.launch``, standard library only) before it
imports numpy and pandas.
"""

from __future__ import annotations

from diagnose.lazy import lazy_exports

_EXPORTS = {
    "Alignment": "diagnose.detect.alignment",
    "Episode": "diagnose.detect.episodes",
    "Periodicity": "diagnose.detect.periodicity",
    "Signal": "diagnose.detect.signals",
    "SignalFindings": "diagnose.detect.search",
    "SpikeAnalysis": "diagnose.detect.analysis",
    "SpikeHelper": "diagnose.detect.helper",
    "SpikeSearch": "diagnose.detect.analysis",
    "analyse_spikes": "diagnose.detect.analysis",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
