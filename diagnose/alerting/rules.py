"""Prometheus alerting rules for a baseline's thresholds: the PromQL from the engines' own metric names.

Each figure's expression reads the names the engine publishes (the same name
map the recorder and ``diagnose pull`` use, :mod:`diagnose.engines.metrics`),
``by (instance)``, so that each alert names the host ``diagnose serve`` pulls.
Latency percentiles come from the engine's histograms
(``histogram_quantile`` of ``rate(..._bucket[W])``), with each of an engine's
names for the figure joined by ``or`` (vLLM renamed its per-token histogram);
throughput from its completed-requests counter; GPU memory from
dcgm-exporter's ``DCGM_FI_DEV_FB_USED`` (MiB). Written as a rules file that
``promtool check rules`` accepts, and as the Prometheus Operator's
``PrometheusRule``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from diagnose.alerting.baseline import Figure, Threshold, shown
from diagnose.engines.metrics import EngineMap, engine_maps
from diagnose.errors import InputError

GROUP = "diagnose-baseline"

_MATCHER = re.compile(r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')
_HISTOGRAM_COLUMN = {Figure.P99_LATENCY: "e2e_ms", Figure.TTFT_P99: "ttft_ms", Figure.TPOT_P99: "tpot_ms"}
_NAMES = {
    Figure.P99_LATENCY: ("DiagnoseP99LatencyHigh", "P99 latency"),
    Figure.TTFT_P99: ("DiagnoseTTFTHigh", "P99 time to first token"),
    Figure.TPOT_P99: ("DiagnoseTPOTHigh", "P99 time per output token"),
    Figure.THROUGHPUT: ("DiagnoseThroughputLow", "throughput"),
    Figure.GPU_MEMORY_PEAK: ("DiagnoseGPUMemoryHigh", "GPU memory peak"),
}


@dataclass(frozen=True)
class RuleSet:
    rules: list[dict]  # Prometheus alerting rules, in the file's order
    skipped: list[str]  # figures with a baseline but no expression, and why


def check_selector(text: str) -> str:
    """``job="vllm",namespace=~"prod-.*"``: label matchers added to every series the rules read."""
    if text and not all(_MATCHER.fullmatch(part) for part in _split(text)):
        raise InputError(
            f'--selector: expected label matchers such as job="vllm",namespace=~"prod-.*", got {text!r}'
        )
    return text.strip()


def alerting_rules(
    thresholds: list[Threshold],
    engine: str,
    window_s: float,
    selector: str = "",
    baseline: str = "",
    report_url: str | None = None,
) -> RuleSet:
    mapping = engine_maps().get(engine)
    if mapping is None:
        raise InputError(f"--engine {engine!r}: expected one of {', '.join(sorted(engine_maps()))}")
    window = _span(window_s)
    rules, skipped = [], []
    for threshold in thresholds:
        expression = _expression(threshold.figure, mapping, window, selector)
        if expression is None:
            skipped.append(f"{threshold.figure}: {engine} publishes no metric for it")
            continue
        rules.append(_rule(threshold, expression, engine, window, baseline, report_url))
    return RuleSet(rules, skipped)


def rules_file(rules: RuleSet, every_s: float) -> str:
    """The rules as a Prometheus rules file (``rule_files:``)."""
    return _yaml({"groups": [_group(rules, every_s)]})


def prometheus_rule(rules: RuleSet, every_s: float, name: str = GROUP, namespace: str | None = None) -> str:
    """The rules as the Prometheus Operator's ``PrometheusRule`` resource."""
    metadata: dict = {"name": name, "labels": {"app.kubernetes.io/name": "diagnose", "role": "alert-rules"}}
    if namespace:
        metadata["namespace"] = namespace
    resource = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": {"groups": [_group(rules, every_s)]},
    }
    return _yaml(resource)


def _group(rules: RuleSet, every_s: float) -> dict:
    return {"name": GROUP, "interval": _span(every_s), "rules": rules.rules}


def bucket_series(figure: Figure, engine: str) -> list[str]:
    """The ``_bucket`` series of the engine's histograms for a latency figure, newest name first."""
    mapping = engine_maps().get(engine)
    if mapping is None or figure not in _HISTOGRAM_COLUMN:
        return []
    return [
        ratio.numerator.removesuffix("_sum") + "_bucket"
        for column, ratio in mapping.means
        if column == _HISTOGRAM_COLUMN[figure] and ratio.numerator.endswith("_sum")
    ]


def _expression(figure: Figure, mapping: EngineMap, window: str, selector: str) -> str | None:
    sel = "{" + selector + "}" if selector else ""
    if figure in _HISTOGRAM_COLUMN:
        parts = []
        for column, ratio in mapping.means:
            if column != _HISTOGRAM_COLUMN[figure] or not ratio.numerator.endswith("_sum"):
                continue
            buckets = ratio.numerator.removesuffix("_sum") + "_bucket"
            rate = f"rate({buckets}{sel}[{window}])"
            parts.append(f"{ratio.scale:g} * histogram_quantile(0.99, sum by (instance, le) ({rate}))")
        return " or ".join(f"({part})" for part in parts) if len(parts) > 1 else (parts[0] if parts else None)
    if figure is Figure.THROUGHPUT:
        counter = mapping.counter("throughput_rps")
        return f"sum by (instance) (rate({counter}{sel}[{window}]))" if counter else None
    return f"1048576 * max by (instance) (max_over_time(DCGM_FI_DEV_FB_USED{sel}[{window}]))"


def _rule(
    threshold: Threshold, expression: str, engine: str, window: str, baseline: str, report_url: str | None
) -> dict:
    alert, title = _NAMES[threshold.figure]
    sign = ">" if threshold.above else "<"
    limit = shown(threshold.value, threshold.unit)
    value = (
        "{{ $value | humanize1024 }}B"
        if threshold.unit == "bytes"
        else "{{ $value | humanize }} " + threshold.unit
    )
    word = "above" if threshold.above else "below"
    annotations = {
        "summary": f"{title} on {{{{ $labels.instance }}}} is {value}, {word} its baseline's range ({limit})",
        "description": (
            f"{title} over {window} windows, from {engine}'s metrics. Threshold {limit}: {threshold.reason}, "
            f"from {threshold.source} of the baseline {baseline}; for: the baseline's longest excursion "
            "beyond two spreads, so that what the baseline did anyway does not page. Written by diagnose "
            "alerts."
        ),
    }
    if report_url:
        base = report_url.rstrip("/")
        annotations["diagnose_report"] = (
            f"{base}/latest?alert={alert}&instance={{{{ $labels.instance | urlquery }}}}"
        )
    return {
        "alert": alert,
        "expr": f"({expression}) {sign} {threshold.value:.6g}",
        "for": _span(threshold.for_s),
        "labels": {"severity": "warning", "diagnose_figure": str(threshold.figure)},
        "annotations": annotations,
    }


def _span(seconds: float) -> str:
    """Prometheus's duration: ``5m``, ``90s``, ``1h``."""
    seconds = int(round(seconds))
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _split(text: str) -> list[str]:
    """Matchers split at the commas outside quotes."""
    parts, current, quoted, escaped = [], "", False, False
    for char in text:
        if char == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    return [*parts, current]


def _yaml(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True)
