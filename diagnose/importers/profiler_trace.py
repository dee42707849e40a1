"""PyTorch profiler traces (Kineto's Chrome-trace JSON) -> the trace tables gpu_activity and host_calls.

``torch.profiler`` exports one JSON object whose ``traceEvents`` list holds
complete events (``"ph": "X"``) with a category, a start ``ts`` and a
duration ``dur``, both in microseconds on the trace's own clock:

| category (any generation, any case) | table | kind |
|---|---|---|
| ``kernel`` | gpu_activity | kernel |
| ``gpu_memcpy``, ``memcpy`` | gpu_activity | memcpy (direction and pinned/pageable from its name) |
| ``gpu_memset``, ``memset`` | gpu_activity | memset |
| ``cuda_runtime``, ``cuda_driver``, ``runtime``, ``driver`` (CUDA and HIP) | host_calls | runtime |
| ``cuda_sync`` (CUPTI's record of the host waiting on a stream, event or device) | host_calls | sync |
| ``cpu_op``, ``operator`` | host_calls | operator |
| ``user_annotation`` (``ProfilerStep#N`` among them) | host_calls | annotation |

Flow events (``ac2g``), Python stack frames, instant events and metadata are
not kept: the launch and its kernel share ``args.correlation``. A host call
inside ``ProfilerStep#N`` gets ``step`` N. A Chrome trace written as a bare
list of events is read the same way.

A trace can be hundreds of MB: it is streamed (ijson, over gzip where it is
gzip) into typed columns, so memory grows with the events kept, never with
the text. A trace cut short (a copy that did not finish) keeps what came
before the cut, and says so.
"""

from __future__ import annotations

import re
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from diagnose.importers.base import (
    Claim,
    FileImporter,
    Imported,
    Source,
    Strength,
    claim,
    filled,
    open_maybe_gzipped,
)
from diagnose.units import counted

_GPU_KINDS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
_HOST_KINDS = {
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "driver": "runtime",
    "cuda_sync": "sync",
    "cpu_op": "operator",
    "operator": "operator",
    "user_annotation": "annotation",
}
_KINETO_CATEGORIES = re.compile(
    r'"cat"\s*:\s*"(?:kernel|Kernel|cpu_op|Operator|cuda_runtime|Runtime|gpu_memcpy)"'
)
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
_STEP = re.compile(r"^(?:ProfilerStep|model_run)#(\d+)$")
_ORT = re.compile(r'"cat"\s*:\s*"(?:Session|Node)"')
_DEVICE_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"\s*,\s*"totalGlobalMem"')


class KinetoTraceImporter(FileImporter):
    name = "pytorch-profiler-trace"
    description = "PyTorch profiler traces: Kineto / Chrome-trace JSON, as .json or .json.gz (torch.profiler)"

    def recognise(self, head: str) -> Claim | None:
        start = head.lstrip()[:1]
        if start == "{":
            found = '"traceEvents"' in head and ('"schemaVersion"' in head or '"ph"' in head)
        else:
            found = start == "[" and '"ph"' in head and bool(_KINETO_CATEGORIES.search(head))
        return claim(Strength.DOCUMENT, filled(head.splitlines())) if found else None  # the whole document

    def read_file(self, path: Path, tz: str | None = None) -> Imported:
        with open_maybe_gzipped(path) as handle:
            head = handle.read(65_536)
        with open_maybe_gzipped(path) as handle:
            prefix = "item" if head.lstrip()[:1] == b"[" else "traceEvents.item"
            return _imported(_events(handle, prefix), head.decode("utf-8", errors="replace"))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        import io

        data = source.text.encode("utf-8")
        prefix = "item" if source.text.lstrip()[:1] == "[" else "traceEvents.item"
        return _imported(_events(io.BytesIO(data), prefix), source.text[:65_536])


def _events(handle: Any, prefix: str) -> Iterator[dict[str, Any] | Exception]:
    """The trace's events, one at a time; a cut or damaged end is yielded as the error that ended it."""
    import ijson

    try:
        yield from ijson.items(handle, prefix, use_float=True)
    except (ijson.JSONError, EOFError, OSError, zlib.error) as error:  # the last three: a cut or damaged gzip
        yield error


class _Columns:
    """Columns built row by row in typed arrays: a trace's millions of events cost 8 bytes a number,
    and each distinct name is kept once."""

    def __init__(self, numbers: tuple[str, ...], texts: tuple[str, ...]) -> None:
        self.numbers: dict[str, array[float]] = {name: array("d") for name in numbers}
        self.texts: dict[str, array[int]] = {name: array("q") for name in texts}
        self.codes: dict[str, dict[str, int]] = {name: {} for name in texts}

    def add(self, numbers: dict[str, float], texts: dict[str, str | None]) -> None:
        for name, column in self.numbers.items():
            column.append(numbers.get(name, np.nan))
        for name, coded in self.texts.items():
            value = texts.get(name)
            if value is None:
                coded.append(-1)
            else:
                codes = self.codes[name]
                coded.append(codes.setdefault(value, len(codes)))

    def __len__(self) -> int:
        return len(next(iter(self.numbers.values())))

    def frame(self) -> pd.DataFrame:
        columns: dict[str, Any] = {
            name: np.frombuffer(column, dtype="float64") for name, column in self.numbers.items()
        }
        for name, column in self.texts.items():
            categories = pd.Index(list(self.codes[name]), dtype="object")
            codes = np.frombuffer(column, dtype=np.int64)
            if len(categories):
                columns[name] = pd.Categorical.from_codes(codes, categories=categories)
        frame = pd.DataFrame(columns)
        return frame.dropna(axis="columns", how="all")


def _number(value: object) -> float:
    if isinstance(value, bool) or value is None:
        return np.nan
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return np.nan


class OrtProfileImporter(KinetoTraceImporter):
    """onnxruntime's profile (``SessionOptions.enable_profiling``): a bare list of Chrome-trace events.
    Each node's ``<node>_kernel_time`` is an operator named by its op type (``args.op_name``), each
    ``model_run`` a step (``model_run#N``, N counted from 0); kernels the CUDA provider records
    (``"cat": "Kernel"``) are GPU activity as in any trace."""

    name = "onnxruntime-profile"
    description = "onnxruntime profiles: the JSON enable_profiling writes (nodes, runs, CUDA kernels)"

    def recognise(self, head: str) -> Claim | None:
        runs_or_nodes = "_kernel_time" in head or '"model_run"' in head
        found = head.lstrip()[:1] == "[" and bool(_ORT.search(head)) and runs_or_nodes
        return claim(Strength.DOCUMENT, filled(head.splitlines())) if found else None  # the whole document


def _imported(events: Iterator[dict[str, Any] | Exception], head: str) -> Imported:
    result = Imported()
    runs = 0
    gpu = _Columns(
        ("ts", "dur_us", "gpu", "stream", "bytes", "correlation", "pinned"), ("kind", "name", "copy_kind")
    )
    host = _Columns(("ts", "dur_us", "correlation"), ("kind", "name", "thread"))
    seen = skipped = 0
    for event in events:
        if isinstance(event, Exception):
            cause = f"{type(event).__name__} after {seen:,} events"
            result.warnings.append(f"the trace ends early ({cause}): read what came before the cut")
            break
        seen += 1
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category = str(event.get("cat", "")).lower()
        ts, dur = _number(event.get("ts")), _number(event.get("dur"))
        if not np.isfinite(ts) or not np.isfinite(dur) or dur < 0:
            skipped += category in _GPU_KINDS or category in _HOST_KINDS
            continue
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        name = str(event.get("name", ""))
        if category in ("node", "session"):  # onnxruntime: a graph node's compute, a run of the graph
            if category == "node" and not name.endswith("_kernel_time"):
                continue  # the fences before and after a node are not its work
            if category == "session" and name != "model_run":
                continue
            kind = "operator" if category == "node" else "annotation"
            label = str(args.get("op_name") or name.removesuffix("_kernel_time"))
            if category == "session":
                label, runs = f"model_run#{runs}", runs + 1
            host.add(
                {"ts": ts, "dur_us": dur}, {"kind": kind, "name": label, "thread": str(event.get("tid", ""))}
            )
            continue
        if category in _GPU_KINDS:
            kind = _GPU_KINDS[category]
            copy = _COPY_KIND.search(name) if kind == "memcpy" else None
            pinned = np.nan
            if kind == "memcpy":
                pinned = 0.0 if "Pageable" in name else 1.0 if "Pinned" in name else np.nan
            device = args.get("device", event.get("pid"))
            gpu.add(
                {
                    "ts": ts,
                    "dur_us": dur,
                    "gpu": _number(device),
                    "stream": _number(args.get("stream", event.get("tid"))),
                    "bytes": _number(args.get("bytes")),
                    "correlation": _number(args.get("correlation")),
                    "pinned": pinned,
                },
                {"kind": kind, "name": name, "copy_kind": copy.group(1) if copy else None},
            )
        elif category in _HOST_KINDS:
            host.add(
                {
                    "ts": ts,
                    "dur_us": dur,
                    "correlation": _number(args.get("correlation")),
                },
                {"kind": _HOST_KINDS[category], "name": name, "thread": str(event.get("tid", ""))},
            )
    if skipped:
        result.warnings.append(f"{counted(skipped, 'event')} without a readable ts or dur skipped")
    if len(gpu):
        activity = gpu.frame()
        if "pinned" in activity:
            activity["pinned"] = activity["pinned"].map({1.0: True, 0.0: False}).astype("boolean")
        result.tables["gpu_activity"] = activity
    if len(host):
        result.tables["host_calls"] = with_steps(host.frame())
    devices = _DEVICE_NAME.findall(head)
    if devices:
        result.environment["profiled_gpu"] = devices[0]
    if not len(gpu) and not len(host):
        result.warnings.append(f"no kernel, copy, runtime call or operator among its {seen:,} events")
    return result


def with_steps(calls: pd.DataFrame) -> pd.DataFrame:
    """Each call inside a ``ProfilerStep#N`` annotation gets ``step`` N (steps do not overlap)."""
    names = calls["name"].astype("category")  # each distinct name is matched once
    numbers_by_code = np.array(
        [float(m.group(1)) if (m := _STEP.match(str(n))) else np.nan for n in names.cat.categories] + [np.nan]
    )
    step_of_row = numbers_by_code[names.cat.codes.to_numpy()]
    marks = (calls["kind"] == "annotation").to_numpy() & np.isfinite(step_of_row)
    if not marks.any():
        return calls
    order = np.argsort(calls["ts"].to_numpy()[marks], kind="stable")
    starts = calls["ts"].to_numpy()[marks][order]
    ends = starts + calls["dur_us"].to_numpy()[marks][order]
    numbers = step_of_row[marks][order]
    ts = calls["ts"].to_numpy()
    at = np.searchsorted(starts, ts, side="right") - 1
    inside = (at >= 0) & (ts <= ends[np.clip(at, 0, None)])
    return calls.assign(step=np.where(inside, numbers[np.clip(at, 0, None)], np.nan))
