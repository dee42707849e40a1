"""Two dumps, or an archived side and a dump, measured and compared: the comparison's steps in order."""

from __future__ import annotations

import zlib
from dataclasses import replace
from pathlib import Path

from diagnose.compare import parallel
from diagnose.compare.delivery import delivery, delivery_headline, expected_gain_of
from diagnose.compare.environment import differences
from diagnose.compare.evidence import Evidence, measure_dump
from diagnose.compare.figures import figure_changes
from diagnose.compare.measure import Requests
from diagnose.compare.model import (
    BETTER,
    DELIVERED,
    DELIVERED_NOTHING,
    PARTLY,
    REGRESSED,
    WORSE,
    Comparison,
    Difference,
    FigureChange,
    HypothesisMove,
    PseudoOptimisation,
    Side,
    Traffic,
)
from diagnose.compare.parallel import Elsewhere
from diagnose.compare.traffic import MIN_COVERAGE, compare_traffic
from diagnose.compare.verdict import decisive_figures, overall
from diagnose.dump import load_dump
from diagnose.errors import InputError
from diagnose.judge import default_rules_dir, load_rules

LIKELY = 0.5
MOVED = 0.1  # a hypothesis whose score moved less than this stayed where it was
_CONTENTION = "co-located-contention"
# The findings that name a change which looks like tuning and costs latency: pseudo-optimisations.
PSEUDO_OPTIMISATIONS = ("over-parallelism", "memory-cleanup-per-request", "oversized-batch")


def compare_dumps(
    before_path: str,
    after_path: str,
    rules_dir: Path | None = None,
    tz: str | None = None,
) -> Comparison:
    return compare_evidence(*measure_both(before_path, after_path, rules_dir, tz))


def measure_both(
    before_path: str,
    after_path: str,
    rules_dir: Path | None = None,
    tz: str | None = None,
    second: Elsewhere | bool = True,
) -> tuple[Evidence, Evidence, Requests | None]:
    """Both sides measured (a big before side by a second process meanwhile); the after side's requests.

    ``second``: the before side's process if the caller started it (the CLI does, before its own
    imports), True to start one here if the before dump is big enough, False to measure both here.
    """
    if second is True:
        second = parallel.start_if_worth_it(before_path, rules_dir, tz) or False
    elsewhere = second if isinstance(second, parallel.Elsewhere) else None
    try:
        after, after_requests = measure_path(after_path, rules_dir, tz, helper=elsewhere is None)
    except BaseException:
        if elsewhere is not None:
            elsewhere.stop()
        raise
    before = elsewhere.result() if elsewhere is not None else None
    if before is None:  # small, or the second process failed: measured here, its errors said as usual
        before, _ = measure_path(before_path, rules_dir, tz)
    return before, after, after_requests


def measure_path(
    path: str,
    rules_dir: Path | None = None,
    tz: str | None = None,
    helper: bool = True,
) -> tuple[Evidence, Requests | None]:
    """Read, measure and diagnose one dump.

    Its bootstrap replicates are seeded by its own content, so the same dump gives the same intervals
    whichever side it is on and however it is compared (two dumps, a dump against an archived one,
    ``archive add --baseline``), while two different recordings draw independently. ``helper``: see
    :func:`diagnose.compare.evidence.measure_dump`.
    """
    rules = load_rules(rules_dir or default_rules_dir())
    dump = load_dump(path, tz=tz)
    rows = sorted((name, len(frame)) for name, frame in dump.tables.items())
    return measure_dump(dump, rules, 2 + zlib.crc32(f"{dump.span()}|{rows}".encode()), helper)


def compare_evidence(
    before: Evidence,
    after: Evidence,
    after_requests: Requests | None,
    change: str | None = None,
    expects: str | None = None,
) -> Comparison:
    """Compare a measured before side (a dump's, or an archived one) with an after side.

    ``change``: what was changed between them, in the person's words (``--change``): a change made as
    an optimisation that leaves P99 worse under comparable traffic is called a pseudo-optimisation.
    ``expects``: the hypothesis of the before side's diagnosis that the change was to fix
    (``--expects``): what it delivered is set against the gain expected of it, and a fix that
    delivered nothing is a pseudo-optimisation too.
    """
    if expects is not None:
        expected_gain_of(before, expects)  # an error before any work, if there is nothing to check
    warnings = [f"before: {w}" for w in before.warnings] + [f"after: {w}" for w in after.warnings]
    figures = figure_changes(before.measures, after.measures)
    if not figures:
        raise InputError(
            f"{before.dump} and {after.dump}: nothing to compare; both need request latencies "
            "(requests.latency_ms) or GPU or host samples"
        )
    if (before.requests == 0) != (after.requests == 0):
        warnings.append(
            f"only the {'after' if before.requests == 0 else 'before'} dump has request latencies: "
            "no latency can be compared"
        )
    traffic = Traffic.unchecked()
    if before.requests and after.requests:
        traffic = compare_traffic(before, after, after_requests)
    found = (
        differences(before.environment, after.environment, before.background, after.background)
        + _traffic_differences(traffic)
        + _diagnosed_background(before, after)
    )
    if expects == _CONTENTION:  # the job's absence after is the fix, not background that differs
        found = [
            replace(d, what=f"{d.what}: the change --expects {expects} names", blocks=False)
            if d.kind == "background"
            else d
            for d in found
        ]
    delivered = delivery(expects, before, after) if expects is not None else None
    fix_delivered = delivered is not None and delivered.verdict in (DELIVERED, PARTLY)
    verdict, headline, reasons = overall(figures, traffic, found, fix_delivered)
    pseudo = None
    if verdict == REGRESSED:
        decisive = decisive_figures(figures, traffic)
        latency = [decisive[name] for name in ("p50", "p99") if name in decisive]
        pseudo = _pseudo_optimisation(change, latency, before, after)
        if pseudo is not None:
            headline = _pseudo_headline(pseudo, headline)
    if delivered is not None:
        if delivered.verdict == DELIVERED_NOTHING and pseudo is None:
            pseudo = PseudoOptimisation(change, [], expects)
            what = f" ('{change}')" if change else ""
            headline = f"pseudo-optimisation{what}: {delivery_headline(delivered)}; overall {headline}"
        elif pseudo is None:
            headline = f"{headline}; {delivery_headline(delivered)}"
    return Comparison(
        _side(before),
        _side(after),
        verdict,
        headline,
        reasons,
        figures,
        traffic,
        found,
        _moves(before, after),
        warnings,
        pseudo,
        delivered,
    )


def _pseudo_optimisation(
    change: str | None, latency: list[FigureChange], before: Evidence, after: Evidence
) -> PseudoOptimisation | None:
    """A pseudo-optimisation where latency got worse (P50 or P99, the other no better), and either the
    change was named (as one is, to be compared) or the after side shows a pseudo-optimisation's
    finding that the before side did not."""
    if not any(f.verdict == WORSE for f in latency) or any(f.verdict == BETTER for f in latency):
        return None
    b, a = _scores(before), _scores(after)
    brought = [
        (rule_id, a[rule_id])
        for rule_id in PSEUDO_OPTIMISATIONS
        if a.get(rule_id, 0.0) >= LIKELY and b.get(rule_id, 0.0) < LIKELY
    ]
    if change is None and not brought:
        return None
    return PseudoOptimisation(change, brought)


def _pseudo_headline(pseudo: PseudoOptimisation, regression: str) -> str:
    """``pseudo-optimisation ('what changed'): regressed: ...; it brought over-parallelism (0.73)``."""
    what = f" ('{pseudo.change}')" if pseudo.change else ""
    text = f"pseudo-optimisation{what}: {regression}"
    if pseudo.findings:
        text += "; it brought " + ", ".join(f"{rule_id} ({score:.2f})" for rule_id, score in pseudo.findings)
    return text


def _side(evidence: Evidence) -> Side:
    return Side(
        evidence.dump, evidence.window, evidence.requests, evidence.cold_excluded, evidence.hypotheses
    )


def _traffic_differences(traffic: Traffic) -> list[Difference]:
    found = []
    if traffic.coverage is not None and traffic.coverage < MIN_COVERAGE:
        found.append(
            Difference(
                "request length mix",
                "traffic",
                "the before mix",
                f"covers {traffic.coverage:.0%} of it",
                True,
            )
        )
    figure = traffic.work_change if traffic.work_differs else traffic.rate_change
    if traffic.load_differs and not traffic.service and figure is not None:
        found.append(
            Difference(
                f"{figure.label} (no waiting stage is logged to judge the service apart from its queue)",
                "traffic",
                f"{figure.before:,.4g}",
                f"{figure.after:,.4g}",
                True,
            )
        )
    return found


def _diagnosed_background(before: Evidence, after: Evidence) -> list[Difference]:
    """A co-located job that the diagnosis finds likely on one side only is background load there."""
    b, a = _scores(before).get(_CONTENTION, 0.0), _scores(after).get(_CONTENTION, 0.0)
    if (b >= LIKELY) == (a >= LIKELY):
        return []
    return [
        Difference(
            "a co-located job (the diagnosis: co-located-contention)",
            "background",
            f"score {b:.2f}",
            f"score {a:.2f}",
            True,
        )
    ]


def _moves(before: Evidence, after: Evidence) -> list[HypothesisMove]:
    b, a = _scores(before), _scores(after)
    moves = []
    for rule_id in sorted(set(b) | set(a), key=lambda i: -max(b.get(i, 0.0), a.get(i, 0.0))):
        if rule_id not in a:
            moves.append(HypothesisMove(rule_id, b[rule_id], None, "disappeared"))
        elif rule_id not in b:
            moves.append(HypothesisMove(rule_id, None, a[rule_id], "appeared"))
        elif abs(a[rule_id] - b[rule_id]) >= MOVED:
            change = "stronger" if a[rule_id] > b[rule_id] else "weaker"
            moves.append(HypothesisMove(rule_id, b[rule_id], a[rule_id], change))
    return moves


def _scores(evidence: Evidence) -> dict[str, float]:
    return dict(evidence.hypotheses)
