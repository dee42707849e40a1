"""Verify: did a change really help, under comparable conditions?

``compare_dumps(before, after)`` reads two dumps, leaves out each side's
warm-up, and compares the figures a release is judged by (percentiles,
throughput, errors, memory) with block-bootstrap intervals; checks that the
traffic (rate, length mix) and the environment (hardware, software, settings,
background load) were the same, re-weighting the length mix where it was not;
diagnoses both sides and says which hypotheses appeared or went; and ends in
one verdict: improved, regressed, no significant change, or not comparable.

The names below load on first use (PEP 562), so that the CLI can start the
second process of a big comparison (``diagnose.compare.parallel``, standard
library at import) before it imports numpy and pandas.
"""

from __future__ import annotations

from diagnose.lazy import lazy_exports

_EXPORTS = {
    "Comparison": "diagnose.compare.model",
    "Evidence": "diagnose.compare.evidence",
    "compare_dumps": "diagnose.compare.comparison",
    "compare_evidence": "diagnose.compare.comparison",
    "measure_both": "diagnose.compare.comparison",
    "measure_path": "diagnose.compare.comparison",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
