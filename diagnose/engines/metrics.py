"""What serving engines expose on /metrics, and how it maps to the dump's server table.

The names, types, units and labels come from the metric catalogue (``metrics/``, one file a writer,
read from its source: :mod:`diagnose.engines.catalogue`); this module turns them into one name map
per engine. Gauges are copied; counters become rates, and histograms per-window means, from the
difference between two scrapes. Samples are added up over their label sets (several models, GPUs,
data-parallel engines served by one process), except a share (a cache's usage), which is the
largest of them. Both the recorder's scraper and the importer of scrape files use this one map;
docs/collectors.md shows it as a table.

Two columns say when the engine restarted, whatever the engine: its process's
start time (``process_start_time_seconds``, which Python's prometheus_client
and most exporters publish), and ``counter_resets``, set on a scrape whose
counters went back since the one before. A Prometheus counter only goes back
when the process that counts restarts; the rates and means across such a pair
of scrapes are left empty rather than read from counters of two processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from diagnose.engines.catalogue import SHARES, MetricDef, MetricType, builtin_metrics

if TYPE_CHECKING:  # prometheus_client is imported where a page is parsed: not on every start
    from prometheus_client.metrics_core import Metric


@dataclass(frozen=True)
class _Ratio:
    """A per-window mean: Δnumerator / Δdenominator x scale."""

    numerator: str
    denominator: str
    scale: float


@dataclass(frozen=True)
class EngineMap:
    """Which samples feed which server column, each in order of preference: the first a scrape has wins
    (an engine's newer name before its older one)."""

    gauges: tuple[tuple[str, str, float], ...] = ()  # (column, sample name, scale)
    rates: tuple[tuple[str, str], ...] = ()  # (column, counter sample name): per second
    means: tuple[tuple[str, _Ratio], ...] = ()  # (column, ratio): per window

    def counter_names(self) -> set[str]:
        """The sample names of the counters the map reads (rates, and the means' sums and counts)."""
        names = {name for _, name in self.rates}
        return names | {n for _, ratio in self.means for n in (ratio.numerator, ratio.denominator)}

    def sample_names(self) -> set[str]:
        """Every sample name the map reads."""
        return {name for _, name, _ in self.gauges} | self.counter_names()

    def counter(self, column: str) -> str | None:
        """The counter a rate column is read from, where one is."""
        return next((name for feeds, name in self.rates if feeds == column), None)


def _total(name: str) -> str:
    return name if name.endswith("_total") else f"{name}_total"


def _sample(metric: MetricDef) -> str:
    """The name :func:`sum_samples` gives the metric's samples (a label-keyed family's with its value)."""
    return metric.name if metric.label is None else f"{metric.name}:{metric.label[1]}"


def _is_rate(column: str) -> bool:
    return column.endswith(("_per_s", "_rps"))


def _engine_map(metrics: Iterable[MetricDef]) -> EngineMap:
    gauges: list[tuple[str, str, float]] = []
    rates: list[tuple[str, str]] = []
    means: list[tuple[str, _Ratio]] = []
    for metric in metrics:
        for column in metric.columns:
            scale = metric.scale(column)
            if metric.type is MetricType.GAUGE:
                gauges.append((column, _sample(metric), scale))
            elif metric.type is MetricType.COUNTER and metric.per:
                means.append((column, _Ratio(_total(metric.name), _total(metric.per), scale)))
            elif metric.type is MetricType.COUNTER:
                rates.append((column, _total(metric.name)))
            elif _is_rate(column):  # a histogram's observations (requests) or what they add up to (tokens)
                rates.append((column, f"{metric.name}_{'count' if column == 'throughput_rps' else 'sum'}"))
            else:
                means.append((column, _Ratio(f"{metric.name}_sum", f"{metric.name}_count", scale)))
    return EngineMap(tuple(gauges), tuple(rates), tuple(means))


@cache
def engine_maps() -> dict[str, EngineMap]:
    """Each engine's name map, from the catalogue (the files of one engine in their names' order)."""
    by_engine: dict[str, list[MetricDef]] = {}
    for writer in builtin_metrics():
        by_engine.setdefault(writer.engine, []).extend(writer.metrics)
    maps = {engine: _engine_map(metrics) for engine, metrics in by_engine.items()}
    return {engine: mapping for engine, mapping in maps.items() if mapping.sample_names()}


@cache
def gpu_fields(engine: str) -> dict[str, tuple[str, float]]:
    """An exporter's per-GPU gauges (the catalogue's ``gpu_column``): name -> (gpu column, scale), in
    the catalogue's order; of two naming one column, the first a scrape has wins."""
    return {
        metric.name: (metric.gpu_column, metric.scale(metric.gpu_column))
        for writer in builtin_metrics()
        if writer.engine == engine
        for metric in writer.metrics
        if metric.gpu_column
    }


@cache
def gpu_fields_by_lower_name(engine: str) -> dict[str, tuple[str, float]]:
    """:func:`gpu_fields` by lower-cased name: an exporter configured for lower-case names writes them so."""
    return {name.lower(): field for name, field in gpu_fields(engine).items()}


@cache
def _label_keyed() -> dict[str, str]:
    """Families whose samples say by a label what they count (TensorRT-LLM's backend): family -> label."""
    return {m.name: m.label[0] for w in builtin_metrics() for m in w.metrics if m.label is not None}


@cache
def _repeated() -> dict[str, frozenset[str]]:
    """Families whose series repeat one figure across some labels (SGLang's ranks): family -> labels."""
    return {
        name: w.repeated_by
        for w in builtin_metrics()
        if w.repeated_by
        for m in w.metrics
        for name in (m.name, m.name.removesuffix("_total"))
    }


@cache
def _counters() -> frozenset[str]:
    """The counters' names as exposed without ``_total`` (Triton's C++ client, a page with no TYPE line)."""
    names = (m.name for w in builtin_metrics() for m in w.metrics if m.type is MetricType.COUNTER)
    return frozenset(name.removesuffix("_total") for name in names)


@cache
def _shares() -> frozenset[str]:
    """The sample names of shares (a ratio or percent gauge): the largest label set's, not their sum."""
    return frozenset(
        _sample(m)
        for w in builtin_metrics()
        for m in w.metrics
        if m.type is MetricType.GAUGE and m.unit in SHARES
    )


PROCESS_START = "process_start_time_seconds"


def _went_back(mapping: EngineMap, samples: dict[str, float], before: dict[str, float]) -> bool:
    """Did any counter the map reads go back since the scrape before: the engine restarted between."""
    return any(n in samples and n in before and samples[n] < before[n] for n in mapping.counter_names())


def custom_map(metric_to_column: dict[str, str]) -> EngineMap:
    """The map of a service no engine map knows, from ``--metrics-map`` (metric name -> server column).

    A metric's type is read from the page, not asked for: a gauge is copied, a
    counter (``NAME_total``) becomes a rate, a histogram or summary (``NAME_sum``
    and ``NAME_count``) its per-interval mean; seconds become milliseconds for a
    ``_ms`` column.
    """
    gauges: list[tuple[str, str, float]] = []
    rates: list[tuple[str, str]] = []
    means: list[tuple[str, _Ratio]] = []
    for metric, column in metric_to_column.items():
        base = metric.removesuffix("_total")
        scale = 1000.0 if column.endswith("_ms") and base.endswith("_seconds") else 1.0
        if metric == base:
            gauges.append((column, metric, scale))
            means.append((column, _Ratio(f"{metric}_sum", f"{metric}_count", scale)))
        rates.append((column, f"{base}_total"))
    return EngineMap(tuple(gauges), tuple(rates), tuple(means))


# Which engine a scrape is, by its names' prefixes, the engine served inside another first: Triton's
# vLLM backend and ray.serve.llm publish vLLM's own metrics beside their own, and vLLM's say more.
_PRECEDENCE = ("vllm", "sglang", "llama-cpp", "tgi", "triton", "tensorrt-llm", "ray-serve")
# Engines whose metrics carry no prefix are known by names only they use together.
_UNPREFIXED = {
    "mindie": ("request_success_total", "num_requests_running"),
    "kserve": ("request_predict_seconds_count",),
}


@cache
def _prefixes() -> tuple[tuple[str, str], ...]:
    """(prefix, engine), in :data:`_PRECEDENCE`'s order."""
    found = {w.prefix: w.engine for w in builtin_metrics() if w.prefix and w.engine in engine_maps()}
    rank = {engine: n for n, engine in enumerate(_PRECEDENCE)}
    return tuple(sorted(found.items(), key=lambda item: rank.get(item[1], len(rank))))


@cache
def _spellings() -> tuple[tuple[str, str], ...]:
    """An engine's metrics under another spelling, read as its own: Ray re-exports a served engine's
    metrics with "ray_" before them and "_" for ":" (ray.serve.llm's vLLM), as do OpenTelemetry's
    exporters and some SGLang releases (and its Rust sidecar)."""
    colon = [prefix for prefix, _ in _prefixes() if prefix.endswith(":")]
    ray = [(f"ray_{prefix[:-1]}_", prefix) for prefix in colon]
    return tuple(ray + [(f"{prefix[:-1]}_", prefix) for prefix in colon])


def _canonical(name: str, spellings: tuple[tuple[str, str], ...]) -> str:
    for written, canonical in spellings:
        if name.startswith(written):
            return canonical + name[len(written) :]
    return name


def parse_samples(text: str) -> dict[str, float]:
    """Every sample's value, added up over label sets, by sample name (counters end in _total)."""
    return sum_samples(parse_families(text))


def parse_families(text: str) -> Iterable[Metric]:
    """The metric families of a Prometheus text page, as prometheus_client's parser reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    return text_string_to_metric_families(text)


def sum_samples(families: Iterable[Metric]) -> dict[str, float]:
    """:func:`parse_samples` of families already parsed: each name's samples summed over their label
    sets, a share's the largest of them."""
    label_keyed, shares, spellings, counters = _label_keyed(), _shares(), _spellings(), _counters()
    repeats = _repeated()
    spelled = tuple(written for written, _ in spellings)
    totals: dict[str, float] = {}
    once: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}  # a repeated figure, by its other labels
    for family in families:
        label = label_keyed.get(family.name)
        canonical = _canonical(family.name, spellings) if family.name.startswith(spelled) else family.name
        # A page with no TYPE line (pasted from mid-family, or trimmed) says no type: the catalogue does
        counter = family.type == "counter" or (family.type == "unknown" and canonical in counters)
        repeated = repeats.get(canonical)
        for sample in family.samples:
            name = sample.name
            if counter and not name.endswith(("_total", "_created")):
                name += "_total"  # older exporters (Triton) leave the suffix off
            if label is not None and label in sample.labels:
                name = f"{name}:{sample.labels[label]}"
            if name.startswith(spelled):  # nearly every sample of every scrape: one test
                name = _canonical(name, spellings)
            value = float(sample.value)
            if repeated:
                key = (name, frozenset((k, v) for k, v in sample.labels.items() if k not in repeated))
                once[key] = max(once.get(key, value), value)
                continue
            _add(totals, name, value, name in shares)
    for (name, _), value in once.items():
        _add(totals, name, value, name in shares)
    _derive_tensorrt_llm(totals)
    return totals


def _add(totals: dict[str, float], name: str, value: float, share: bool) -> None:
    """A label set's value into the host's figure: added, or for a share the largest."""
    if name in totals:
        value = max(totals[name], value) if share else totals[name] + value
    totals[name] = value


_TRT_REQUESTS = "nv_trt_llm_request_metrics"
_TRT_BLOCKS = "nv_trt_llm_kv_cache_block_metrics"


def _derive_tensorrt_llm(totals: dict[str, float]) -> None:
    """What older TensorRT-LLM backends leave for the reader to work out: the requests active but not
    scheduled (waiting) and the used share of the KV blocks."""
    active, scheduled = totals.get(f"{_TRT_REQUESTS}:active"), totals.get(f"{_TRT_REQUESTS}:scheduled")
    if active is not None and scheduled is not None:
        totals.setdefault(f"{_TRT_REQUESTS}:waiting", max(0.0, active - scheduled))
    used, most = totals.get(f"{_TRT_BLOCKS}:used"), totals.get(f"{_TRT_BLOCKS}:max")
    if used is not None and most:
        totals.setdefault(f"{_TRT_BLOCKS}:fraction", used / most)


def detect_engine(samples: dict[str, float]) -> str | None:
    for prefix, engine in _prefixes():
        if any(name.startswith(prefix) for name in samples):
            return engine
    for engine, names in _UNPREFIXED.items():
        if all(name in samples for name in names):
            return engine
    return None


def engine_row(
    mapping: EngineMap,
    ts: float,
    samples: dict[str, float],
    before: dict[str, float] | None = None,
    elapsed: float = 0.0,
    lifetime: bool = False,
) -> dict:
    """A server row: gauges from this scrape; rates and means from the one ``elapsed`` seconds before.

    ``lifetime``: with no earlier scrape, the means are taken over the counters' whole life
    (since the server started), the only window one scrape holds; rates need two scrapes.
    """
    row: dict = {"ts": ts}
    for column, name, scale in mapping.gauges:
        if row.get(column) is None:
            row[column] = samples[name] * scale if name in samples else None
    if PROCESS_START in samples:
        row["process_start"] = samples[PROCESS_START]
    if before is None and lifetime:
        before = dict.fromkeys(samples, 0.0)
    elif before is None:
        return row
    if _went_back(mapping, samples, before):
        row["counter_resets"] = 1
        return row
    for column, name in mapping.rates:
        if row.get(column) is not None:
            continue
        if name in samples and name in before and elapsed > 0 and not lifetime:
            row[column] = max(0.0, samples[name] - before[name]) / elapsed
    for column, ratio in mapping.means:
        if row.get(column) is not None:
            continue
        if not all(n in samples and n in before for n in (ratio.numerator, ratio.denominator)):
            continue
        count = samples[ratio.denominator] - before[ratio.denominator]
        if count > 0:
            row[column] = (samples[ratio.numerator] - before[ratio.numerator]) / count * ratio.scale
    return row
