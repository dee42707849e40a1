"""The tables of dump format version 1: names, keys and which columns are numbers.

This mirrors ``docs/dump-format.md``; a column whose name ends in a unit suffix
is numeric whatever table it is in, so new columns need no code change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

GROUP = "group"  # processes: process-exporter's group name, in place of a pid (diagnose.dump.processes)
TABLE_SUFFIXES = (".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".parquet")
UNIT_SUFFIXES = ("_bytes", "_pct", "_ms", "_us", "_s", "_w", "_c", "_mhz", "_per_s")


@dataclass(frozen=True)
class TableSpec:
    name: str
    key: tuple[str, ...]
    numeric: frozenset[str]
    per_request: bool = False
    timed: bool = True  # rows carry a ts (a summary of a profile has none)


TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec("system", (), frozenset({"cpu_count", "load1", "procs_running"})),
        TableSpec(
            "processes", ("pid", GROUP), frozenset({"pid", "num_threads", "num_procs", "cores_allowed"})
        ),
        # A row's identity at one time: the key columns the frame has (a MIG slice of a GPU, one device
        # or rank of a process's allocator are rows of their own).
        TableSpec("gpu", ("gpu", "mig_instance"), frozenset({"gpu"})),
        TableSpec("gpu_processes", ("gpu", "pid"), frozenset({"gpu", "pid"})),
        TableSpec(
            "allocator",
            ("pid", "device", "rank"),
            frozenset(
                {
                    "pid",
                    "num_alloc_retries",
                    "num_ooms",
                    "num_device_alloc",
                    "num_device_free",
                    "intra_op_threads",
                    "inter_op_threads",
                }
            ),
        ),
        TableSpec(
            "server",
            (),
            frozenset({"queue_depth", "running", "batch_size", "throughput_rps", "tokens_per_s"}),
        ),
        TableSpec(
            "requests",
            ("id",),
            frozenset({"input_len", "output_len", "batch_size"}),
            per_request=True,
        ),
    )
}

# A profiler trace's tables (one row per GPU activity, per host-side span). Their ``ts`` is the trace's
# own clock in microseconds, often relative, never epoch seconds: they are kept apart from the
# time-series tables (Dump.traces), never cut to a window, never deduplicated (two kernels on two
# streams may start in the same microsecond).
TRACE_TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec("gpu_activity", (), frozenset({"gpu", "stream", "bytes", "correlation"}), per_request=True),
        TableSpec("host_calls", (), frozenset({"correlation", "step"}), per_request=True),
        # A profile's summary (key_averages, nsys stats): one row per name, no timeline.
        TableSpec("op_summary", (), frozenset({"calls"}), per_request=True, timed=False),
    )
}

# Results without a clock of their own, each row a whole run's figure: a load test's steps (perf_analyzer
# prints no times). Every file's rows are kept (unlike a trace's tables, two files are two tests, not two
# clocks), never cut to a window.
SUMMARY_TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            "load_steps",
            (),
            frozenset(
                {
                    "line",
                    "concurrency",
                    "rate_rps",
                    "throughput_rps",
                    "batch_size",
                    "requests",
                    "server_requests",
                    "server_inferences",
                    "server_executions",
                }
            ),
            timed=False,
        ),
    )
}

# The columns of the fixed-schema tables, in the order diagnose record writes them (any may be empty).
COLUMNS = {
    "system": [
        "ts",
        "cpu_pct",
        "cpu_system_pct",
        "cpu_count",
        "load1",
        "procs_running",
        "ctx_switches_per_s",
        "mem_used_bytes",
        "mem_total_bytes",
        "swap_used_bytes",
        "swap_in_per_s",
        "swap_out_per_s",
        "disk_read_bytes_per_s",
        "disk_write_bytes_per_s",
        "net_rx_bytes_per_s",
        "net_tx_bytes_per_s",
    ],
    "processes": [
        "ts",
        "pid",
        "name",
        "cmdline",
        "cpu_pct",
        "rss_bytes",
        "num_threads",
        "cores_allowed",
        "minor_faults_per_s",
        "max_thread_cpu_pct",
        "run_queue_wait_pct",
        "ctx_switches_voluntary_per_s",
        "ctx_switches_involuntary_per_s",
    ],
    "gpu": [
        "ts",
        "gpu",
        "util_pct",
        "mem_bw_util_pct",
        "mem_used_bytes",
        "mem_total_bytes",
        "sm_clock_mhz",
        "max_sm_clock_mhz",
        "power_w",
        "power_limit_w",
        "temp_c",
        "throttle_reasons",
        "pcie_tx_bytes_per_s",
        "pcie_rx_bytes_per_s",
    ],
    "gpu_processes": ["ts", "gpu", "pid", "name", "mem_used_bytes"],
    "server": [
        "ts",
        "queue_depth",
        "running",
        "batch_size",
        "kv_cache_usage_pct",
        "throughput_rps",
        "tokens_per_s",
        "prompt_tokens_per_s",
        "preemptions_per_s",
        "swapped",
        "prefix_cache_hit_pct",
        "queue_ms",
        "prefill_ms",
        "compute_ms",
        "decode_ms",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "process_start",
        "counter_resets",
    ],
}

# NVML's clock throttle (event) reason bits, for a numeric ``throttle_reasons`` column.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks",
}
# The reasons that hold clocks down under load (idle, sync boost and clock settings do not).
SLOWING_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)

# A request's status succeeds if it says so in words or is an HTTP code below 400 (lower-case, stripped).
SUCCESS_WORDS = ("ok", "success", "succeeded", "completed", "done")
SUCCESS_CODE = r"[123]\d\d(?:\.0)?"

EVENTS_TABLE = "events"
MANIFEST_FILE = "manifest.yaml"


def is_numeric_column(table: str, column: str) -> bool:
    spec = TABLES.get(table) or TRACE_TABLES.get(table) or SUMMARY_TABLES.get(table)
    if spec is not None and column in spec.numeric:
        return True
    return column != "ts" and column.endswith(UNIT_SUFFIXES)


def split_table_name(file_name: str) -> tuple[str, str] | None:
    """``gpu.csv.gz`` -> ``("gpu", ".csv.gz")``; None when the suffix is not a table format."""
    for suffix in sorted(TABLE_SUFFIXES, key=len, reverse=True):
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)], suffix
    return None


def stage_columns(requests: pd.DataFrame) -> dict[str, str]:
    """``stage_<name>_ms`` columns by stage name."""
    return {
        column[len("stage_") : -len("_ms")]: column
        for column in requests.columns
        if column.startswith("stage_") and column.endswith("_ms") and len(column) > 9
    }
