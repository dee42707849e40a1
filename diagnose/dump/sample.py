"""A request table too big to hold: read in batches, counted in full, analysed on a uniform sample.

A busy service logs millions of requests a day (8.6 million at 100 a second). Holding every one costs
memory in proportion (2.5 GiB at 8.6 million, 7.9 GiB at 30 million), and what the rules read needs
no such thing: percentiles, shares, medians and rank correlations are estimated from a uniform
sample of half a million requests to well within what they are read for (a percentile's rank within
0.015 points at P99, one standard error), and the figures that are counts (throughput, arrival rates)
come from every request, counted per second as the batches go by.

So a Parquet request table of more than ``ANALYSED_REQUESTS`` rows is read in batches of a million
(a plain CSV in blocks of 16 MiB, its rows estimated from the lines in its first MiB), each
cleaned as a whole table would be (dump/cleaning.py), its requests counted per second, and each
request kept with probability ANALYSED_REQUESTS / rows (seeded: the same file gives the same
sample). What the sample changes is said in the report; the facts that need every request in flight
at once (silences in the streams, a batcher replayed on the arrivals) are not computed on it, and say
so. A smaller table, or one in another format (JSONL, a gzipped CSV), is read whole, exactly as before;
so is a CSV whose later rows do not fit the types its first block set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from diagnose.dump.cleaning import normalised
from diagnose.dump.formats import ReadResult, TableReadError
from diagnose.dump.model import RequestSample

ANALYSED_REQUESTS = 500_000  # above this many rows, a request table is analysed on a sample of about this
_BATCH_ROWS = 1 << 20
_CSV_BLOCK_BYTES = 16 << 20  # a CSV's blocks (64 MiB held 1.24 GiB at 8.6 M requests, 16 MiB 1.07)
_CSV_HEAD_BYTES = 1 << 20  # the lines in this much of a CSV estimate its rows


class _Unsampled(Exception):
    """The file turned out not to suit the batch reader (a CSV whose later rows are not of the types its
    first block set): it is read whole, as every other table is."""


def sampled_requests(
    file: Path, label: str, warnings: list[str]
) -> tuple[pd.DataFrame, RequestSample] | None:
    """The table's sample and counts, or None where it is read whole (small enough, or not Parquet or
    plain CSV)."""
    opened = _parquet(file) if file.name.endswith(".parquet") else _csv(file)
    if opened is None:
        return None
    batches, keep, csv = opened
    try:
        return _sample(batches, keep, csv, label, warnings)
    except _Unsampled:
        return None


def _parquet(file: Path) -> tuple[Iterator[pa.RecordBatch], float, bool] | None:
    """Its batches and the share of requests to keep, where it holds more than the analysis does."""
    try:
        # pre_buffer off: with it, Arrow reads ahead and keeps the whole file's column chunks (a day of
        # 30 million requests: 0.9 GiB held while reading, 0.45 GiB without, and no slower)
        parquet = pq.ParquetFile(file, pre_buffer=False)
        rows = parquet.metadata.num_rows
    except (pa.ArrowException, OSError):
        return None  # the whole-table reader says what is wrong with it
    if rows <= ANALYSED_REQUESTS:
        return None
    return parquet.iter_batches(batch_size=_BATCH_ROWS), ANALYSED_REQUESTS / rows, False


def _csv(file: Path) -> tuple[Iterator[pa.RecordBatch], float, bool] | None:
    """A CSV's batches, streamed, and the share to keep: its rows estimated from its size and the lines
    in its first MiB (a CSV says nothing of its length before it is read; nothing is parsed twice)."""
    if not file.name.endswith(".csv"):
        return None
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(_CSV_HEAD_BYTES)
        rows = size * head.count(b"\n") / max(len(head), 1) - 1  # less the header
        if rows <= ANALYSED_REQUESTS:
            return None
        reader = pa_csv.open_csv(file, read_options=pa_csv.ReadOptions(block_size=_CSV_BLOCK_BYTES))
    except (pa.ArrowException, OSError):
        return None  # the whole-table reader says what is wrong with it, or reads it otherwise
    return iter(reader), ANALYSED_REQUESTS / rows, True


def _sample(
    batches: Iterator[pa.RecordBatch], keep: float, csv: bool, label: str, warnings: list[str]
) -> tuple[pd.DataFrame, RequestSample]:
    """Each batch cleaned, counted and sampled (see the module's note). ``csv``: rows from line 2 (the
    header is line 1), and a batch the first one's types do not fit sends the file to the whole read."""
    first_line = 2 if csv else 1
    rng = np.random.default_rng(0)
    kept: list[pd.DataFrame] = []
    counts: list[pd.Series] = []
    statuses: list[pd.Series] = []
    slowest = np.nan
    said: dict[str, None] = {}  # each batch's warnings, each said once
    pool = pa.default_memory_pool()
    try:
        for batch in batches:
            frame = batch.to_pandas(split_blocks=True, self_destruct=True)
            batch_warnings: list[str] = []
            try:
                read = ReadResult(frame, first_line=first_line)
                frame = normalised("requests", read, label, batch_warnings)
            except TableReadError as error:
                rows_read = f"rows {first_line:,}-{first_line + batch.num_rows - 1:,}"
                raise TableReadError(f"{rows_read}: {error}") from None
            said.update(dict.fromkeys(batch_warnings))
            first_line += batch.num_rows
            counts.append(_per_second(frame["ts"].to_numpy(dtype="float64")))
            latency = frame["latency_ms"].to_numpy(dtype="float64")
            latency = latency[np.isfinite(latency)]
            if latency.size:
                slowest = np.fmax(slowest, latency.max())
            if "status" in frame.columns:
                statuses.append(frame["status"].value_counts(dropna=False))
            kept.append(frame[rng.random(len(frame)) < keep])
            del frame
            # Arrow's allocator keeps what each batch freed: without this, 30 M requests peak 110 MiB higher
            pool.release_unused()
    except pa.ArrowException as error:
        if csv:
            raise _Unsampled() from error  # a later block that the first one's types do not fit
        raise TableReadError(f"not a readable Parquet file ({str(error).splitlines()[0]})") from None
    warnings.extend(said)
    sample = pd.concat(kept, ignore_index=True).sort_values("ts", kind="stable", ignore_index=True)
    per_second = pd.concat(counts).groupby(level=0).sum().astype("int64")
    by_status = None
    if statuses:
        every = pd.concat(statuses)
        by_status = every.groupby(every.index.astype("object"), dropna=False).sum()
    found = RequestSample(
        int(per_second.sum()), per_second, by_status, float(slowest) if np.isfinite(slowest) else None
    )
    warnings.append(f"{label}: {found.describe(len(sample))}")
    return sample, found


def _per_second(ts: np.ndarray) -> pd.Series:
    """Requests per whole epoch second (index: the second's start), by counting, not sorting."""
    seconds = np.floor(ts[np.isfinite(ts)]).astype("int64")
    if not seconds.size:
        return pd.Series(dtype="int64")
    first = int(seconds.min())
    number = np.bincount(seconds - first)
    held = np.flatnonzero(number)
    return pd.Series(number[held], index=(held + first).astype("float64"))
