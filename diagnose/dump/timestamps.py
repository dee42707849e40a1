"""Turn a ``ts`` column into float epoch seconds (UTC), whatever style it came in.

The spec allows epoch seconds or ISO-8601 with an offset; naive ISO strings
are read as UTC with a warning. Epoch values that can only be milliseconds
(after the year 5000 when read as seconds) are read as milliseconds, with a
warning, rather than producing nonsense dates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

_MS_THRESHOLD = 1e11  # 1e11 s is the year 5138; 1e11 ms is 1973
_LATEST_S = 1e10  # the year 2286: a later (or a negative) epoch time is damage, not a time
_OFFSET_PATTERN = r"(?:[zZ]|[+-]\d{2}(?::?\d{2})?)\s*$"


@dataclass(frozen=True)
class ParsedTime:
    seconds: np.ndarray  # float64, NaN where unreadable
    naive: bool
    milliseconds: bool


def parse_ts(column: pd.Series) -> ParsedTime:
    if pd.api.types.is_datetime64_any_dtype(column):
        naive = getattr(column.dtype, "tz", None) is None
        values = column.dt.tz_localize("UTC") if naive else column.dt.tz_convert("UTC")
        return ParsedTime(_datetimes_to_seconds(values), naive, False)
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return _from_epoch(column.to_numpy(dtype="float64", na_value=np.nan))
    as_number = pd.to_numeric(column, errors="coerce")
    if as_number.notna().sum() == column.notna().sum():
        return _from_epoch(as_number.to_numpy(dtype="float64", na_value=np.nan))
    text = column.astype("string")
    has_offset = text.str.contains(_OFFSET_PATTERN, regex=True, na=True)
    naive = not bool(has_offset.all())
    parsed = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
    if parsed.isna().any() and parsed.notna().any():
        # ISO8601 parsing is all-or-nothing per format; retry row by row leniently.
        parsed = pd.to_datetime(text, utc=True, format="mixed", errors="coerce")
    return ParsedTime(_datetimes_to_seconds(parsed), naive, False)


def _from_epoch(values: np.ndarray) -> ParsedTime:
    readable = np.isfinite(values)
    finite = values if readable.all() else values[readable]  # a day of 8 GPUs: no copy of 700,000
    # Seconds and milliseconds since 1970 differ a thousandfold: every tenth-thousandth value tells.
    typical = finite[:: max(1, finite.size // 10_000)]
    milliseconds = bool(typical.size and np.median(typical) > _MS_THRESHOLD)
    seconds = values / 1000.0 if milliseconds else values.copy()
    seconds[~((seconds >= 0) & (seconds <= _LATEST_S))] = np.nan  # unreadable, like any bad value
    return ParsedTime(seconds, False, milliseconds)


def _datetimes_to_seconds(values: pd.Series) -> np.ndarray:
    try:
        nanos = values.dt.tz_convert("UTC").dt.tz_localize(None).astype("datetime64[ns]")
    except (ValueError, OverflowError, AttributeError, TypeError):  # a date pandas cannot hold: one by one
        return np.array([_one_to_seconds(value) for value in values], dtype="float64")
    seconds: np.ndarray = nanos.to_numpy().astype("int64").astype("float64") / 1e9
    seconds[values.isna().to_numpy()] = np.nan
    return seconds


def _one_to_seconds(value: Any) -> float:  # whatever a cell holds: what pandas cannot read is NaN
    try:
        stamp = pd.Timestamp(value)
        return float("nan") if pd.isna(stamp) else stamp.timestamp()
    except (ValueError, OverflowError, TypeError):
        return float("nan")


def iso(seconds: float | None) -> str | None:
    """Epoch seconds to the report's ISO-8601 UTC form."""
    if seconds is None or not np.isfinite(seconds):
        return None
    try:
        stamp = pd.Timestamp(seconds, unit="s", tz="UTC")
    except (OverflowError, ValueError):  # pandas' OutOfBoundsDatetime is a ValueError
        return None
    text = stamp.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")
