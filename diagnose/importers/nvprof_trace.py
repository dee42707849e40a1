"""nvprof's trace modes, as pasted -> the ``gpu_activity`` and ``host_calls`` trace tables.

``nvprof --print-gpu-trace`` prints a row per kernel, copy and memset under a header (its documentation,
"GPU-Trace and API-Trace Modes"): ``Start``, ``Duration``, ``Grid Size`` and ``Block Size`` (``(20 10 1)``
or ``-``), ``Regs*``, ``SSMem*``, ``DSMem*``, ``Size``, ``Throughput``, since CUDA 8 ``SrcMemType`` and
``DstMemType`` (``Pageable``, ``Pinned``, ``Device``), then ``Device`` (its name, cut to the column),
``Context``, ``Stream`` and ``Name``. ``--print-api-trace`` prints ``Start``, ``Duration`` and ``Name``
for each runtime and driver call. Times carry their unit (``366.70ms``, ``840ns``) from the start of the
profile; sizes are decimal (``409.60KB`` is 409,600 bytes). The number in brackets after a kernel's name
(``matrixMulCUDA(...) [94]``) is the id of the call that launched it, which the API trace prints after
that call (``cudaLaunch (matrixMulCUDA(...) [94])``): the two are joined by it, as a Kineto trace's
``correlation`` joins them. A copy from or to pageable memory is not pinned.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled
from diagnose.units import counted

_TIME = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|ms|s)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)(B|KB|MB|GB|TB)$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_UNIT_BYTES = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_GPU_HEADER = re.compile(r"^\s*Start\s+Duration\s+Grid Size\s+Block Size\s+Regs\*.*\bStream\s+Name\s*$")
_API_HEADER = re.compile(r"^\s*Start\s+Duration\s+Name\s*$")
_RESULT = re.compile(r"^==\d+== Profiling result:\s*$")
_CORRELATION = re.compile(r"\s*\[(\d+)\]\)?\s*$")
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
# The columns, by the header's names: each right-aligned under its name (the device's name is cut to its
# column), the name left-aligned last
_COLUMNS = (
    "Start",
    "Duration",
    "Grid Size",
    "Block Size",
    "Regs*",
    "SSMem*",
    "DSMem*",
    "Size",
    "Throughput",
    "SrcMemType",
    "DstMemType",
    "Device",
    "Context",
    "Stream",
    "Name",
)


class NvprofTraceImporter(Importer):
    name = "nvprof-trace"
    description = (
        "nvprof's GPU trace (--print-gpu-trace: kernels, copies with their memory types) and API trace "
        "(--print-api-trace), joined by the launch's id"
    )

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for at, line in enumerate(lines):
            after_result = at > 0 and _RESULT.match(lines[at - 1]) is not None
            if _GPU_HEADER.match(line) or (after_result and _API_HEADER.match(line)):
                return claim(Strength.DOCUMENT, filled(lines[at:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        columns: list[tuple[str, int]] | None = None  # each column's name and where its cell ends
        gpu_rows: list[dict] = []
        api_rows: list[dict] = []
        devices: dict[str, int] = {}
        skipped = 0
        previous = ""
        for line in source.lines():
            if _GPU_HEADER.match(line) or (_RESULT.match(previous) and _API_HEADER.match(line)):
                columns = _columns(line)
                previous = line
                continue
            previous = line
            if columns is None or not line.strip() or line.startswith("=="):
                continue
            cells = _cells(line, columns)
            start, duration = _us(cells.get("Start", "")), _us(cells.get("Duration", ""))
            if start is None or duration is None or not cells.get("Name"):
                skipped += 1
                continue
            name, correlation = _named(cells["Name"])
            if "Device" in cells:
                gpu_rows.append(_activity(cells, name, correlation, start, duration, devices))
            else:
                call = {"ts": start, "dur_us": duration, "correlation": correlation, "kind": "runtime"}
                api_rows.append({**call, "name": name.split(" (", 1)[0]})
        if gpu_rows:
            activity = pd.DataFrame(gpu_rows)
            activity["pinned"] = activity["pinned"].map({1.0: True, 0.0: False}).astype("boolean")
            result.tables["gpu_activity"] = activity
        if api_rows:
            result.tables["host_calls"] = pd.DataFrame(api_rows).assign(thread="")
        if skipped:
            result.warnings.append(
                f"passed over {counted(skipped, 'line')} under a trace header that are not its rows"
            )
        if len(devices) > 1:
            result.warnings.append(f"{len(devices)} devices, numbered in the order the trace names them")
        return result


def _columns(header: str) -> list[tuple[str, int]]:
    """The header's columns in order, each with the position its right-aligned cells end at (the name's:
    where it starts)."""
    found = []
    for name in _COLUMNS:
        for at in re.finditer(rf"(?<!\S){re.escape(name)}(?!\S)", header):
            if name == "Size" and header[: at.start()].rstrip().endswith(("Grid", "Block")):
                continue  # the Size of "Grid Size"
            found.append((name, at.start() if name == "Name" else at.end()))
            break
    return sorted(found, key=lambda column: column[1])


def _cells(line: str, columns: list[tuple[str, int]]) -> dict[str, str]:
    cells, start = {}, 0
    for name, end in columns:
        if name == "Name":
            cells[name] = line[end:].strip()
            break
        cells[name] = line[start:end].strip()
        start = end
    return cells


def _activity(
    cells: dict[str, str],
    name: str,
    correlation: float,
    start: float,
    duration: float,
    devices: dict[str, int],
) -> dict:
    kind = "kernel"
    if name.startswith("[CUDA memcpy"):
        kind = "memcpy"
    elif name.startswith("[CUDA memset"):
        kind = "memset"
    copy = _COPY_KIND.search(name) if kind == "memcpy" else None
    types = {cells.get("SrcMemType"), cells.get("DstMemType")}
    pinned = 0.0 if "Pageable" in types else 1.0 if "Pinned" in types else np.nan
    return {
        "ts": start,
        "dur_us": duration,
        "gpu": float(devices.setdefault(cells["Device"], len(devices))),
        "stream": _float(cells.get("Stream")),
        "bytes": _bytes(cells.get("Size")),
        "correlation": correlation,
        "pinned": pinned if kind == "memcpy" else np.nan,
        "kind": kind,
        "name": name,
        "copy_kind": copy.group(1) if copy else None,
    }


def _named(text: str) -> tuple[str, float]:
    """A name without its launch id, and the id (nan where it has none)."""
    found = _CORRELATION.search(text)
    if found is None:
        return text.strip(), np.nan
    bare = text[: found.start()].rstrip()
    if found.group(0).rstrip().endswith(")"):  # "cudaLaunch (kernel(...) [94])": the call's own name
        bare += ")"
    return bare, float(found.group(1))


def _us(text: str) -> float | None:
    found = _TIME.match(text)
    return float(found.group(1)) * _UNIT_US[found.group(2)] if found else None


def _bytes(text: str | None) -> float:
    found = _SIZE.match(text or "")
    return float(found.group(1)) * _UNIT_BYTES[found.group(2)] if found else np.nan


def _float(text: str | None) -> float:
    try:
        return float(text) if text is not None else np.nan
    except ValueError:
        return np.nan
