"""Request traces -> the requests table: OTLP/JSON (whole or one object per line) and Jaeger JSON.

A root span (its parent is not in the file) is a request: ``ts`` is its start
and ``latency_ms`` its duration; its direct children are its stages, summed
by name into ``stage_<name>_ms``. vLLM's ``gen_ai.latency.*`` span attributes
(seconds) become stages too, and ``gen_ai.usage.*`` token counts become
``input_len`` / ``output_len``. An OTLP status code of 2 is an error.
Other JSON span formats (e.g. Go's stdouttrace) are not OTLP and are left unused.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled
from diagnose.units import counted

_GEN_AI_STAGES = {
    "gen_ai.latency.time_in_queue": "queue",
    "gen_ai.latency.time_in_model_prefill": "prefill",
    "gen_ai.latency.time_in_model_decode": "decode_tokens",
    "gen_ai.latency.time_in_model_forward": "forward",
    "gen_ai.latency.time_in_scheduler": "schedule",
}
_INPUT = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")
_OUTPUT = ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")


class TraceImporter(Importer):
    name = "otel-traces"
    description = "OpenTelemetry traces: OTLP/JSON (whole or one object per line) and Jaeger JSON"

    def recognise(self, head: str) -> Claim | None:
        otlp = '"resourceSpans"' in head or ('"scopeSpans"' in head and '"spans"' in head)
        jaeger = '"traceID"' in head and '"operationName"' in head
        return claim(Strength.DOCUMENT, filled(head.splitlines())) if otlp or jaeger else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        spans, bad = _spans(source.text)
        if bad:
            result.warnings.append(f"skipped {counted(bad, 'line')} that are not JSON")
        if spans:
            result.tables["requests"] = _requests(spans)
        return result


def _documents(text: str) -> tuple[list, int]:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("# source:"))
    try:
        return [json.loads(body)], 0
    except json.JSONDecodeError:
        pass
    documents: list = []
    bad = 0
    broken: str | None = None  # a line that did not parse alone: the next may continue it

    def salvage(line: str) -> None:
        nonlocal bad
        salvaged = _complete_spans(line)
        bad += not salvaged
        if salvaged:
            documents.append({"scopeSpans": [{"spans": salvaged}]})

    for line in body.splitlines():
        if not line.strip():
            continue
        # One JSON document a line; a line that opens none continues a broken one before it (a paste
        # broke it, mid-key or mid-figure).
        if broken is not None and not line.lstrip().startswith("{"):
            line = broken + line
        elif broken is not None:
            salvage(broken)
        try:
            documents.append(json.loads(line))
            broken = None
        except json.JSONDecodeError:
            broken = line
    if broken is not None:
        salvage(broken)
    return documents, bad


def _complete_spans(line: str) -> list[dict]:
    """The span objects that are whole in a cut-off line (a truncated export still has most of them)."""
    decoder, spans = json.JSONDecoder(), []
    for match in re.finditer(r'\{"traceId"', line):
        try:
            value, _ = decoder.raw_decode(line, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            spans.append(value)
    return spans


def _spans(text: str) -> tuple[list[dict], int]:
    documents, bad = _documents(text)
    spans: list[dict | None] = []  # None: a span without the fields a request needs
    for document in documents:
        if isinstance(document, dict) and "data" in document:  # Jaeger
            for trace in document.get("data") or []:
                spans += [_jaeger_span(s) for s in trace.get("spans", [])]
            continue
        resources = document.get("resourceSpans", [document]) if isinstance(document, dict) else []
        for resource in resources:
            for scope in resource.get("scopeSpans", []) or resource.get("instrumentationLibrarySpans", []):
                spans += [_otlp_span(s) for s in scope.get("spans", [])]
    return [s for s in spans if s is not None], bad


def _otlp_span(span: dict) -> dict | None:
    try:
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    except (KeyError, TypeError, ValueError):
        return None
    attributes = {a.get("key"): _otlp_value(a.get("value", {})) for a in span.get("attributes", [])}
    return {
        "trace": str(span.get("traceId", "")).lower(),
        "id": str(span.get("spanId", "")).lower(),
        "parent": str(span.get("parentSpanId", "") or "").lower(),
        "name": span.get("name", ""),
        "start_s": start / 1e9,
        "duration_ms": (end - start) / 1e6,
        "attributes": attributes,
        "error": (span.get("status") or {}).get("code") in (2, "STATUS_CODE_ERROR"),
    }


def _jaeger_span(span: dict) -> dict | None:
    try:
        start, duration = int(span["startTime"]), int(span["duration"])
    except (KeyError, TypeError, ValueError):
        return None
    parents = [r.get("spanID", "") for r in span.get("references", []) if r.get("refType") == "CHILD_OF"]
    tags = {t.get("key"): t.get("value") for t in span.get("tags", [])}
    return {
        "trace": str(span.get("traceID", "")),
        "id": str(span.get("spanID", "")),
        "parent": parents[0] if parents else "",
        "name": span.get("operationName", ""),
        "start_s": start / 1e6,
        "duration_ms": duration / 1e3,
        "attributes": tags,
        "error": tags.get("error") in (True, "true"),
    }


def _otlp_value(value: dict):
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            raw = value[key]
            return int(raw) if key == "intValue" else raw
    return None


def _requests(spans: list[dict]) -> pd.DataFrame:
    ids = {s["id"] for s in spans}
    children: dict[str, list[dict]] = defaultdict(list)
    for span in spans:
        if span["parent"]:
            children[span["parent"]].append(span)
    rows = []
    for span in spans:
        if span["parent"] and span["parent"] in ids:
            continue
        row = {
            "ts": span["start_s"],
            "id": span["id"],
            "latency_ms": span["duration_ms"],
            "status": "error" if span["error"] else "ok",
            "operation": span["name"],
        }
        for child in children.get(span["id"], []):
            column = f"stage_{_stage_name(child['name'])}_ms"
            row[column] = row.get(column, 0.0) + child["duration_ms"]
        attributes = span["attributes"]
        for key, stage in _GEN_AI_STAGES.items():
            if isinstance(attributes.get(key), int | float):
                row[f"stage_{stage}_ms"] = float(attributes[key]) * 1000
        for keys, column in ((_INPUT, "input_len"), (_OUTPUT, "output_len")):
            value = next((attributes[k] for k in keys if isinstance(attributes.get(k), int | float)), None)
            if value is not None:
                row[column] = value
        rows.append(row)
    return pd.DataFrame(rows)


def _stage_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "span"
