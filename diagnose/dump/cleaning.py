"""A table's cleaning, the same whether it came from a file, an importer or a live view's rows.

Times to epoch seconds (or a trace's own microseconds), numbers read as numbers and the absurd ones
dropped, a latency made from the stages where only they were logged, duplicate rows dropped: each
with a warning that names the table and the rows, never silently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.formats import ReadResult, TableReadError
from diagnose.dump.schema import EVENTS_TABLE, SUMMARY_TABLES, TABLES, TRACE_TABLES, is_numeric_column
from diagnose.dump.timestamps import parse_ts
from diagnose.statements.catalogue import builtin_catalogue
from diagnose.units import counted


def normalised(name: str, result: ReadResult, label: str, warnings: list[str]) -> pd.DataFrame:
    frame = result.frame
    frame.columns = [str(c).strip() for c in frame.columns]
    if name in SUMMARY_TABLES or (name in TRACE_TABLES and not TRACE_TABLES[name].timed):
        return _coerce_numbers(name, frame, label, result, warnings).reset_index(drop=True)
    if "ts" not in frame.columns:
        shown = ", ".join(frame.columns[:8]) + (", ..." if len(frame.columns) > 8 else "")
        raise TableReadError(f"no 'ts' column (columns found: {shown})")
    if name in TRACE_TABLES:  # the trace's own clock, in microseconds: read as it is
        frame = _coerce_numbers(name, _with_trace_ts(frame, label, result, warnings), label, result, warnings)
        for column in frame.columns:  # a few hundred names repeated millions of times: kept once each
            if frame[column].dtype == object:
                frame[column] = frame[column].astype("category")
        return frame.sort_values("ts", kind="stable", ignore_index=True)
    frame = _with_epoch_ts(frame, label, result, warnings)
    frame = _coerce_numbers(name, frame, label, result, warnings)
    if name == "requests":
        nameless = [c for c in frame.columns if c.startswith("stage_") and c.endswith("_ms") and len(c) <= 9]
        if nameless:  # "stage__ms": a stage column whose name was lost (an empty variable in a template)
            warnings.append(
                f"{label}: column {', '.join(nameless)} names no stage (expected stage_<name>_ms); not used"
            )
            frame = frame.drop(columns=nameless)
        frame = _ensure_latency(frame, label, warnings)
    if name == EVENTS_TABLE and "kind" not in frame.columns:
        raise TableReadError("no 'kind' field in any event")
    if name == EVENTS_TABLE and "statement" in frame.columns:
        frame = _kinds_from_catalogue(frame)
    if not frame["ts"].is_monotonic_increasing:
        frame = frame.sort_values("ts", kind="stable", ignore_index=True)
    else:
        frame = frame.reset_index(drop=True)
    return _drop_duplicates(name, frame, label, warnings)


def _kinds_from_catalogue(frame: pd.DataFrame) -> pd.DataFrame:
    """An event found by the statement catalogue takes the kind the catalogue gives its statement today:
    a dump recorded before a statement was reclassified (a request too long for its context was once
    counted as a full KV cache) is read as the catalogue reads the line now."""
    kinds = {s.id: str(s.event) for s in builtin_catalogue()}
    current = frame["statement"].astype("string").map(kinds)
    known = current.notna().to_numpy()
    if not known.any():
        return frame
    kind = frame["kind"].astype("object").copy()
    kind[known] = current[known].astype("object")
    return frame.assign(kind=kind)


def _with_epoch_ts(frame: pd.DataFrame, file: str, result: ReadResult, warnings: list[str]) -> pd.DataFrame:
    parsed = parse_ts(frame["ts"])
    if parsed.naive:
        warnings.append(f"{file}: timestamps without a UTC offset read as UTC")
    if parsed.milliseconds:
        warnings.append(f"{file}: 'ts' values are too large for epoch seconds; read as milliseconds")
    frame = frame.assign(ts=parsed.seconds)
    unreadable = np.flatnonzero(~np.isfinite(parsed.seconds))
    if unreadable.size:
        first = int(unreadable[0])
        if unreadable.size == len(frame):
            raise TableReadError(
                f"{result.where(first)}, column ts: no readable timestamps "
                "(expected epoch seconds or ISO-8601 with an offset)"
            )
        warnings.append(
            f"{file} {result.where(first)}, column ts: {counted(unreadable.size, 'row')} without a "
            "readable timestamp skipped (expected epoch seconds or ISO-8601 with an offset)"
        )
        frame = frame.drop(index=frame.index[unreadable])
    return frame


def _with_trace_ts(frame: pd.DataFrame, file: str, result: ReadResult, warnings: list[str]) -> pd.DataFrame:
    """A trace table's ts: microseconds on the trace's own clock, any origin."""
    seconds = pd.to_numeric(frame["ts"], errors="coerce").astype("float64")
    unreadable = np.flatnonzero(~np.isfinite(seconds.to_numpy()))
    if unreadable.size == len(frame):
        raise TableReadError(f"{result.where(0)}, column ts: no readable times (expected microseconds)")
    if unreadable.size:
        warnings.append(
            f"{file} {result.where(int(unreadable[0]))}, column ts: skipped "
            f"{counted(unreadable.size, 'row')} without a readable time (expected microseconds)"
        )
    return frame.assign(ts=seconds).drop(index=frame.index[unreadable])


def _coerce_numbers(
    name: str, frame: pd.DataFrame, file: str, result: ReadResult, warnings: list[str]
) -> pd.DataFrame:
    for column in frame.columns:
        if not is_numeric_column(name, column):
            continue
        original = frame[column]
        if not pd.api.types.is_numeric_dtype(original):
            numbers = pd.to_numeric(original, errors="coerce")
            bad = numbers.isna() & original.notna()
            if bad.any():
                positions = np.flatnonzero(bad.to_numpy())
                row = frame.index[positions[0]]
                value = str(original.iloc[positions[0]])[:40]
                warnings.append(
                    f"{file} {result.where(int(row))}, column {column}: expected a number, got "
                    f"{value!r}; {counted(positions.size, 'such value')} read as missing"
                )
            frame[column] = numbers.astype("float64")
        frame[column] = _without_absurd(frame[column], column, file, result, warnings)
    return frame


# A duration beyond these is no measurement (inf, 1e308: a sentinel, an overflow, a unit gone wrong),
# and one such value makes every mean and sum infinite: a century in ms, or in s.
_LONGEST = {"_ms": 3.2e12, "_us": 3.2e15, "_s": 3.2e9}


def _without_absurd(
    values: pd.Series, column: str, file: str, result: ReadResult, warnings: list[str]
) -> pd.Series:
    """Infinities, and durations longer than a century, read as missing and said."""
    if not pd.api.types.is_float_dtype(values):
        return values
    limit = next((v for suffix, v in _LONGEST.items() if column.endswith(suffix)), np.inf)
    numbers = values.to_numpy()
    # NaN compares false, and an infinity is above any finite limit: one pass over the column
    absurd = np.isinf(numbers) if limit == np.inf else np.abs(numbers) > limit
    if not absurd.any():
        return values
    positions = np.flatnonzero(absurd)
    row = int(values.index[positions[0]])
    warnings.append(
        f"{file} {result.where(row)}, column {column}: {float(numbers[positions[0]]):g} is no "
        f"measurement; {counted(positions.size, 'such value')} read as missing"
    )
    return values.mask(absurd)


def _ensure_latency(frame: pd.DataFrame, file: str, warnings: list[str]) -> pd.DataFrame:
    if "latency_ms" in frame.columns:
        return frame
    stages = [c for c in frame.columns if c.startswith("stage_") and c.endswith("_ms")]
    if not stages:
        raise TableReadError("no 'latency_ms' column and no stage_<name>_ms columns to sum")
    warnings.append(f"{file}: no 'latency_ms' column; latency is the sum of {counted(len(stages), 'stage')}")
    return frame.assign(latency_ms=frame[stages].sum(axis=1, min_count=1))


def _drop_duplicates(name: str, frame: pd.DataFrame, file: str, warnings: list[str]) -> pd.DataFrame:
    """Keep the last of rows sharing (ts, key); the frame is already sorted by ts, stably."""
    spec = TABLES.get(name)
    if name == EVENTS_TABLE or spec is None:  # events, and an importer's extension tables (series)
        return frame
    key = [c for c in spec.key if c in frame.columns]
    if spec.per_request and not key:
        return frame  # two requests may arrive in the same instant; without ids both are real
    ts = frame["ts"].to_numpy()
    repeated = ts[1:] == ts[:-1]
    if not repeated.any():
        return frame
    # Only rows whose ts repeats can be duplicates; checking just those keeps this cheap.
    candidate = np.zeros(ts.size, dtype=bool)
    candidate[1:] |= repeated
    candidate[:-1] |= repeated
    rows = np.flatnonzero(candidate)
    duplicated = frame.index[rows[_duplicated_last(ts[rows], [frame[c].iloc[rows] for c in key])]]
    if duplicated.size:
        warnings.append(
            f"{file}: {counted(duplicated.size, 'row')} with a duplicate (ts, {', '.join(key) or 'row'}); "
            "kept the last"
        )
        frame = frame.drop(index=duplicated).reset_index(drop=True)
    return frame


_CODE_LIMIT = 2**62  # the combined codes stay below this (int64)


def _duplicated_last(ts: np.ndarray, keys: list[pd.Series]) -> np.ndarray:
    """``DataFrame.duplicated(keep="last")`` of (ts, *keys) for rows sorted by ts, without hashing tuples.

    A GPU table repeats every instant once per GPU, so every row is a candidate: the instant's run
    number and each key's code make one integer per row, and integers hash fast (a day of eight
    GPUs: 55 ms instead of 120). Where those integers already ascend, as when every instant lists
    its GPUs in the same order, they are distinct without hashing (12 ms).
    """
    combined = np.concatenate(([0], np.cumsum(ts[1:] != ts[:-1]))).astype("int64")
    for column in keys:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        width = max(len(uniques), 1)
        if combined.size and int(combined.max()) >= _CODE_LIMIT // width:  # would overflow: the general way
            frame = pd.DataFrame({"ts": ts, **{f"k{i}": k.to_numpy() for i, k in enumerate(keys)}})
            return frame.duplicated(keep="last").to_numpy()
        combined = combined * width + codes
    if np.all(combined[1:] > combined[:-1]):  # each instant's keys in one order (GPUs 0..7): all distinct
        return np.zeros(combined.size, dtype=bool)
    return pd.Series(combined).duplicated(keep="last").to_numpy()
