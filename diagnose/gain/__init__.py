"""The expected gain of removing a cause: a counterfactual computed on the incident's own evidence.

Each cause that has an honest counterfactual has a function here that answers
"what would P50 and P99 have been without it?" from the dump, with an
interval; a cause without one has none, and the report says nothing rather
than a constant, or says why where the evidence cannot give one (a CPU stage,
fragmentation, KV-cache pressure). So far: cold-start contamination (the requests not served
cold), co-located contention (the requests that did not arrive while the job
ran), GPU throttling (the slowed GPU's forward passes at its unthrottled speed)
and a batch window too long (batch waits cut to a short window).
"""

from __future__ import annotations

from diagnose.gain.counterfactual import counterfactual_causes, expected_gain, no_counterfactual
from diagnose.gain.model import ExpectedGain, GainFigure

__all__ = ["ExpectedGain", "GainFigure", "counterfactual_causes", "expected_gain", "no_counterfactual"]
