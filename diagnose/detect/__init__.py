"""Spikes in time: change points, episodes, periodicity and cross-signal alignment.

The names below load on first use (PEP 562), so that the CLI can start the
spike helper (``diagnose.detect.launch``, standard library only) before it
imports numpy and pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diagnose.lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them (``X as X``: re-exported); at run time, __getattr__
    from diagnose.detect.alignment import (
        Alignment as Alignment,
    )
    from diagnose.detect.analysis import (
        SpikeAnalysis as SpikeAnalysis,
        SpikeSearch as SpikeSearch,
        analyse_spikes as analyse_spikes,
    )
    from diagnose.detect.episodes import (
        Episode as Episode,
    )
    from diagnose.detect.helper import (
        SpikeHelper as SpikeHelper,
    )
    from diagnose.detect.periodicity import (
        Periodicity as Periodicity,
    )
    from diagnose.detect.search import (
        SignalFindings as SignalFindings,
    )
    from diagnose.detect.signals import (
        Signal as Signal,
    )

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
