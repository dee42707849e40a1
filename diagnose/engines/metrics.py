"""What serving engines expose on /metrics, and how it maps to the dump's server table.

One name map per engine (vLLM, Triton, TGI, SGLang, MindIE): gauges are
copied; counters become rates, and histograms per-window means, from the
difference between two scrapes. Samples are summed over their label sets
(several models, GPUs or engines served by one process add up). Both the
recorder's scraper and the importer of scrape files use this one map;
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    gauges: dict[str, tuple[tuple[str, ...], float]]  # column -> (sample names, first found wins; scale)
    rates: dict[str, str] = field(default_factory=dict)  # column -> counter sample name
    ratios: dict[str, _Ratio] = field(default_factory=dict)
    # Where an engine's versions expose the same mean under another name: tried when the first is absent.
    fallbacks: dict[str, _Ratio] = field(default_factory=dict)


def _summary(name: str) -> _Ratio:
    """A summary in microseconds: its mean in milliseconds."""
    return _Ratio(f"{name}_sum", f"{name}_count", 1e-3)


def _histogram(name: str, scale: float = 1000.0) -> _Ratio:
    return _Ratio(f"{name}_sum", f"{name}_count", scale)


# Triton's TensorRT-LLM backend names what a sample counts by a label: request_type="active",
# "scheduled" (and in newer backends "waiting"), kv_cache_block_type="max", "used" (and "fraction")
_TRT_REQUESTS = "nv_trt_llm_request_metrics"
_TRT_BLOCKS = "nv_trt_llm_kv_cache_block_metrics"
_BY_LABEL = {_TRT_REQUESTS: "request_type", _TRT_BLOCKS: "kv_cache_block_type"}

ENGINES: dict[str, EngineMap] = {
    "vllm": EngineMap(
        gauges={
            "queue_depth": (("vllm:num_requests_waiting",), 1.0),
            "running": (("vllm:num_requests_running",), 1.0),
            "kv_cache_usage_pct": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), 100.0),
            "swapped": (("vllm:num_requests_swapped",), 1.0),
        },
        rates={
            "throughput_rps": "vllm:request_success_total",
            "tokens_per_s": "vllm:generation_tokens_total",
            "prompt_tokens_per_s": "vllm:prompt_tokens_total",
            "preemptions_per_s": "vllm:num_preemptions_total",
        },
        ratios={
            "queue_ms": _histogram("vllm:request_queue_time_seconds"),
            "prefill_ms": _histogram("vllm:request_prefill_time_seconds"),
            "decode_ms": _histogram("vllm:request_decode_time_seconds"),
            "ttft_ms": _histogram("vllm:time_to_first_token_seconds"),
            "tpot_ms": _histogram("vllm:time_per_output_token_seconds"),
            "e2e_ms": _histogram("vllm:e2e_request_latency_seconds"),
        },
        fallbacks={"tpot_ms": _histogram("vllm:inter_token_latency_seconds")},  # its newer name
    ),
    "triton": EngineMap(
        gauges={
            # The TensorRT-LLM backend batches in flight: its own waiting requests are the queue, not
            # Triton's (which hands requests straight to it)
            "queue_depth": ((f"{_TRT_REQUESTS}:waiting", "nv_inference_pending_request_count"), 1.0),
            "running": ((f"{_TRT_REQUESTS}:scheduled",), 1.0),
            "kv_cache_usage_pct": ((f"{_TRT_BLOCKS}:fraction",), 100.0),
        },
        rates={"throughput_rps": "nv_inference_request_success_total"},
        ratios={
            "batch_size": _Ratio("nv_inference_count_total", "nv_inference_exec_count_total", 1.0),
            "queue_ms": _Ratio(
                "nv_inference_queue_duration_us_total", "nv_inference_request_success_total", 1e-3
            ),
            "compute_ms": _Ratio(
                "nv_inference_compute_infer_duration_us_total", "nv_inference_request_success_total", 1e-3
            ),
            "e2e_ms": _Ratio(
                "nv_inference_request_duration_us_total", "nv_inference_request_success_total", 1e-3
            ),
        },
        # Triton with --metrics-config summary_latencies=true: summaries beside or instead of the counters
        fallbacks={
            "queue_ms": _summary("nv_inference_queue_summary_us"),
            "compute_ms": _summary("nv_inference_compute_infer_summary_us"),
            "e2e_ms": _summary("nv_inference_request_summary_us"),
        },
    ),
    # TGI batches continuously: its current batch is the requests running, as vLLM's running gauge is;
    # a request's generated-token histogram sums to the tokens generated.
    "tgi": EngineMap(
        gauges={
            "queue_depth": (("tgi_queue_size",), 1.0),
            "batch_size": (("tgi_batch_current_size",), 1.0),
            "running": (("tgi_batch_current_size",), 1.0),
        },
        rates={
            "throughput_rps": "tgi_request_success_total",
            "tokens_per_s": "tgi_request_generated_tokens_sum",
        },
        ratios={
            "queue_ms": _histogram("tgi_request_queue_duration"),
            "compute_ms": _histogram("tgi_request_inference_duration"),
            "tpot_ms": _histogram("tgi_request_mean_time_per_token_duration"),
            "e2e_ms": _histogram("tgi_request_duration"),
        },
    ),
    # SGLang (--enable-metrics): docs.sglang.io, references/production_metrics
    "sglang": EngineMap(
        gauges={
            "queue_depth": (("sglang:num_queue_reqs",), 1.0),
            "running": (("sglang:num_running_reqs",), 1.0),
            "kv_cache_usage_pct": (("sglang:token_usage",), 100.0),
            "tokens_per_s": (("sglang:gen_throughput",), 1.0),
        },
        rates={
            "throughput_rps": "sglang:num_requests_total",
            "prompt_tokens_per_s": "sglang:prompt_tokens_total",
        },
        ratios={
            "ttft_ms": _histogram("sglang:time_to_first_token_seconds"),
            "tpot_ms": _histogram("sglang:inter_token_latency_seconds"),
            "e2e_ms": _histogram("sglang:e2e_request_latency_seconds"),
        },
        fallbacks={"tpot_ms": _histogram("sglang:time_per_output_token_seconds")},  # its older name
    ),
    # Huawei MindIE's vLLM-like names, without a prefix
    "mindie": EngineMap(
        gauges={
            "queue_depth": (("num_requests_waiting",), 1.0),
            "running": (("num_requests_running",), 1.0),
        },
        rates={"throughput_rps": "request_success_total", "tokens_per_s": "generation_tokens_total"},
    ),
    # Ray Serve's own metrics (an LLM served through ray.serve.llm also exports vLLM's, read as vLLM's)
    "ray-serve": EngineMap(
        gauges={
            "queue_depth": (("ray_serve_deployment_queued_queries",), 1.0),
            "running": (
                ("ray_serve_replica_processing_queries", "ray_serve_num_ongoing_requests_at_replicas"),
                1.0,
            ),
        },
        rates={"throughput_rps": "ray_serve_deployment_request_counter_total"},
        ratios={
            "compute_ms": _histogram("ray_serve_deployment_processing_latency_ms", 1.0),
            "e2e_ms": _histogram("ray_serve_http_request_latency_ms", 1.0),
        },
    ),
    # KServe's Python model servers (sklearn, xgboost, huggingface, custom): a histogram per stage
    "kserve": EngineMap(
        gauges={},
        rates={"throughput_rps": "request_predict_seconds_count"},
        ratios={"compute_ms": _histogram("request_predict_seconds")},
    ),
}


PROCESS_START = "process_start_time_seconds"


def _went_back(mapping: EngineMap, samples: dict[str, float], before: dict[str, float]) -> bool:
    """Did any counter the map reads go back since the scrape before: the engine restarted between."""
    names = [*mapping.rates.values()]
    for ratio in [*mapping.ratios.values(), *mapping.fallbacks.values()]:
        names += [ratio.numerator, ratio.denominator]
    return any(n in samples and n in before and samples[n] < before[n] for n in names)


def custom_map(metric_to_column: dict[str, str]) -> EngineMap:
    """The map of a service no engine map knows, from ``--metrics-map`` (metric name -> server column).

    A metric's type is read from the page, not asked for: a gauge is copied, a
    counter (``NAME_total``) becomes a rate, a histogram or summary (``NAME_sum``
    and ``NAME_count``) its per-interval mean; seconds become milliseconds for a
    ``_ms`` column.
    """
    gauges: dict[str, tuple[tuple[str, ...], float]] = {}
    rates: dict[str, str] = {}
    ratios: dict[str, _Ratio] = {}
    for metric, column in metric_to_column.items():
        base = metric.removesuffix("_total")
        scale = 1000.0 if column.endswith("_ms") and base.endswith("_seconds") else 1.0
        if metric == base:
            gauges[column] = ((metric,), scale)
            ratios[column] = _Ratio(f"{metric}_sum", f"{metric}_count", scale)
        rates[column] = f"{base}_total"
    return EngineMap(gauges, rates, ratios)


_PREFIXES = {
    "vllm:": "vllm",
    "nv_inference_": "triton",
    "tgi_": "tgi",
    "sglang:": "sglang",
    "ray_serve_": "ray-serve",
}
# Engines whose metrics carry no prefix are known by names only they use together.
_UNPREFIXED = {
    "mindie": ("request_success_total", "num_requests_running"),
    "kserve": ("request_predict_seconds_count",),
}
# An engine's metrics under another spelling, read as its own: Ray re-exports a served engine's metrics
# with "ray_" before them and "_" for ":" (ray.serve.llm's vLLM), as do OpenTelemetry's exporters
# and some SGLang releases.
_SPELLINGS = (("ray_vllm_", "vllm:"), ("ray_sglang_", "sglang:"), ("vllm_", "vllm:"), ("sglang_", "sglang:"))


_SPELLED_OTHERWISE = tuple(written for written, _ in _SPELLINGS)


def _canonical(name: str) -> str:
    if not name.startswith(_SPELLED_OTHERWISE):  # nearly every sample of every scrape: one test
        return name
    for written, canonical in _SPELLINGS:
        if name.startswith(written):
            return canonical + name[len(written) :]
    return name


def parse_samples(text: str) -> dict[str, float]:
    """Every sample's value, summed over label sets, by sample name (counters end in _total)."""
    return sum_samples(parse_families(text))


def parse_families(text: str) -> Iterable[Metric]:
    """The metric families of a Prometheus text page, as prometheus_client's parser reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    return text_string_to_metric_families(text)


def sum_samples(families: Iterable[Metric]) -> dict[str, float]:
    """:func:`parse_samples` of families already parsed."""
    totals: dict[str, float] = {}
    for family in families:
        label = _BY_LABEL.get(family.name)
        for sample in family.samples:
            name = sample.name
            if family.type == "counter" and not name.endswith(("_total", "_created")):
                name += "_total"  # older exporters (Triton) leave the suffix off
            if label is not None and label in sample.labels:
                name = f"{name}:{sample.labels[label]}"
            name = _canonical(name)
            totals[name] = totals.get(name, 0.0) + float(sample.value)
    _derive_tensorrt_llm(totals)
    return totals


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
    for prefix, engine in _PREFIXES.items():
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
    for column, (names, scale) in mapping.gauges.items():
        value = next((samples[n] for n in names if n in samples), None)
        row[column] = None if value is None else value * scale
    if PROCESS_START in samples:
        row["process_start"] = samples[PROCESS_START]
    if before is None and lifetime:
        before = dict.fromkeys(samples, 0.0)
    elif before is None:
        return row
    if _went_back(mapping, samples, before):
        row["counter_resets"] = 1
        return row
    for column, name in mapping.rates.items():
        if row.get(column) is not None:
            continue
        if name in samples and name in before and elapsed > 0 and not lifetime:
            row[column] = max(0.0, samples[name] - before[name]) / elapsed
    for column, ratio in [*mapping.ratios.items(), *mapping.fallbacks.items()]:
        if row.get(column) is not None:
            continue
        if not all(n in samples and n in before for n in (ratio.numerator, ratio.denominator)):
            continue
        count = samples[ratio.denominator] - before[ratio.denominator]
        if count > 0:
            row[column] = (samples[ratio.numerator] - before[ratio.numerator]) / count * ratio.scale
    return row
