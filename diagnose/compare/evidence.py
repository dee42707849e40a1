"""One side of a comparison, measured: enough to compare it again after its dump is gone.

A comparison needs, of each recording, its figures with their bootstrap
distributions, a sample of its requests' latencies and lengths (for the
traffic checks, the re-weighting and the latency picture), what it says of
its environment and background load, and its diagnosis. The archive stores
exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from diagnose.compare.environment import background, describe
from diagnose.compare.measure import (
    LENGTH_COLUMNS,
    Measure,
    Requests,
    every_request_measures,
    measure_requests,
    measure_series,
    warm_requests,
)
from diagnose.compare.trace_figures import measure_trace
from diagnose.dump.model import Dump
from diagnose.dump.timestamps import iso
from diagnose.gain import ExpectedGain
from diagnose.judge.rules import Rule
from diagnose.pipeline import analyse_dump
from diagnose.report import Report

TOKEN_LATENCIES = ("ttft_ms", "tpot_ms")  # kept for the thresholds of diagnose alerts
SAMPLE = 50_000  # requests kept of one side: the KS test, the strata and a latency picture need no more


@dataclass(frozen=True)
class Evidence:
    dump: str
    window: tuple[str | None, str | None]
    requests: int
    cold_excluded: int
    measures: dict[str, Measure]
    samples: dict[
        str, np.ndarray
    ]  # latency_ms, lengths, ttft/tpot, offset_s of the same sampled warm requests
    environment: dict[str, str]
    background: dict[str, float]  # other processes' CPU (p95, % of a core) and GPU memory (peak, bytes)
    hypotheses: list[tuple[str, float]]  # (id, score), strongest first
    warnings: list[str] = field(default_factory=list)
    gains: dict[str, ExpectedGain] = field(default_factory=dict)  # a hypothesis's id: what its fix buys


def measure_dump(
    dump: Dump, rules: list[Rule], salt: int, helper: bool = True, report: Report | None = None
) -> tuple[Evidence, Requests | None]:
    """The evidence of one dump, and its warm requests (which an after side's re-weighting needs).

    ``helper``: whether a big dump's spike search may take a second process (detect/helper.py); not
    while the other side of a comparison is measured by one, which keeps the cores busy already.
    ``report``: the dump's diagnosis where the caller has it already (not made twice).
    """
    with np.errstate(all="ignore"):
        requests = warm_requests(dump, salt)
        measures = measure_requests(requests) if requests is not None else []
        if requests is not None and requests.cold_excluded:
            measures += every_request_measures(dump, salt)
        measures += measure_series(dump, salt)
        if report is None:
            report = analyse_dump(dump, rules, helper=helper).report
        measures += measure_trace(report)
    evidence = Evidence(
        dump.path,
        (iso(report.window.start), iso(report.window.end)),
        0 if requests is None else round(len(requests.frame) * requests.per_row),  # a sample's: estimated
        0 if requests is None else round(requests.cold_excluded * requests.per_row),
        {m.name: m for m in measures},
        _samples(requests),
        describe(dump),
        background(dump),
        [(h.id, float(h.score)) for h in report.hypotheses],
        list(dump.warnings),
        {h.id: h.expected_gain for h in report.hypotheses if h.expected_gain is not None},
    )
    return evidence, requests


def _samples(requests: Requests | None) -> dict[str, np.ndarray]:
    """An even sample of the warm requests, in time order: what a later comparison tests the traffic
    with, and what ``diagnose alerts`` sets thresholds from once the dump is gone (``offset_s``: seconds
    since the first request, as float32 keeps them to a few milliseconds over a day)."""
    if requests is None:
        return {}
    frame = requests.frame
    columns = ["latency_ms", *(c for c in (*LENGTH_COLUMNS, *TOKEN_LATENCIES) if c in frame.columns)]
    n = len(frame)
    rows = np.arange(n) if n <= SAMPLE else np.linspace(0, n - 1, SAMPLE).astype("int64")
    samples = {column: requests.values(column)[rows].astype("float32") for column in columns}
    if "ts" in frame.columns:
        ts = requests.values("ts")
        samples["offset_s"] = (ts[rows] - np.nanmin(ts)).astype("float32")
    return samples
