"""What a fix delivered, against the gain the diagnosis expected of it.

The expectation is the before side's counterfactual for the cause the fix was
for (diagnose/gain): P50 and P99 had the cause been absent, with an interval,
as a change from the figure then. What the fix delivered is the change of the
same figure between the two recordings over every answered request: the cold
ones too, since a warm-up fix shows nowhere else (the figures compare judges
leave them out on both sides). Both changes are taken from the before
recording as it was, since the expectation is a counterfactual on that
recording: the measured change's interval is the after side's own (its
bootstrap replicates over the before figure), not widened by how else the
before side might have been drawn (a before side with two cold starts would
put -70 % and +35 % in one interval). The share delivered is the measured
change over the expected one: "P99 -41 % against an expected -48 %: 85 % of
the expected gain".

A figure whose measured interval holds no improvement delivered nothing; a fix
that delivered nothing on every figure it was expected to move is the seed's
pseudo-optimisation, whatever the rest of the comparison says.
"""

from __future__ import annotations

import numpy as np

from diagnose.bootstrap import interval
from diagnose.compare.evidence import Evidence
from diagnose.compare.figures import MIN_EFFECT
from diagnose.compare.measure import Measure
from diagnose.compare.model import (
    AS_EXPECTED,
    DELIVERED,
    DELIVERED_NOTHING,
    LESS,
    MORE,
    NOT_EXPECTED,
    NOTHING,
    PARTLY,
    UNEXPECTED,
    DeliveredFigure,
    Delivery,
)
from diagnose.errors import InputError
from diagnose.gain import ExpectedGain, GainFigure


def expected_gain_of(before: Evidence, cause: str) -> ExpectedGain:
    """The before side's expected gain for ``cause``, or an error that says what it has instead."""
    gain = before.gains.get(cause)
    if gain is not None:
        return gain
    found = dict(before.hypotheses)
    if cause not in found:
        why = "its diagnosis has no such hypothesis"
    else:
        why = (
            f"its diagnosis has {cause} ({found[cause]:.2f}) but no counterfactual the evidence allows for it"
        )
    have = ", ".join(sorted(before.gains)) or "none"
    raise InputError(
        f"--expects {cause}: {before.dump}: {why}; the hypotheses there with an expected gain: {have}"
    )


def delivery(cause: str, before: Evidence, after: Evidence) -> Delivery:
    """What the fix for ``cause`` delivered between ``before`` and ``after``."""
    gain = expected_gain_of(before, cause)
    figures = []
    sources = set()
    for figure in gain.figures:
        b, a = _every(before, figure.name), _every(after, figure.name)
        if b is None or a is None or not b.value or a.value is None:
            continue
        sources.add(a.source)
        low = high = None
        if a.replicates is not None:
            low, high = interval(a.replicates.astype("float64") / b.value - 1)
        figures.append(_delivered(figure, a.value / b.value - 1, _finite(low), _finite(high)))
    moved = [f for f in figures if _expected_to_move(f)]
    if not figures:
        raise InputError(
            f"--expects {cause}: {after.dump} has no request latencies to measure what the fix delivered"
        )
    if not moved:
        verdict = NOT_EXPECTED
    elif all(f.verdict == NOTHING for f in moved):
        verdict = DELIVERED_NOTHING
    elif all(f.verdict in (AS_EXPECTED, MORE) for f in moved):
        verdict = DELIVERED
    else:
        verdict = PARTLY
    source = f"expected: {gain.source}; measured: {'; '.join(sorted(sources))}"
    return Delivery(cause, gain.how, figures, verdict, source)


def delivery_headline(found: Delivery) -> str:
    """E.g. ``P99 -41.0% [-45.0%, -37.0%] against an expected -48.0% [-55.0%, -40.0%]: 85% of the
    expected gain``."""
    if found.verdict == NOT_EXPECTED:
        return f"the fix for {found.cause} was expected to move no latency figure by {MIN_EFFECT:.0%} or more"
    parts = []
    for f in found.figures:
        if not _expected_to_move(f):
            continue
        measured = relative_text(f.measured, f.measured_low, f.measured_high, _NO_INTERVAL)
        expected = relative_text(f.expected, f.expected_low, f.expected_high, _NO_INTERVAL)
        parts.append(
            f"{f.name.upper()} {measured} against an expected {expected}: "
            + (
                "none of the expected gain"
                if f.verdict == NOTHING
                else f"{f.share:.0%} of the expected gain"
                if f.share is not None
                else f.verdict
            )
        )
    return f"the fix for {found.cause} {found.verdict}: " + "; ".join(parts)


def _expected_to_move(figure: DeliveredFigure) -> bool:
    """Expected to improve by a change worth a verdict, its interval holding no "no change"."""
    return figure.verdict != UNEXPECTED


def _finite(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _every(side: Evidence, name: str) -> Measure | None:
    """The figure over every request: ``every_p99`` where the side left cold requests out, else ``p99``."""
    return side.measures.get(f"every_{name}") or side.measures.get(name)


def _delivered(
    figure: GainFigure, measured: float | None, low: float | None, high: float | None
) -> DeliveredFigure:
    now = figure.now_ms
    expected = figure.expected_ms / now - 1
    e_low = None if figure.low_ms is None else figure.low_ms / now - 1
    e_high = None if figure.high_ms is None else figure.high_ms / now - 1
    if expected > -MIN_EFFECT or (e_high is not None and e_high >= 0):
        return DeliveredFigure(figure.name, expected, e_low, e_high, measured, low, high, None, UNEXPECTED)
    share = measured / expected if measured is not None else None
    if measured is None or measured > -MIN_EFFECT or (high is not None and high >= 0):
        verdict = NOTHING  # no improvement the interval can tell from none
    elif e_low is None or e_high is None or low is None or high is None or (low <= e_high and e_low <= high):
        verdict = AS_EXPECTED
    else:
        verdict = MORE if high < e_low else LESS
    return DeliveredFigure(figure.name, expected, e_low, e_high, measured, low, high, share, verdict)


_NO_INTERVAL = " [no interval]"


def relative_text(value: float | None, low: float | None, high: float | None, missing: str = "") -> str:
    """A relative change with its interval, ``-41.0% [-45.0%, -37.0%]``; ``missing`` where it has none."""
    if value is None:
        return "-"
    return f"{value:+.1%}" + (missing if low is None or high is None else f" [{low:+.1%}, {high:+.1%}]")
