"""Time series exported from Prometheus or Grafana, routed to the dump's tables by metric name.

A series whose metric is one the engine map or dcgm-exporter map knows (for
example ``vllm:num_requests_waiting`` or ``DCGM_FI_DEV_GPU_UTIL``) becomes
that column of the server or gpu table; any other series is kept in the
``series`` extension table (``ts``, ``series``, ``value``) so nothing read is
lost, and the report counts its rows.
"""

from __future__ import annotations

import csv
import json
import re
from functools import cache
from itertools import chain, islice

import pandas as pd

from diagnose.engines.metrics import engine_maps, gpu_fields_by_lower_name
from diagnose.importers.base import (
    Claim,
    Imported,
    Importer,
    Source,
    Strength,
    claim,
    data_lines,
    filled,
    local_epoch,
)
from diagnose.units import counted


@cache
def _gauges() -> dict[str, tuple[str, float]]:
    """Every engine gauge's server column and scale, by sample name."""
    return {
        name: (column, scale) for mapping in engine_maps().values() for column, name, scale in mapping.gauges
    }


def route(name: str, labels: dict, stamps: list[float], values: list[float]) -> tuple[str, pd.DataFrame]:
    metric = name.split("{")[0].strip()
    gauges = _gauges()
    if metric in gauges:
        column, scale = gauges[metric]
        return "server", pd.DataFrame({"ts": stamps, column: [v * scale for v in values]})
    if (field := gpu_fields_by_lower_name("dcgm-exporter").get(metric.lower())) is not None:
        column, scale = field
        gpu = labels.get("gpu", "0")
        return "gpu", pd.DataFrame(
            {"ts": stamps, "gpu": int(gpu) if str(gpu).isdigit() else 0, column: [v * scale for v in values]}
        )
    label = name if not labels else f"{metric}{{{','.join(f'{k}={v}' for k, v in sorted(labels.items()))}}}"
    return "series", pd.DataFrame({"ts": stamps, "series": label, "value": values})


def _merge(parts: list[tuple[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    tables: dict[str, list[pd.DataFrame]] = {}
    for table, frame in parts:
        tables.setdefault(table, []).append(frame)
    return {
        table: pd.concat(frames, ignore_index=True).sort_values("ts", kind="stable", ignore_index=True)
        for table, frames in tables.items()
    }


class PromQueryImporter(Importer):
    name = "prometheus-api-json"
    description = "Prometheus HTTP API query / query_range responses (matrix or vector JSON)"

    def recognise(self, head: str) -> Claim | None:
        found = (
            '"resultType"' in head or "'resultType'" in head or ('"status"' in head and '"errorType"' in head)
        )
        return claim(Strength.DOCUMENT, filled(head.splitlines())) if found else None  # the whole answer

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        text = source.text
        document = _json_object(text)
        if document is None:
            return _salvage(text, result)
        if document.get("status") == "error":
            result.warnings.append(
                f"the API answered an error: {document.get('errorType')}: {document.get('error')}"
            )
            return result
        parts = []
        for series in (document.get("data") or {}).get("result", []):
            labels = dict(series.get("metric", {}))
            name = labels.pop("__name__", None) or "value"
            points = series.get("values") or ([series["value"]] if "value" in series else [])
            points = [p for p in points if isinstance(p, list | tuple) and len(p) == 2]
            stamps = [_float(t) for t, _ in points]
            values = [_float(v) for _, v in points]
            parts.append(route(name, labels, stamps, values))
        result.tables = _merge(parts)
        return result


_POINT = re.compile(r"""\[\s*(\d{9,}(?:\.\d+)?)\s*,\s*["']([-+0-9.eE]+|NaN)["']\s*\]""")
# A series' labels: its "metric" object, flat (label values hold no braces)
_METRIC = re.compile(r"""["']metric["']\s*:\s*(\{[^{}]*\})""")


def _salvage(text: str, result: Imported) -> Imported:
    """A cut-off response: keep the complete ``[time, "value"]`` points it still holds, each under the
    labels of the series it follows; points after a series whose labels were cut are left out."""
    parts, read = [], 0
    metrics = list(_METRIC.finditer(text))
    for metric, after in zip(metrics, [*metrics[1:], None][: len(metrics)], strict=True):
        points = _POINT.findall(text, metric.end(), after.start() if after else len(text))
        labels = _labels(metric.group(1))
        if not points or labels is None:
            continue
        name = labels.pop("__name__", None) or "value"
        parts.append(route(name, labels, [_float(t) for t, _ in points], [_float(v) for _, v in points]))
        read += len(points)
    if not parts:
        result.warnings.append(
            "not a complete JSON object (cut off?) and no complete point in it; nothing read"
        )
        return result
    result.warnings.append(
        f"not a complete JSON object (cut off?): read the {counted(read, 'complete point')}"
    )
    result.tables = _merge(parts)
    return result


def _labels(text: str) -> dict | None:
    for candidate in (text, text.replace("'", '"')):
        try:
            labels = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else None
    return None


def _float(value: object) -> float:
    """A number as the API writes it (a string), or NaN when damage left no number."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _json_object(text: str) -> dict | None:
    """The response: the first object that opens with a key and parses, as JSON or as Python's printed
    dict (quotes '), whole or with its line breaks taken out (a paste broke a line inside a string)."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("# source:"))
    decoder = json.JSONDecoder()
    for start in islice(_OBJECT_START.finditer(body), _TRIED_STARTS):
        document = body[start.start() :]
        for quoted in (False, True):  # Python's printed dicts use '
            attempt = document.replace("'", '"') if quoted else document
            for joined in (False, True):
                try:
                    value, _ = decoder.raw_decode(attempt.replace("\n", "") if joined else attempt)
                except json.JSONDecodeError:
                    continue
                if isinstance(value, dict) and ("data" in value or "status" in value):
                    return value  # the response, not one of its series
    return None


_OBJECT_START = re.compile(r"""\{\s*["']""")
_TRIED_STARTS = 3  # a prose line before the response may hold a brace or two ("...{job='vllm'}")


class GrafanaCsvImporter(Importer):
    name = "grafana-csv"
    description = (
        "Grafana 'Export CSV' files: Series;Time;Value rows or series as columns, ISO or epoch-ms times"
    )

    def recognise(self, head: str) -> Claim | None:
        lines = list(islice(data_lines(head.splitlines()), 2))
        if len(lines) < 2:
            return None
        first = lines[0].replace('"', "").lower()
        if not first.startswith(("series;time;value", "series,time,value", "time;", "time,")):
            return None
        return claim(Strength.DOCUMENT, sum(1 for _ in data_lines(head.splitlines())))  # Grafana's header

    def read(self, source: Source, tz: str | None = None) -> Imported:
        lines = data_lines(source.lines())
        first = next(lines, "")
        delimiter = ";" if ";" in first else ","
        rows = [r for r in csv.reader(chain([first], lines), delimiter=delimiter) if r]
        header = [h.strip().lower() for h in rows[0]]
        body = rows[1:]
        result = Imported()
        if header[:3] == ["series", "time", "value"]:
            frame = pd.DataFrame([r[:3] for r in body if len(r) >= 3], columns=["series", "time", "value"])
            parts = [
                route(str(name), {}, _times(group["time"], tz), _numbers(group["value"], delimiter))
                for name, group in frame.groupby("series", sort=False)
            ]
        else:
            names = [h for h in rows[0][1:] if h.strip()]
            times = _times(pd.Series([r[0] for r in body]), tz)
            parts = [
                route(
                    name,
                    {},
                    times,
                    _numbers(pd.Series([r[i + 1] if i + 1 < len(r) else "" for r in body]), delimiter),
                )
                for i, name in enumerate(names)
            ]
        result.tables = _merge(parts)
        return result


def _times(values: pd.Series, tz: str | None) -> list[float]:
    values = values.astype(str).str.strip()
    if values.str.fullmatch(r"\d{12,14}").all():
        return (values.astype("int64") / 1000.0).tolist()
    return [local_epoch(v, tz) if v else float("nan") for v in values]


def _numbers(values: pd.Series, delimiter: str) -> list[float]:
    text = values.astype(str).str.strip()
    if delimiter == ";":
        text = text.str.replace(",", "", regex=False)  # thousands separators in ';' exports
    return pd.to_numeric(text, errors="coerce").tolist()
