"""Every column this project writes into a dump, by table: the registry ``docs/dump-format.md`` is held to.

A user's own table may carry any column (one whose name ends in a unit is read as a number, see
:mod:`diagnose.dump.schema`); the project's writers (the recorder, ``pull``, every importer, the
statement catalogue's events) write only columns named here. ``tests/test_column_registry.py`` holds
the document and this registry to each other both ways, and the suite's every importer read to the
registry (``tests/conftest.py``), so a column added to a writer and to neither fails a test naming it.
What a column means is said once, in the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose.dump.schema import COLUMNS, GROUP, TABLES

# Columns beyond those ``diagnose record`` writes (schema.COLUMNS), by the writers that fill them.
_BEYOND_RECORD: dict[str, tuple[str, ...]] = {
    "processes": (GROUP, "num_procs"),  # pull: process-exporter's groups
    # nvidia-smi and dcgm-exporter (names, ids, MIG slices, the default power limit), profiling fields
    "gpu": ("sm_active_pct", "gpu_name", "gpu_uuid", "mig_instance", "default_power_limit_w"),
    "gpu_processes": ("sm_pct", "mem_pct", "type"),  # pmon, compute-apps
    "requests": (
        "ts",
        "id",
        "latency_ms",
        "ttft_ms",
        "tpot_ms",
        "itl_max_ms",
        "itl_max_at_ms",
        "input_len",
        "output_len",
        "batch_size",
        "status",
        "worker",
        "operation",
    ),
    "allocator": (  # beside its counters and pools, which are numbers by its spec
        "ts",
        "device",
        "rank",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "largest_free_block_bytes",
        *sorted(TABLES["allocator"].numeric),
    ),
    "gpu_activity": (
        "ts",
        "dur_us",
        "kind",
        "name",
        "gpu",
        "stream",
        "bytes",
        "copy_kind",
        "pinned",
        "correlation",
    ),
    "host_calls": ("ts", "dur_us", "kind", "name", "thread", "correlation", "step"),
    # Exported series whose metric no engine or exporter map knows (Prometheus API answers, Grafana CSV)
    "series": ("ts", "series", "value"),
    "op_summary": (
        "name",
        "kind",
        "calls",
        "self_host_us",
        "host_total_us",
        "self_device_us",
        "device_total_us",
        "table_self_host_us",
    ),
    "load_steps": (  # a load test's steps as its tool printed them (perf_analyzer, serving benchmarks)
        "tool",
        "line",
        "concurrency",
        "rate_rps",
        "batch_size",
        "throughput_rps",
        "latency_avg_ms",
        "latency_p50_ms",
        "latency_p90_ms",
        "latency_p95_ms",
        "latency_p99_ms",
        "requests",
        "delayed_pct",
        "server_requests",
        "server_inferences",
        "server_executions",
        "server_latency_ms",
        "server_queue_ms",
        "server_compute_ms",
        "failed_requests",
        "sent_at_once",
        "duration_s",
        "input_tokens",
        "output_tokens",
        "concurrency_mean",
        "concurrency_peak",
        "ttft_avg_ms",
        "ttft_p50_ms",
        "ttft_p90_ms",
        "ttft_p95_ms",
        "ttft_p99_ms",
        "tpot_avg_ms",
        "tpot_p50_ms",
        "tpot_p90_ms",
        "tpot_p95_ms",
        "tpot_p99_ms",
        "tpot_with_first",
        "itl_avg_ms",
        "itl_p50_ms",
        "itl_p90_ms",
        "itl_p95_ms",
        "itl_p99_ms",
    ),
    # Beyond these, an event carries the figures its statement names (statements/*.yaml `figures`), and
    # a flight recorder's trigger event the values of the signals its condition read.
    "events": (
        "ts",
        "kind",
        "message",
        "mode",
        "cumulative",
        "seconds",
        "oom_class",
        "oom_reason",
        "xid",
        "device",
        "meaning",
        "fatal",
        "pid",
        "process",
        "trigger",
        "requested_bytes",
        "total_bytes",
        "free_bytes",
        "allocated_bytes",
        "reserved_unallocated_bytes",
        "process_in_use_bytes",
        "statement",
        "writer",
        "line",
        "ts_source",
    ),
}

REGISTERED: dict[str, frozenset[str]] = {
    table: frozenset(COLUMNS.get(table, ())) | frozenset(_BEYOND_RECORD.get(table, ()))
    for table in (*COLUMNS, *_BEYOND_RECORD)
}
# A family of columns by pattern: a request's time in each of its stages, whatever the stages' names.
_PATTERNS: dict[str, re.Pattern[str]] = {"requests": re.compile(r"^stage_[a-z0-9_]+_ms$")}


def is_registered(table: str, column: str, figures: frozenset[str] = frozenset()) -> bool:
    """Whether the project's writers may write ``column`` into ``table``; ``figures``, the names an
    event may carry beyond the registry's: the statement catalogue's figures
    (:func:`diagnose.statements.figure_names`) and the flight recorder's trigger signals."""
    if column in REGISTERED.get(table, ()):
        return True
    if table == "events" and column in figures:
        return True
    pattern = _PATTERNS.get(table)
    return bool(pattern and pattern.match(column))


def unregistered(table: str, columns: Iterable[object], figures: frozenset[str] = frozenset()) -> list[str]:
    """The columns among ``columns`` no writer may write into ``table`` (a table not in the registry:
    all of them)."""
    return [str(c) for c in columns if not is_registered(table, str(c), figures)]
