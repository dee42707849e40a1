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

from typing import TYPE_CHECKING

from diagnose.lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them (``X as X``: re-exported); at run time, __getattr__
    from diagnose.compare.comparison import (
        compare_dumps as compare_dumps,
        compare_evidence as compare_evidence,
        measure_both as measure_both,
        measure_path as measure_path,
    )
    from diagnose.compare.evidence import (
        Evidence as Evidence,
    )
    from diagnose.compare.model import (
        Comparison as Comparison,
    )

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
