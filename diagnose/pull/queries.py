"""Which PromQL gives which dump column: node_exporter, dcgm-exporter, process-exporter, the engines.

Each column is one query over the series of one host (``{sel}``: the
``instance`` label's host part, whatever the exporter's port). Counters are
turned into per-second rates by Prometheus itself: ``irate`` over three scrape
intervals when the step is the scrape interval (the rate between the last two
scrapes, as ``diagnose record`` computes it), ``rate`` over the step plus one
scrape when the step is coarser. The serving engines' queries come from the
same name map the recorder uses (:mod:`diagnose.engines.metrics`); latency
histograms also give per-step percentiles from their own buckets
(``histogram_quantile``).
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.engines.metrics import EngineMap, engine_maps, gpu_fields

_REGEX_META = set(r".^$*+?()[]{}|\\")


@dataclass(frozen=True)
class Column:
    table: str  # system, gpu, processes or server
    column: str
    query: str  # with {sel}, {rate} and {w} to fill in
    needs: tuple[str, ...]  # the metric names it reads: absent ones skip the column
    source: str  # the exporter, for the manifest


def selector(instance: str) -> str:
    """Every series of a host: ``instance`` is host:port, and each exporter has its own port."""
    escaped = "".join("\\\\" + c if c in _REGEX_META else c for c in instance)
    return f'instance=~"{escaped}(:[0-9]+)?"'


def rate_window(step_s: float, scrape_s: float) -> tuple[str, str]:
    """(function, window) for counters at this step."""
    if step_s <= scrape_s:
        return "irate", f"{max(1, round(3 * scrape_s))}s"
    return "rate", f"{max(1, round(step_s + scrape_s))}s"


def _counter(name: str, filters: str = "") -> str:
    return f"{{rate}}({name}{{{{{filters}{{sel}}}}}}[{{w}}])"


_NODE = "node_exporter"
SYSTEM = [
    Column(
        "system",
        "cpu_pct",
        "100 * (1 - avg(" + _counter("node_cpu_seconds_total", 'mode="idle",') + "))",
        ("node_cpu_seconds_total",),
        _NODE,
    ),
    Column(
        "system",
        "cpu_count",
        'count(node_cpu_seconds_total{{mode="idle",{sel}}})',
        ("node_cpu_seconds_total",),
        _NODE,
    ),
    Column("system", "load1", "max(node_load1{{{sel}}})", ("node_load1",), _NODE),
    Column(
        "system",
        "mem_used_bytes",
        "max(node_memory_MemTotal_bytes{{{sel}}} - node_memory_MemAvailable_bytes{{{sel}}})",
        ("node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes"),
        _NODE,
    ),
    Column(
        "system",
        "mem_total_bytes",
        "max(node_memory_MemTotal_bytes{{{sel}}})",
        ("node_memory_MemTotal_bytes",),
        _NODE,
    ),
    Column(
        "system",
        "swap_used_bytes",
        "max(node_memory_SwapTotal_bytes{{{sel}}} - node_memory_SwapFree_bytes{{{sel}}})",
        ("node_memory_SwapTotal_bytes", "node_memory_SwapFree_bytes"),
        _NODE,
    ),
    # pswpin/pswpout count pages; 4 KiB pages, as on x86-64 and most arm64 kernels
    Column(
        "system",
        "swap_in_per_s",
        "4096 * sum(" + _counter("node_vmstat_pswpin") + ")",
        ("node_vmstat_pswpin",),
        _NODE,
    ),
    Column(
        "system",
        "swap_out_per_s",
        "4096 * sum(" + _counter("node_vmstat_pswpout") + ")",
        ("node_vmstat_pswpout",),
        _NODE,
    ),
    Column(
        "system",
        "disk_read_bytes_per_s",
        "sum(" + _counter("node_disk_read_bytes_total") + ")",
        ("node_disk_read_bytes_total",),
        _NODE,
    ),
    Column(
        "system",
        "disk_write_bytes_per_s",
        "sum(" + _counter("node_disk_written_bytes_total") + ")",
        ("node_disk_written_bytes_total",),
        _NODE,
    ),
    Column(
        "system",
        "net_rx_bytes_per_s",
        "sum(" + _counter("node_network_receive_bytes_total", 'device!="lo",') + ")",
        ("node_network_receive_bytes_total",),
        _NODE,
    ),
    Column(
        "system",
        "net_tx_bytes_per_s",
        "sum(" + _counter("node_network_transmit_bytes_total", 'device!="lo",') + ")",
        ("node_network_transmit_bytes_total",),
        _NODE,
    ),
    Column("system", "procs_running", "max(node_procs_running{{{sel}}})", ("node_procs_running",), _NODE),
    Column(
        "system",
        "ctx_switches_per_s",
        "sum(" + _counter("node_context_switches_total") + ")",
        ("node_context_switches_total",),
        _NODE,
    ),
    Column(
        "system",
        "cpu_system_pct",
        "100 * avg(" + _counter("node_cpu_seconds_total", 'mode="system",') + ")",
        ("node_cpu_seconds_total",),
        _NODE,
    ),
]

_DCGM = "dcgm-exporter"
_MIB = 1024 * 1024


def _per_gpu(expression: str) -> str:
    return f"max by (gpu) ({expression})"


def _catalogued_gpu() -> list[Column]:
    """dcgm-exporter's per-GPU gauges as the metric catalogue maps them (metrics/dcgm-exporter.yaml,
    ``gpu_column``), in its order: of two fields for one column, the first the store has is pulled."""
    return [
        Column("gpu", column, _per_gpu(_scaled(name, scale)), (name,), _DCGM)
        for name, (column, scale) in gpu_fields(_DCGM).items()
    ]


def _scaled(name: str, scale: float) -> str:
    selected = f"{name}{{{{{{sel}}}}}}"
    return selected if scale == 1 else f"{format(scale, '.17g')} * {selected}"


# Beyond the catalogue's fields: the card's total from used + free, where DCGM_FI_DEV_FB_TOTAL (which
# the shipped counters files leave out) is not exported.
GPU = [
    *_catalogued_gpu(),
    Column(
        "gpu",
        "mem_total_bytes",
        _per_gpu(f"{_MIB} * (DCGM_FI_DEV_FB_USED{{{{{{sel}}}}}} + DCGM_FI_DEV_FB_FREE{{{{{{sel}}}}}})"),
        ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"),
        _DCGM,
    ),
]
_PROCESS_EXPORTER = "process-exporter"
_GROUP_CPU = "namedprocess_namegroup_cpu_seconds_total"
_THREAD_CPU = "namedprocess_namegroup_thread_cpu_seconds_total"
_THREAD_COUNT = "namedprocess_namegroup_thread_count"
_SWITCHES = "namedprocess_namegroup_context_switches_total"


def _per_group(expression: str) -> str:
    return f"max by (groupname) ({expression})"


# process-exporter's groups: several processes summed under a name, no pid (docs/dump-format.md).
PROCESSES = [
    Column(
        "processes",
        "cpu_pct",
        "100 * sum by (groupname) (" + _counter(_GROUP_CPU) + ")",
        (_GROUP_CPU,),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "rss_bytes",
        _per_group('namedprocess_namegroup_memory_bytes{{memtype="resident",{sel}}}'),
        ("namedprocess_namegroup_memory_bytes",),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "num_threads",
        _per_group("namedprocess_namegroup_num_threads{{{sel}}}"),
        ("namedprocess_namegroup_num_threads",),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "num_procs",
        _per_group("namedprocess_namegroup_num_procs{{{sel}}}"),
        ("namedprocess_namegroup_num_procs",),
        _PROCESS_EXPORTER,
    ),
    # The busiest thread name's CPU over its thread count: process-exporter sums the threads that share a
    # name, so this is their mean, a lower bound on the busiest one and exact for a name of one thread.
    Column(
        "processes",
        "max_thread_cpu_pct",
        "100 * max by (groupname) (sum by (groupname, threadname) ("
        + _counter(_THREAD_CPU)
        + ") / max by (groupname, threadname) ("
        + _THREAD_COUNT
        + "{{{sel}}}))",
        (_THREAD_CPU, _THREAD_COUNT),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "ctx_switches_voluntary_per_s",
        "sum by (groupname) (" + _counter(_SWITCHES, 'ctxswitchtype="voluntary",') + ")",
        (_SWITCHES,),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "ctx_switches_involuntary_per_s",
        "sum by (groupname) (" + _counter(_SWITCHES, 'ctxswitchtype="nonvoluntary",') + ")",
        (_SWITCHES,),
        _PROCESS_EXPORTER,
    ),
    Column(
        "processes",
        "minor_faults_per_s",
        "sum by (groupname) (" + _counter("namedprocess_namegroup_minor_page_faults_total") + ")",
        ("namedprocess_namegroup_minor_page_faults_total",),
        _PROCESS_EXPORTER,
    ),
]

XID_QUERY = _per_gpu("DCGM_FI_DEV_XID_ERRORS{{{sel}}}")
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"


def engine_columns(engine: str, names: set[str]) -> list[Column]:
    """The server table's queries for an engine, from the recorder's own name map, for the names present."""
    mapping: EngineMap = engine_maps()[engine]
    source = f"{engine} /metrics"
    columns: list[Column] = []
    for column, present, scale in mapping.gauges:
        if present in names and column not in {c.column for c in columns}:
            columns.append(
                Column("server", column, f"{scale:g} * sum({present}{{{{{{sel}}}}}})", (present,), source)
            )
    # The engine's restarts where its process states no start time (pull.py reads that one as events):
    # a counter goes back only when the process counting restarts.
    counters = [c if c in names else c.removesuffix("_total") for _, c in mapping.rates]
    counted = next((c for c in counters if c in names), None)
    if counted is not None:
        query = f"sum(resets({counted}{{{{{{sel}}}}}}[{{w}}]))"
        columns.append(Column("server", "counter_resets", query, (counted,), source))
    taken = {c.column for c in columns}
    for column, counter in mapping.rates:
        name = counter if counter in names else counter.removesuffix("_total")  # older exporters' counters
        if column not in taken and name in names:
            columns.append(Column("server", column, "sum(" + _counter(name) + ")", (name,), source))
            taken.add(column)
    for column, ratio in mapping.means:
        numerator, denominator = _present(ratio.numerator, names), _present(ratio.denominator, names)
        if column in taken or not (numerator and denominator):
            continue
        query = f"{ratio.scale:g} * sum({_counter(numerator)}) / sum({_counter(denominator)})"
        columns.append(Column("server", column, query, (numerator, denominator), source))
        taken.add(column)
        histogram = numerator.removesuffix("_sum")
        if column.endswith("_ms") and f"{histogram}_bucket" in names:
            for q in (0.5, 0.99):
                buckets = _counter(f"{histogram}_bucket")
                quantile = f"{ratio.scale:g} * histogram_quantile({q:g}, sum by (le) ({buckets}))"
                name = f"{column.removesuffix('_ms')}_p{int(q * 100)}_ms"
                columns.append(Column("server", name, quantile, (f"{histogram}_bucket",), source))
    return columns


def _present(name: str, names: set[str]) -> str | None:
    if name in names:
        return name
    bare = name.removesuffix("_total")
    return bare if bare in names else None


def fill(column: Column, sel: str, rate: str, window: str) -> str:
    return column.query.format(sel=sel, rate=rate, w=window)
