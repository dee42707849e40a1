"""Verify: did a change really help, under comparable conditions?

``compare_dumps(before, after)`` reads two dumps, leaves out each side's
warm-up, and compares the figures a release is judged by (percentiles,
throughput, errors, memory) with block-bootstrap intervals; checks that the
traffic (rate, length mix) and the environment (hardware, software, settings,
background load) were the same, re-weighting the length mix where it was not;
diagnoses both sides and says which hypotheses appeared or went; and ends in
one verdict: improved, regressed, no significant change, or not comparable.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from diagnose.compare.environment import differences
from diagnose.compare.figures import request_figures, series_figures, warm_requests
from diagnose.compare.model import Comparison, Difference, HypothesisMove, Side, Traffic
from diagnose.compare.traffic import MIN_COVERAGE, compare_traffic
from diagnose.compare.verdict import overall
from diagnose.dump import load_dump
from diagnose.dump.model import Dump
from diagnose.errors import InputError
from diagnose.judge import default_rules_dir, load_rules
from diagnose.pipeline import analyse_dump

LIKELY = 0.5
MOVED = 0.1  # a hypothesis whose score moved less than this stayed where it was
_CONTENTION = "co-located-contention"

__all__ = ["Comparison", "compare_dumps"]


def compare_dumps(
    before_path: str,
    after_path: str,
    rules_dir: Path | None = None,
    tz: str | None = None,
) -> Comparison:
    rules = load_rules(rules_dir or default_rules_dir())
    before, after = load_dump(before_path, tz=tz), load_dump(after_path, tz=tz)
    warnings = [f"before: {w}" for w in before.warnings] + [f"after: {w}" for w in after.warnings]
    with np.errstate(all="ignore"):
        b_requests, a_requests = warm_requests(before, salt=0), warm_requests(after, salt=1)
        figures = []
        traffic = Traffic(None, False, None, False, [], [], None, None, [], [])
        if b_requests is not None and a_requests is not None:
            figures = request_figures(b_requests, a_requests)
            traffic = compare_traffic(b_requests, a_requests)
        elif (b_requests is None) != (a_requests is None):
            warnings.append(
                f"only the {'after' if b_requests is None else 'before'} dump has request latencies: "
                "no latency can be compared"
            )
        figures += series_figures(before, after)
        if not figures:
            raise InputError(
                f"{before_path} and {after_path}: nothing to compare; both need request latencies "
                "(requests.latency_ms) or GPU or host samples"
            )
        b_report = analyse_dump(before, rules, helper=True).report
        a_report = analyse_dump(after, rules, helper=True).report
    found = (
        differences(before, after) + _traffic_differences(traffic) + _diagnosed_background(b_report, a_report)
    )
    verdict, headline, reasons = overall(figures, traffic, found)
    return Comparison(
        _side(before, b_report, b_requests),
        _side(after, a_report, a_requests),
        verdict,
        headline,
        reasons,
        figures,
        traffic,
        found,
        _moves(b_report, a_report),
        warnings,
    )


def _side(dump: Dump, report: dict, requests) -> Side:
    return Side(
        dump.path,
        (report["window"]["start"], report["window"]["end"]),
        0 if requests is None else len(requests.frame),
        0 if requests is None else requests.cold_excluded,
        [(h["id"], h["score"]) for h in report["hypotheses"]],
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
    if traffic.load_differs and not traffic.service:
        figure = traffic.work_change if traffic.work_differs else traffic.rate_change
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


def _diagnosed_background(before: dict, after: dict) -> list[Difference]:
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


def _moves(before: dict, after: dict) -> list[HypothesisMove]:
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


def _scores(report: dict) -> dict[str, float]:
    return {h["id"]: float(h["score"]) for h in report["hypotheses"]}
