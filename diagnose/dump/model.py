"""The in-memory form of a dump: plain DataFrames plus what the reader noticed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from diagnose.dump.processes import find_server_pids

if TYPE_CHECKING:
    from diagnose.importers.base import Cadence


class SourceStatus(StrEnum):
    """Whether a source a recording was given delivered: the manifest's ``sources`` section says one of
    these for each (docs/dump-format.md; diagnose/collectors/sources.py writes them)."""

    OK = "ok"
    NEVER_REACHED = "never reached"
    LOST = "lost"
    UNUSED = "answers, nothing kept"  # it answers, but nothing it says is kept (a page of no known engine)


@dataclass
class Manifest:
    host: str | None = None
    interval_s: float | None = None
    process_starts: list[float] = field(default_factory=list)  # epoch seconds
    slo_p99_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestSample:
    """A request table analysed on a uniform sample (dump/sample.py): the whole table's size and its
    requests per second, from which the counts come; the sample is the table the dump holds."""

    total: int  # requests in the table, after cleaning
    per_second: pd.Series  # requests per whole epoch second of the table (index: the second's start)
    statuses: pd.Series | None = None  # requests per status, over the whole table (a rare error is counted)
    latency_max_ms: float | None = None  # the slowest request of the whole table, which a sample may miss

    def scale(self, kept: int) -> float:
        """How many requests of the table each analysed one stands for."""
        return self.total / kept if kept else 1.0

    def between(self, start: float, end: float) -> RequestSample:
        """The counts of the seconds from ``start`` to ``end``: a window's."""
        index = self.per_second.index.to_numpy()
        inside = self.per_second[(index + 1 > start) & (index <= end)]
        return RequestSample(int(inside.sum()), inside)  # the statuses and the slowest are the table's

    def describe(self, kept: int) -> str:
        return (
            f"{self.total:,} requests; the analysis reads a uniform sample of {kept:,} of them "
            f"(1 in {self.scale(kept):.1f}, seeded), and counts every request per second"
        )


@dataclass
class Dump:
    """Every table is optional; ``ts`` is float epoch seconds (UTC), rows sorted by it."""

    path: str
    tables: dict[str, pd.DataFrame]
    files: dict[str, list[str]]
    manifest: Manifest
    warnings: list[str] = field(default_factory=list)
    not_used: list[str] = field(default_factory=list)
    importers: list[dict[str, Any]] = field(default_factory=list)  # {"file", "importer", "rows"}
    # A profiler trace's tables (gpu_activity, host_calls): their ts is the trace's own clock in
    # microseconds, so they stay out of ``tables``, whose ts is epoch seconds, and out of any window.
    traces: dict[str, pd.DataFrame] = field(default_factory=dict)
    # Where the request table is a sample of a bigger one: its counts (None: every request is there).
    request_sample: RequestSample | None = None
    # Tables whose writers' own sampling is known (every file that fed the table stated it): see interval.
    cadences: dict[str, Cadence] = field(default_factory=dict)
    # Results with no clock of their own (a load test's steps: schema.SUMMARY_TABLES), every file's rows.
    summaries: dict[str, pd.DataFrame] = field(default_factory=dict)

    def requests_per_row(self) -> float:
        """How many requests each row of the request table stands for: 1 unless it is a sample."""
        requests = self.tables.get("requests")
        if self.request_sample is None or requests is None:
            return 1.0
        return self.request_sample.scale(len(requests))

    @cached_property
    def server_pids(self) -> frozenset[int]:
        """The serving process(es): the manifest's, else the heaviest steady process (processes.py);
        found once, read by every fact about the server."""
        return find_server_pids(self)

    def table(self, name: str) -> pd.DataFrame | None:
        frame = self.tables.get(name)
        if frame is None:
            frame = self.traces.get(name)
        return frame if frame is not None else self.summaries.get(name)

    def interval(self, name: str) -> float | None:
        """A time-series table's sampling interval, in seconds: its writer's where that is known (a
        writer silent while idle leaves gaps that are not its sampling), else its median gap."""
        cadence = self.cadences.get(name)
        if cadence is not None and name in self.tables:
            return cadence.seconds
        return self.median_interval(name)

    def median_interval(self, name: str) -> float | None:
        """A time-series table's median gap between distinct sample times, in seconds."""
        frame = self.tables.get(name)
        if frame is None or len(frame) < 3:
            return None
        ts = frame["ts"].to_numpy()
        steps = np.diff(ts)
        # Tables are read sorted by time: the gaps between distinct times are the positive steps
        # (no sort of a day of samples); a table that is not sorted is sorted here.
        gaps = steps[steps > 0] if not (steps < 0).any() else np.diff(np.unique(ts))
        return float(np.median(gaps)) if gaps.size else None

    def per_sample(self, name: str, column: str, combine: str) -> pd.Series | None:
        """``column`` of a table combined per sample time (``"max"`` over GPUs, ``"sum"`` over devices),
        indexed by epoch seconds; None where the table or column is absent."""
        frame = self.tables.get(name)
        if frame is None or column not in frame.columns:
            return None
        values = pd.to_numeric(frame[column], errors="coerce")
        return values.groupby(frame["ts"].to_numpy()).agg(combine).dropna()

    def between(self, start: float, end: float) -> Dump:
        """The dump cut to start <= ts <= end: the window a live view or a replay analyses.

        A window that holds every row returns this same dump, so analysing it is
        exactly analysing the file.
        """
        tables = {}
        for name, frame in self.tables.items():
            ts = frame["ts"].to_numpy()
            lo, hi = int(np.searchsorted(ts, start, side="left")), int(np.searchsorted(ts, end, side="right"))
            tables[name] = frame if (lo, hi) == (0, len(frame)) else frame.iloc[lo:hi].reset_index(drop=True)
        if all(tables[name] is frame for name, frame in self.tables.items()):
            return self
        kept = {name: frame for name, frame in tables.items() if len(frame)}
        unclocked = (*self.traces, *self.summaries)  # never cut to a window: their files stay cited
        files = {name: self.files[name] for name in (*kept, *unclocked) if name in self.files}
        sample = self.request_sample.between(start, end) if self.request_sample is not None else None
        return replace(self, tables=kept, files=files, request_sample=sample)

    def span(self) -> tuple[float, float] | None:
        """First and last timestamp over all tables, or None for an empty dump."""
        frames = [frame["ts"] for frame in self.tables.values() if len(frame)]
        if not frames:
            return None
        return min(float(f.iloc[0]) for f in frames), max(float(f.iloc[-1]) for f in frames)

    def source(self, name: str) -> str:
        """The file(s) a table came from, for citing evidence."""
        return ", ".join(self.files.get(name, [name]))
