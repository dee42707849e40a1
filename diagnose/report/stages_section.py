"""The stage table of the text and Markdown reports: each logged stage's share of the latency."""

from __future__ import annotations

from diagnose.report.model import Summary
from diagnose.units import human_ms, percent

UNACCOUNTED_SHOWN = 0.05  # latency in no logged stage gets a row of its own from 5 % of the mean
UNACCOUNTED = "in no stage"


def stage_rows(summary: Summary) -> list[list[str]]:
    """stage, kind, share of mean, share of P99 requests, share of tail excess, P50, P99: the largest
    share first, then the latency in no logged stage where it is worth a row (kind "-")."""
    rows = [
        [
            name,
            row.kind,
            percent(row.share),
            percent(row.tail_share),
            percent(row.excess_share),
            human_ms(row.p50_ms),
            human_ms(row.p99_ms),
        ]
        for name, row in sorted(summary.stages.items(), key=lambda item: -item[1].share)
    ]
    unaccounted = summary.unaccounted_share
    if rows and unaccounted is not None and unaccounted >= UNACCOUNTED_SHOWN:
        rows.append([UNACCOUNTED, "-", percent(unaccounted), "", "", "", ""])
    return rows
