"""Build regular time series ("signals") from a dump's tables.

Each signal has a start, a step and one value per step; a step with no sample
is NaN, never zero. For per-process tables one exception is principled: at a
second where the table *was* sampled but a process has no row, that process
was not running, so its CPU or GPU memory is 0 there.

Processes that come back under new pids (a cron job started every few
minutes) are one signal per name and command line, summed over their pids;
command lines that differ only in numbers (``--seconds 16.6``, ``--seconds
17.7``) are one job too, as long as its runs never overlap.
Request signals use a window long enough to hold about ten requests, so a
per-window P99 means something at low traffic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump, RequestSample
from diagnose.dump.processes import GROUP, identifiers, process_ids
from diagnose.dump.schema import COLUMNS, UNIT_SUFFIXES, stage_columns
from diagnose.quantiles import binned_quantiles

_MIN_REQUESTS_PER_WINDOW = 10
_MAX_PROCESS_SIGNALS = 20
# A signal has at most this many samples (about 23 days at 1 s): a folder holding evidence from
# different years is analysed on a coarser grid rather than allocating one slot a second between.
MAX_GRID = 2_000_000
_SERIES_TABLES = {
    "system": ("cpu_pct", "mem_used_bytes", "swap_used_bytes", "swap_in_per_s", "swap_out_per_s", "load1"),
    "server": tuple(c for c in COLUMNS["server"] if c != "ts"),
    "allocator": ("allocated_bytes", "reserved_bytes", "inactive_split_bytes", "num_alloc_retries"),
}
_GPU_COLUMNS = ("util_pct", "mem_used_bytes", "sm_clock_mhz", "power_w", "temp_c")
_PROCESS_COLUMNS = {"processes": ("cpu_pct", "max_thread_cpu_pct"), "gpu_processes": ("mem_used_bytes",)}


@dataclass
class Signal:
    name: str  # e.g. requests.latency_ms.p99, gpu_processes.mem_used_bytes[pid=9001]
    kind: str  # latency, throughput, stage, gpu, host, process, allocator, server
    start: float  # epoch seconds of values[0]
    step: float
    values: np.ndarray
    meta: dict = field(default_factory=dict)  # pid, name, cmdline, gpu, server

    def times(self) -> np.ndarray:
        return self.start + self.step * np.arange(self.values.size)


def build_signals(dump: Dump, server_pids: frozenset[int] | None = None) -> list[Signal]:
    return in_order(iter_signals(dump, server_pids))


Batch = tuple[tuple[int, int], list[Signal]]  # (its place in the signals' order, the signals)


def iter_signals(dump: Dump, server_pids: frozenset[int] | None = None) -> Iterator[Batch]:
    """The signals a table at a time, so that a helper can search the first while the rest are built.

    The cheap batches come first (host series, then each GPU's), the costly last (processes, then
    requests: 0.1 s each on a day-long dump), so that the helper has work from the start; each comes
    with its place in the signals' order (requests, host series, GPUs, processes): see :func:`in_order`.
    """
    step = _base_step(dump)
    kept = _enough_samples
    for position, (table, columns) in enumerate(_SERIES_TABLES.items()):
        frame = dump.table(table)
        if frame is not None and len(frame):
            if table == "allocator" and "pid" in frame.columns:
                frame = frame.groupby("ts", as_index=False).sum(numeric_only=True)
            yield (
                (1, position),
                kept([_series(frame, table, c, step, table) for c in columns if c in frame.columns]),
            )
    gpu = dump.table("gpu")
    if gpu is not None and "gpu" in gpu.columns:
        ts = gpu["ts"].to_numpy()
        gpu_columns = {c: _numbers(gpu[c]) for c in _GPU_COLUMNS if c in gpu.columns}
        for index, rows in _rows_by_gpu(gpu["gpu"]):
            start, slots = _placed(ts[rows], step)  # one GPU's samples: one grid for all its columns
            signals = [
                Signal(f"gpu.{c}[gpu={index}]", "gpu", start, step, _on_grid(slots, v[rows]), {"gpu": index})
                for c, v in gpu_columns.items()
            ]
            yield (2, index), kept(signals)
    for position, (table, columns) in enumerate(_PROCESS_COLUMNS.items()):
        frame = dump.table(table)
        if frame is None or not {"pid", GROUP} & set(frame.columns):
            continue
        # An idle row (nvidia-smi pmon prints "-" for every field) names no process; a
        # process-exporter group has a negative number (diagnose.dump.processes).
        pid = process_ids(frame)
        frame = frame.loc[pid.notna()].assign(pid=pid[pid.notna()].astype("int64"))
        if GROUP in frame.columns:  # a group is named by its group name where no process name is given
            named = frame["name"] if "name" in frame.columns else pd.Series(pd.NA, index=frame.index)
            frame = frame.assign(name=named.astype("string").fillna(frame[GROUP].astype("string")))
        present = tuple(c for c in columns if c in frame.columns)
        if len(frame) and present:
            yield (
                (3, position),
                kept(_process_signals(frame, table, present, step, server_pids or frozenset())),
            )
    requests = dump.table("requests")
    if requests is not None and len(requests) > 1:
        yield (0, 0), kept(_request_signals(requests, step, dump.request_sample))


def in_order(batches: Iterable[Batch]) -> list[Signal]:
    """The batches' signals in the signals' order, whatever order they were built in."""
    return [signal for _, batch in sorted(batches, key=lambda placed: placed[0]) for signal in batch]


def _enough_samples(signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if np.isfinite(s.values).sum() >= 10]


def _base_step(dump: Dump) -> float:
    step = _sampling_step(dump)
    span = dump.span()
    if span is not None and (span[1] - span[0]) / step > MAX_GRID:
        return (span[1] - span[0]) / MAX_GRID
    return step


def grid_note(dump: Dump) -> str | None:
    """Why the signals are coarser than the samples, when the evidence spans too long a time."""
    step, span = _base_step(dump), dump.span()
    if span is None or step == _sampling_step(dump):
        return None
    return (
        f"the evidence spans {(span[1] - span[0]) / 86400:,.0f} days (files from different times in one "
        f"folder?): its signals are analysed at one sample every {step:,.0f} s"
    )


def _sampling_step(dump: Dump) -> float:
    if dump.manifest.interval_s:
        return float(dump.manifest.interval_s)
    for name in ("system", "gpu", "processes", "server", "allocator", "gpu_processes"):
        interval = dump.interval(name)
        if interval is not None:
            return max(interval, 0.001)
    return 1.0


def _grid(ts: np.ndarray, start: float, step: float) -> np.ndarray:
    return np.round((ts - start) / step).astype("int64")


def _series(frame: pd.DataFrame, table: str, column: str, step: float, kind: str) -> Signal:
    return _signal(frame["ts"].to_numpy(), _numbers(frame[column]), f"{table}.{column}", step, kind, {})


def _signal(ts: np.ndarray, values: np.ndarray, name: str, step: float, kind: str, meta: dict) -> Signal:
    """Samples (sorted by time) placed on the grid of ``step``."""
    start, slots = _placed(ts, step)
    return Signal(name, kind, start, step, _on_grid(slots, values), meta)


def _placed(ts: np.ndarray, step: float) -> tuple[float, np.ndarray]:
    """The grid's start for these times (sorted), and each one's slot on it."""
    start = np.floor(ts[0] / step) * step
    return float(start), _grid(ts, start, step)


def _on_grid(slots: np.ndarray, values: np.ndarray) -> np.ndarray:
    series = np.full(int(slots[-1]) + 1, np.nan)
    series[slots] = values  # rows are sorted by ts, so the last sample in a slot wins
    return series


def _numbers(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")


def _rows_by_gpu(column: pd.Series) -> Iterator[tuple[int, np.ndarray]]:
    """Each GPU index (ascending) with its rows' positions, in table order; a row without one is no GPU's.

    A GPU table interleaves its GPUs row by row: one stable sort of their codes (a radix sort, for a
    few thousand GPUs at most) finds every GPU's rows without copying the table per GPU.
    """
    codes, indexes = pd.factorize(identifiers(column), sort=True)
    if len(indexes) == 0:
        return
    order = np.argsort(codes.astype("int16" if len(indexes) < 2**15 else "int64"), kind="stable")
    counts = np.bincount(codes[codes >= 0], minlength=len(indexes))
    first = int(np.count_nonzero(codes < 0))  # the rows without an index sort first
    for index, rows in zip(indexes, np.split(order[first:], np.cumsum(counts)[:-1]), strict=True):
        yield int(index), rows


def _request_signals(
    requests: pd.DataFrame, base_step: float, sample: RequestSample | None = None
) -> list[Signal]:
    """Throughput, P50, P99 and stage means per window; a sample's throughput from its counts of every
    request per second (dump/sample.py)."""
    ts = requests["ts"].to_numpy()
    duration = max(ts[-1] - ts[0], base_step)
    rate = len(ts) / duration
    step = float(max(base_step, np.ceil(_MIN_REQUESTS_PER_WINDOW / rate / base_step) * base_step))
    start = np.floor(ts[0] / step) * step
    slot = ((ts - start) // step).astype("int64")
    bins = int(slot[-1]) + 1
    counts = np.bincount(slot, minlength=bins).astype("float64")
    present = counts > 0
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    arrived = counts
    if sample is not None and len(sample.per_second):
        seconds = sample.per_second.index.to_numpy(dtype="float64")
        window = np.clip(((seconds - start) // step).astype("int64"), 0, bins - 1)
        arrived = np.bincount(window, sample.per_second.to_numpy(dtype="float64"), minlength=bins)
    signals = [Signal("requests.throughput_rps", "throughput", start, step, arrived / step)]
    p50, p99 = binned_quantiles(slot, latency, bins, (0.50, 0.99))
    signals.append(Signal("requests.latency_ms.p50", "latency", start, step, p50))
    signals.append(Signal("requests.latency_ms.p99", "latency", start, step, p99))
    for stage, column in stage_columns(requests).items():
        sums = np.bincount(slot, np.nan_to_num(requests[column].to_numpy(dtype="float64")), minlength=bins)
        mean = np.where(present, sums / np.maximum(counts, 1), np.nan)
        signals.append(Signal(f"requests.{column}.mean", "stage", start, step, mean, {"stage": stage}))
    return signals


def _process_signals(
    frame: pd.DataFrame, table: str, columns: tuple[str, ...], step: float, server_pids: frozenset[int]
) -> list[Signal]:
    ts = frame["ts"].to_numpy()
    start = np.floor(ts[0] / step) * step
    slots = _grid(ts, start, step)
    sampled = np.zeros(int(slots[-1]) + 1, dtype=bool)
    sampled[slots] = True
    name = (
        frame["name"].astype("string").fillna("?")
        if "name" in frame.columns
        else pd.Series("?", index=frame.index)
    )
    cmdline = frame["cmdline"].astype("string").fillna("") if "cmdline" in frame.columns else name
    pids = frame["pid"].to_numpy()
    identity, identities = _identities(name, cmdline)
    groups: dict[str, np.ndarray] = {}
    for rows in _instances(identity, identities, slots, pids):
        unique_pids = np.unique(pids[rows])
        if unique_pids.size == 1 and unique_pids[0] < 0:  # a process-exporter group: its name is all it has
            groups[f"group={name.iloc[rows[-1]]}"] = rows
        elif unique_pids.size == 1:
            groups[f"pid={int(unique_pids[0])}"] = rows
        else:
            key = f"name={identities[identity[rows[-1]]].split(_SEPARATOR)[0]}"
            groups[key if key not in groups else f"{key}#{len(groups)}"] = rows
    signals = []
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
        candidates = []
        for key, rows in groups.items():
            series = np.bincount(slots[rows], np.nan_to_num(values[rows]), minlength=sampled.size)
            series[~sampled] = np.nan
            row = rows[-1]
            ids = {int(p) for p in np.unique(pids[rows])}
            meta = {
                "pids": sorted(p for p in ids if p >= 0),
                "name": str(name.iloc[row]),
                "cmdline": str(cmdline.iloc[row]),
                **({"server": bool(ids & server_pids)} if server_pids else {}),  # unsaid where unknown
                **({"group": str(name.iloc[row])} if min(ids) < 0 else {}),
            }
            candidates.append(Signal(f"{table}.{column}[{key}]", "process", float(start), step, series, meta))
        candidates.sort(key=lambda s: -np.nanmax(s.values))
        signals += candidates[:_MAX_PROCESS_SIGNALS]
    return signals


def _identities(name: pd.Series, cmdline: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each row's identity (name and command line) as a code, and the identities the codes stand for.

    A table holds few distinct names and command lines in many rows: each column is hashed to codes
    once, and only the distinct pairs are joined into strings.
    """
    name_codes, names = pd.factorize(name)
    if cmdline is name:
        cmd_codes, cmdlines = name_codes, names
    else:
        cmd_codes, cmdlines = pd.factorize(cmdline)
    width = max(len(cmdlines), 1)
    exact, pairs = pd.factorize(name_codes.astype("int64") * width + cmd_codes)
    return exact, [f"{names[p // width]}{_SEPARATOR}{cmdlines[p % width]}" for p in pairs.tolist()]


def _instances(
    exact: np.ndarray, identities: list[str], slots: np.ndarray, pids: np.ndarray
) -> list[np.ndarray]:
    """Row positions of each program: same name and command line up to its numbers, never two at once.

    Runs of a job whose arguments vary (a duration, a date) are one program; two
    servers that differ only in a port, running side by side, stay two. ``exact``
    is each row's identity as a code into ``identities`` (see :func:`_identities`),
    so nothing sorts strings.
    """
    loose_names = pd.Series(identities, dtype="object").str.replace(_NUMBER, "#", regex=True)
    loose_of_exact, _ = pd.factorize(loose_names)
    loose = loose_of_exact[exact]
    pid_codes, _ = pd.factorize(pids, use_na_sentinel=False)
    programs = []
    for group in pd.Series(np.arange(exact.size)).groupby(loose).groups.values():
        rows = np.asarray(group)
        codes = np.flatnonzero(np.bincount(exact[rows]))
        if codes.size > 1 and _overlap(slots[rows], pid_codes[rows]):
            programs += [rows[exact[rows] == code] for code in codes]
        else:
            programs.append(rows)
    return [track for rows in programs for track in _tracks(rows, slots, pid_codes)]


def _tracks(rows: np.ndarray, slots: np.ndarray, pid_codes: np.ndarray) -> list[np.ndarray]:
    """One program's rows split into processes that never run at once.

    Two processes of the same name and command line alive at the same time are two processes (a
    periodic job called ``python`` beside a server called ``python``, seen in a GPU's process table
    that has no command line); one after the other, they are one program's runs. Each pid, in the
    order they appear, joins the first track whose last pid ended before it began (the fewest
    tracks for an interval graph), so a job's runs stay one signal beside the server's.
    """
    if not _overlap(slots[rows], pid_codes[rows]):
        return [rows]
    spans = (
        pd.DataFrame({"pid": pid_codes[rows], "slot": slots[rows]}).groupby("pid")["slot"].agg(["min", "max"])
    )
    track_of: dict[int, int] = {}
    ends: list[int] = []
    for pid, first, last in spans.sort_values(["min", "max"]).itertuples():
        free = next((t for t, end in enumerate(ends) if end < first), None)
        if free is None:
            ends.append(last)
            free = len(ends) - 1
        else:
            ends[free] = last
        track_of[pid] = free
    track = pd.Series(pid_codes[rows]).map(track_of).to_numpy()
    return [rows[track == t] for t in range(len(ends))]


_NUMBER = r"\d+(?:\.\d+)?"
# Between name and command line: not NUL, which numpy's strings drop from the end of a value.
_SEPARATOR = "\x1f"


def _overlap(slots: np.ndarray, pid_codes: np.ndarray) -> bool:
    """Whether two of these pids (as codes 0..n-1) were sampled at the same slot.

    Distinct (slot, pid) pairs against distinct slots, counted by hashing (``pd.unique``): a day of
    samples sorts slowly, and a dense mark of every (slot, pid) cell would grow with a cron job's
    many pids.
    """
    slots = slots.astype("int64")
    pairs = slots * (int(pid_codes.max()) + 1) + pid_codes
    return bool(len(pd.unique(pairs)) > len(pd.unique(slots)))


_NAMES = {
    "gpu_processes.mem_used_bytes": "GPU memory of {who}",
    "gpu.mem_used_bytes": "GPU {who} memory used",
    "gpu.util_pct": "GPU {who} utilisation",
    "gpu.temp_c": "GPU {who} temperature",
    "gpu.sm_clock_mhz": "GPU {who} SM clock",
    "gpu.power_w": "GPU {who} power",
    "processes.cpu_pct": "CPU of {who}",
    "processes.max_thread_cpu_pct": "busiest thread of {who}",
    "system.cpu_pct": "host CPU",
    "system.mem_used_bytes": "host memory used",
    "system.swap_used_bytes": "swap used",
    "requests.throughput_rps": "throughput",
    "allocator.num_alloc_retries": "allocator retries in {who}",
    "allocator.allocated_bytes": "PyTorch's allocated memory in {who}",
    "allocator.reserved_bytes": "PyTorch's reserved memory in {who}",
    "server.queue_depth": "requests waiting",
    "server.running": "requests running",
    "server.kv_cache_usage_pct": "KV cache in use",
    "server.batch_size": "batch size",
    "server.tokens_per_s": "tokens generated a second",
}
# The dump's unit suffixes (and the rate's), longest first: "swap_in_per_s" says "swap in", not "swap in per".
_UNITS = sorted((*UNIT_SUFFIXES, "_rps"), key=len, reverse=True)


def process_commands(tables: Mapping[str, pd.DataFrame]) -> dict[int, str]:
    """Each pid's command, as the dump's processes table names it most often: what a signal of one
    process is called in words."""
    processes = tables.get("processes")
    if processes is None or processes.empty or not {"pid", "name"} <= set(processes.columns):
        return {}
    named = processes.dropna(subset=["pid", "name"])
    most = named.groupby("pid")["name"].agg(lambda names: names.value_counts().index[0])
    return {int(cast(float, pid)): str(name) for pid, name in most.items()}  # the index holds pids


def signal_words(name: str, commands: Mapping[int, str] | None = None) -> str:
    """A signal as a reader says it: ``gpu_processes.mem_used_bytes[name=python3]``: GPU memory of python3;
    a process's by its command where ``commands`` knows its pid ("busiest thread of python (pid 4242)")."""
    base, _, key = name.partition("[")
    who = key.rstrip("]").split("=", 1)[-1] if key else ""
    if key.startswith("pid="):
        command = (commands or {}).get(int(who)) if who.isdigit() else None
        who = f"{command} (pid {who})" if command else f"pid {who}"
    if base in _NAMES:  # "GPU  memory used" and "allocator retries in" where no one is named
        return re.sub(r" (?:of|in)$", "", " ".join(_NAMES[base].format(who=who).split()))
    if base.startswith("requests.stage_"):
        stage, _, statistic = base.removeprefix("requests.stage_").partition("_ms.")
        return f"{stage} stage ({statistic or 'mean'})"
    if base.startswith("requests."):
        return name.removeprefix("requests.").replace("latency_ms.", "latency ")
    table, _, column = base.partition(".")  # any other column in words: "server ttft", "system load1"
    column = next((column.removesuffix(unit) for unit in _UNITS if column.endswith(unit)), column)
    said = f"{table.replace('_', ' ')} {column.replace('_', ' ')}"
    return f"{said} of {who}" if who else said
