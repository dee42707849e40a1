"""The in-memory form of a dump: plain DataFrames plus what the reader noticed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class Manifest:
    host: str | None = None
    interval_s: float | None = None
    process_starts: list[float] = field(default_factory=list)  # epoch seconds
    slo_p99_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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

    def table(self, name: str) -> pd.DataFrame | None:
        frame = self.tables.get(name)
        return frame if frame is not None else self.traces.get(name)

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
        files = {name: self.files[name] for name in kept if name in self.files}
        return replace(self, tables=kept, files=files)

    def span(self) -> tuple[float, float] | None:
        """First and last timestamp over all tables, or None for an empty dump."""
        frames = [frame["ts"] for frame in self.tables.values() if len(frame)]
        if not frames:
            return None
        return min(float(f.iloc[0]) for f in frames), max(float(f.iloc[-1]) for f in frames)

    def source(self, name: str) -> str:
        """The file(s) a table came from, for citing evidence."""
        return ", ".join(self.files.get(name, [name]))
