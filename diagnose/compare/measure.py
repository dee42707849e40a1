"""The figures of one recording, each with its bootstrap distribution: what a comparison compares.

Each side is measured on its own: a figure's value, and its values over the
block-bootstrap replicates (bootstrap.py). Two sides' replicates are drawn
independently, so the change between two recordings has the distribution of
the after side's replicates over the before side's; that is also what lets an
archived recording, whose tables are gone, be the before side of a comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from diagnose.bootstrap import Blocks, Resampled, replicate_weights, time_blocks
from diagnose.dump.model import Dump
from diagnose.dump.schema import stage_columns
from diagnose.facts.coldstart import cold_requests
from diagnose.facts.latency import Statuses
from diagnose.facts.model import StageKind
from diagnose.facts.stages import declared_kinds, stage_kind

LATENCY_QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99, "p999": 0.999}
LENGTH_COLUMNS = ("input_len", "output_len")
_STAGE_QUANTILES = {"p50": 0.50, "p99": 0.99}
_PEAK_METHOD = "a maximum has no bootstrap interval"
_GAP_METHOD = "the peak minus the median level: how much headroom the peak takes"


@dataclass(frozen=True)
class Measure:
    """One figure of one recording: its value and, where it has one, its bootstrap distribution."""

    name: str  # what --fail-on-regression calls it: p99, throughput, gpu_mem_peak, stage_forward_p99
    label: str
    unit: str  # ms, rps, bytes, share, pct
    better: str | None  # "lower", "higher", or None for a figure that is neither
    scale: str  # how two of them compare: "relative" (after / before - 1) or "difference"
    value: float | None
    replicates: np.ndarray | None  # float32, one value per bootstrap replicate; None for a maximum
    method: str
    source: str
    resolution: float | None = None  # the smallest step between logged values (0.1 for a log in 0.1 ms)


@dataclass(frozen=True)
class Requests:
    """One side's requests as compared: the warm ones, cut into time blocks."""

    frame: pd.DataFrame
    blocks: Blocks
    duration_s: float
    source: str
    cold_excluded: int
    stage_kinds: dict[str, StageKind]  # the manifest's stages: map
    salt: int  # seeds the bootstrap: from the dump's content, so two recordings draw independently
    per_row: float = 1.0  # requests each row stands for: more than 1 where the table is a sample

    @cached_property
    def weights(self) -> np.ndarray:
        return replicate_weights(self.blocks, self.salt)

    def values(self, column: str) -> np.ndarray:
        return pd.to_numeric(self.frame[column], errors="coerce").to_numpy(dtype="float64")


def warm_requests(dump: Dump, salt: int) -> Requests | None:
    """The requests with a latency, the cold ones after a (re)start left out: a warm-up is not the service."""
    return _answered_requests(dump, salt, leave_out_cold=True)


def every_request_measures(dump: Dump, salt: int) -> list[Measure]:
    """P50 and P99 of every answered request, the cold ones too (``every_p50``, ``every_p99``).

    What a warm-up fix changes: the figures compare otherwise reads leave the cold requests out on
    both sides, so a fix of the cold start would show there as no change at all.
    """
    side = _answered_requests(dump, salt, leave_out_cold=False)
    if side is None:
        return []
    label = "latency of every request (the cold ones too)"
    return _quantiles(side, side.values("latency_ms"), "every", label, _STAGE_QUANTILES, "latency_ms")


def _answered_requests(dump: Dump, salt: int, leave_out_cold: bool) -> Requests | None:
    frame = dump.table("requests")
    if frame is None or "latency_ms" not in frame.columns:
        return None
    answered = np.isfinite(pd.to_numeric(frame["latency_ms"], errors="coerce").to_numpy(dtype="float64"))
    if not answered.all():  # a copy of a million rows only where some have no latency
        frame = frame[answered].reset_index(drop=True)
    elif not (isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0):
        frame = frame.reset_index(drop=True)  # rows are numbered from 0, as below
    if len(frame) < 2:
        return None
    cold = cold_requests(dump, frame) if leave_out_cold else None
    excluded = 0
    if cold is not None and cold[0].any() and (~cold[0]).sum() >= 2:
        excluded = int(cold[0].sum())
        frame = frame[~cold[0]].reset_index(drop=True)
    ts, latency = frame["ts"].to_numpy(), frame["latency_ms"].to_numpy(dtype="float64")
    kinds = declared_kinds(dump.manifest.extra, [])
    blocks = time_blocks(ts, latency)
    return Requests(
        frame,
        blocks,
        float(ts[-1] - ts[0]),
        dump.source("requests"),
        excluded,
        kinds,
        salt,
        dump.requests_per_row(),
    )


def measure_requests(side: Requests) -> list[Measure]:
    """Every request figure: latency, errors, throughput, the load, TTFT/TPOT, stages, service time."""
    found = latency_measures(side)
    found += _errors_and_rates(side)
    for column in ("ttft_ms", "tpot_ms"):
        if column in side.frame.columns:
            label = "time to first token" if column == "ttft_ms" else "time per output token"
            found += _quantiles(side, side.values(column), column[:4], label, _STAGE_QUANTILES, column)
    for stage, column in stage_columns(side.frame).items():
        found += _quantiles(
            side, side.values(column), f"stage_{stage}", f"{stage} stage", _STAGE_QUANTILES, column
        )
    return found


def latency_measures(side: Requests, weights: np.ndarray | None = None) -> list[Measure]:
    """Latency percentiles, mean and service time; ``weights`` re-weights the side's requests."""
    latency = side.values("latency_ms")
    found = _quantiles(side, latency, "", "latency", LATENCY_QUANTILES, "latency_ms", weights)
    resampled = Resampled(latency, side.blocks, side.weights, weights)
    found.append(
        Measure(
            "mean",
            "mean latency",
            "ms",
            "lower",
            "relative",
            resampled.mean(),
            resampled.replicate_means().astype("float32"),
            side.blocks.method,
            f"{side.source}: latency_ms",
        )
    )
    waits = wait_columns(side)
    if waits:
        waited = sum(np.nan_to_num(side.values(column)) for column in waits)
        source = f"latency_ms less {', '.join(waits)}"
        found += _quantiles(
            side,
            latency - waited,
            "service",
            "service time (latency less waiting)",
            _STAGE_QUANTILES,
            source,
            weights,
        )
    return found


def wait_columns(side: Requests) -> list[str]:
    """The stages in which a request waits (a queue, a batch, the network): they move with the load."""
    return [
        c
        for name, c in stage_columns(side.frame).items()
        if stage_kind(name, side.stage_kinds) == StageKind.WAIT
    ]


def _quantiles(
    side: Requests,
    values: np.ndarray,
    prefix: str,
    label: str,
    quantiles: dict[str, float],
    column: str,
    weights: np.ndarray | None = None,
) -> list[Measure]:
    if np.isfinite(values).sum() < 2:
        return []
    resampled = Resampled(values, side.blocks, side.weights, weights)
    qs = list(quantiles.values())
    replicates = resampled.replicate_quantiles(qs).astype("float32")
    exact = resampled.quantiles(qs)
    step = resolution(values)
    return [
        Measure(
            f"{prefix}_{name}" if prefix else name,
            f"{name.upper().replace('P999', 'P99.9')} {label}",
            "ms",
            "lower",
            "relative",
            exact[row],
            replicates[row],
            side.blocks.method,
            f"{side.source}: {column}",
            step,
        )
        for row, name in enumerate(quantiles)
    ]


def resolution(values: np.ndarray) -> float | None:
    """The smallest step between distinct logged values: a log written in 0.1 ms cannot show less."""
    finite = values[np.isfinite(values)]
    if finite.size > 20_000:
        finite = finite[:: finite.size // 20_000]
    steps = np.diff(np.unique(finite))
    return float(steps.min()) if steps.size else None


def _errors_and_rates(side: Requests) -> list[Measure]:
    found = []
    answered = np.ones(len(side.frame))
    if "status" in side.frame.columns:
        failed = Statuses.of(side.frame["status"]).failed()
        if np.isfinite(failed).any():
            errors = Resampled(failed, side.blocks, side.weights)
            found.append(
                Measure(
                    "error_rate",
                    "error rate",
                    "share",
                    "lower",
                    "difference",
                    errors.mean(),
                    errors.replicate_means().astype("float32"),
                    side.blocks.method,
                    f"{side.source}: status",
                )
            )
        answered = 1 - np.nan_to_num(failed)
    if side.duration_s <= 0:
        return found
    rates: list[tuple[str, str, str | None, np.ndarray, str]] = [
        ("throughput", "throughput (answered requests/s)", "higher", answered, "status")
    ]
    rates.append(("request_rate", "request rate (arrivals/s)", None, np.ones(len(side.frame)), "ts"))
    lengths = [c for c in LENGTH_COLUMNS if c in side.frame.columns]
    if lengths:
        work = sum(np.nan_to_num(side.values(c)) for c in lengths)
        rates.append(
            ("work_rate", f"offered work ({' + '.join(lengths)} per s)", None, work, " + ".join(lengths))
        )
    for name, label, better, amounts, column in rates:
        resampled = Resampled(amounts, side.blocks, side.weights)
        found.append(
            Measure(
                name,
                label,
                "rps",
                better,
                "relative",
                float(amounts.sum() * side.per_row / side.duration_s),
                (resampled.replicate_sums() * side.per_row / side.duration_s).astype("float32"),
                side.blocks.method,
                f"{side.source}: {column}",
            )
        )
    return found


def measure_series(dump: Dump, salt: int) -> list[Measure]:
    """Memory peaks, steady levels and their gap (the fullest GPU, the host), and GPU utilisation."""
    found: list[Measure] = []
    specs = (
        ("gpu", "mem_used_bytes", "max", "gpu_mem", "GPU memory, fullest GPU"),
        ("system", "mem_used_bytes", "max", "host_mem", "host memory"),
    )
    for table, column, combine, name, label in specs:
        series = _series(dump, table, column, combine)
        if series is None:
            continue
        source = f"{dump.source(table)}: {column}"
        blocks, resampled = _resampled(*series, salt)
        peak, steady = float(np.nanmax(series[1])), resampled.quantile(0.5)
        found += [
            Measure(
                f"{name}_peak",
                f"peak {label}",
                "bytes",
                "lower",
                "relative",
                peak,
                None,
                _PEAK_METHOD,
                source,
            ),
            Measure(
                f"{name}_steady",
                f"steady {label} (median)",
                "bytes",
                "lower",
                "relative",
                steady,
                resampled.replicate_quantiles([0.5])[0].astype("float32"),
                blocks.method,
                source,
            ),
            Measure(
                f"{name}_gap",
                f"{label}: peak above steady",
                "bytes",
                None,
                "difference",
                peak - steady,
                None,
                _GAP_METHOD,
                source,
            ),
        ]
    series = _series(dump, "gpu", "util_pct", "mean")
    if series is not None:
        blocks, resampled = _resampled(*series, salt)
        found.append(
            Measure(
                "gpu_util",
                "GPU utilisation (mean over GPUs)",
                "pct",
                None,
                "difference",
                resampled.mean(),
                resampled.replicate_means().astype("float32"),
                blocks.method,
                f"{dump.source('gpu')}: util_pct",
            )
        )
    return found


def _resampled(ts: np.ndarray, values: np.ndarray, salt: int) -> tuple[Blocks, Resampled]:
    blocks = time_blocks(ts, values)
    return blocks, Resampled(values, blocks, replicate_weights(blocks, 10 + salt))


def _series(dump: Dump, table: str, column: str, combine: str) -> tuple[np.ndarray, np.ndarray] | None:
    per_sample = dump.per_sample(table, column, combine)
    if per_sample is None or len(per_sample) < 2:
        return None
    return per_sample.index.to_numpy(dtype="float64"), per_sample.to_numpy(dtype="float64")
