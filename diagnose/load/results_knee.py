"""The knee of load tests already run (results.py's points), and their report.

Open-loop runs (a rate offered) are bracketed as ``diagnose load``'s steps are: a run keeps up when
its throughput is at least ``FOLLOWS`` of the rate offered and it failed at most ``MAX_FAILED_SHARE``
of its requests. Closed-loop runs (N clients, each sending when the last answer came) cannot fall
behind, they slow down; their knee is Kleinrock's: where the two asymptotes of throughput against
clients meet, N* = X_max x (N / X) at the fewest clients (Little's law: N / X is the time a client
takes per request alone, think time included). Past N*, more clients only queue. A report says which
kind each knee is, and what a tool did not record (failures, latency, the load itself).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from diagnose.load.curve import FOLLOWS, MAX_FAILED_SHARE
from diagnose.load.report import json_ready
from diagnose.load.results import Point
from diagnose.units import counted


@dataclass(frozen=True)
class OpenKnee:
    kept_up_rps: float  # 0: none kept up
    fell_behind_rps: float  # nan: none fell behind
    capacity_rps: float  # the highest throughput past the knee (nan: none past it)
    why: str


@dataclass(frozen=True)
class ClosedKnee:
    clients: float  # N*, Kleinrock's knee
    below: float  # the measured client counts around it (nan where the runs do not reach past it)
    above: float
    capacity_rps: float  # X_max


@dataclass(frozen=True)
class ResultsCurve:
    points: list[Point]
    open_knee: OpenKnee | None
    closed_knee: ClosedKnee | None
    share: float  # of the knee, for the setting
    notes: list[str] = field(default_factory=list)

    @property
    def setting(self) -> list[str]:
        """The production setting from each knee found: ``share`` of it."""
        found = []
        if (
            self.open_knee is not None
            and self.open_knee.kept_up_rps > 0
            and math.isfinite(self.open_knee.fell_behind_rps)
        ):
            found.append(f"{self.share * self.open_knee.kept_up_rps:.3g} req/s")
        if self.closed_knee is not None:
            found.append(f"{max(1, math.floor(self.share * self.closed_knee.clients))} requests in flight")
        return found


def analyse(points: list[Point], share: float) -> ResultsCurve:
    notes = []
    rated = sorted((p for p in points if p.rate_rps is not None), key=lambda p: p.rate_rps or 0.0)
    closed = sorted((p for p in points if p.rate_rps is None and p.concurrency is not None), key=_clients)
    unplaced = [p.source for p in points if p.rate_rps is None and p.concurrency is None]
    if unplaced:
        notes.append(
            f"{counted(len(unplaced), 'run')} without an offered load (no rate, no clients), "
            "not on the curve: " + ", ".join(unplaced[:3])
        )
    uncounted = sorted({p.tool for p in points if math.isnan(p.failed_share)})
    if uncounted:
        notes.append(f"{', '.join(uncounted)} count no failures: their runs are taken to have none")
    if any(math.isnan(p.latency_p50_ms) for p in points):
        notes.append(
            "some runs have no end-to-end latency (vLLM writes it only with --percentile-metrics including "
            "e2el; Locust's history percentiles are since the start)"
        )
    open_knee = _open(rated) if rated else None
    closed_knee = _closed(closed) if len(closed) >= 2 else None
    if len(closed) == 1:
        notes.append("one closed-loop run: a knee needs runs at two client counts or more")
    return ResultsCurve(points, open_knee, closed_knee, share, notes)


def _falls_behind(point: Point) -> str:
    failed = 0.0 if math.isnan(point.failed_share) else point.failed_share
    if failed > MAX_FAILED_SHARE:
        return f"{failed:.1%} of requests failed"
    assert point.rate_rps is not None
    if point.throughput_rps < FOLLOWS * point.rate_rps:
        return f"throughput {point.throughput_rps:.3g} req/s of {point.rate_rps:.3g} offered"
    return ""


def _open(points: list[Point]) -> OpenKnee:
    behind = [p for p in points if _falls_behind(p)]
    ceiling = behind[0].rate_rps if behind else math.inf
    kept = [
        p.rate_rps for p in points if not _falls_behind(p) and (p.rate_rps or 0.0) < (ceiling or math.inf)
    ]
    return OpenKnee(
        kept_up_rps=max((r for r in kept if r is not None), default=0.0),
        fell_behind_rps=behind[0].rate_rps or math.nan if behind else math.nan,
        capacity_rps=max((p.throughput_rps for p in behind), default=math.nan),
        why=_falls_behind(behind[0]) if behind else "",
    )


def _clients(point: Point) -> float:
    return point.concurrency or 0.0


def _closed(points: list[Point]) -> ClosedKnee:
    fewest = points[0]
    per_request_s = (
        _clients(fewest) / fewest.throughput_rps
    )  # Little: time per request alone, with think time
    capacity = max(p.throughput_rps for p in points)
    knee = capacity * per_request_s
    below = max((_clients(p) for p in points if _clients(p) <= knee), default=math.nan)
    above = min((_clients(p) for p in points if _clients(p) > knee), default=math.nan)
    return ClosedKnee(knee, below, above, capacity)


def to_json(curve: ResultsCurve) -> dict[str, Any]:
    return json_ready(
        {
            "format": "diagnose-capacity-results/1",
            "points": [asdict(p) for p in curve.points],
            "open_loop_knee": None if curve.open_knee is None else asdict(curve.open_knee),
            "closed_loop_knee": None if curve.closed_knee is None else asdict(curve.closed_knee),
            "share_of_knee": curve.share,
            "setting": curve.setting,
            "notes": curve.notes,
        }
    )


def render_text(curve: ResultsCurve) -> str:
    header = ("run", "tool", "offered", "throughput", "P50", "P99", "TTFT P50", "TPOT P50", "failed")
    rows = [header]
    for p in curve.points:
        offered = (
            f"{p.rate_rps:.3g} req/s"
            if p.rate_rps
            else (f"{p.concurrency:g} clients" if p.concurrency else "-")
        )
        rows.append(
            (
                p.source,
                p.tool,
                offered,
                f"{p.throughput_rps:.3g} req/s",
                _ms(p.latency_p50_ms),
                _ms(p.latency_p99_ms),
                _ms(p.ttft_p50_ms),
                _ms(p.tpot_p50_ms),
                "-" if math.isnan(p.failed_share) else f"{p.failed_share:.1%}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["diagnose load: the knee of load tests already run", ""]
    lines += [
        "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.append("")
    knee = curve.open_knee
    if knee is not None:
        if math.isnan(knee.fell_behind_rps):
            lines.append(
                f"Open loop: kept up with every rate offered, up to {knee.kept_up_rps:.3g} req/s; no knee."
            )
        else:
            lines.append(
                f"Open loop: knee between {knee.kept_up_rps:.3g} req/s (kept up) and "
                f"{knee.fell_behind_rps:.3g} req/s ({knee.why}); "
                f"throughput past it {knee.capacity_rps:.3g} req/s."
            )
    closed = curve.closed_knee
    if closed is not None:
        around = (
            f"between the runs at {closed.below:g} and {closed.above:g} clients"
            if math.isfinite(closed.below) and math.isfinite(closed.above)
            else "outside the client counts run: run more to place it"
        )
        lines.append(
            f"Closed loop: knee at {closed.clients:.3g} clients ({around}): the most throughput, "
            f"{closed.capacity_rps:.3g} req/s, times the time per request at the fewest clients."
        )
    if curve.setting:
        lines.append(f"Production setting, {curve.share:.0%} of the knee: {' or '.join(curve.setting)}.")
    lines += [f"Note: {note}" for note in curve.notes]
    return "\n".join(lines) + "\n"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"
