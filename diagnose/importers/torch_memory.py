"""PyTorch allocator figures in text: ``memory_summary()`` tables, ``memory_stats()`` dumps, per-rank lines.

| source | allocator column |
|---|---|
| summary "Allocated memory" / stats ``allocated_bytes.all.current`` / ``allocated=`` | allocated_bytes |
| summary "GPU reserved memory" / ``reserved_bytes.all.current`` / ``reserved=`` | reserved_bytes |
| summary "Active memory" / ``active_bytes.all.current`` | active_bytes |
| summary "Non-releasable memory" / ``inactive_split_bytes.all.current`` | inactive_split_bytes |
| summary "cudaMalloc retries" / ``num_alloc_retries`` / ``retries=`` | num_alloc_retries |
| summary "CUDA OOMs" / ``num_ooms`` | num_ooms |
| ``num_device_alloc`` / ``num_device_free`` (PyTorch 2.1+) | num_device_alloc / num_device_free |

A summary's rows and columns are ``memory_summary``'s own (torch/cuda/memory.py): the metrics
Allocated, Active, Requested, GPU reserved and Non-releasable memory, then the counts (Allocations,
Active allocs, GPU reserved segments, Non-releasable allocs, Oversize allocations and segments), each
with Cur Usage, Peak Usage, Tot Alloc and Tot Freed; sizes in B, KB/MB/GB (older versions: binary
all the same) or KiB/MiB/GiB, chosen per cell. A table pasted without its header (from a row in the
middle, the device ID and the OOM and retry counts above it lost) is read by those row names, its
first figure the current usage; a metric met again starts another table.

A ``memory_stats()`` dump is read as JSON or, when printed as Python's
``OrderedDict([('key', value), ...])``, by matching its ``('key', number)``
pairs — never evaluated. These texts carry no time: rows take the file's
modification time, with a warning. OOM messages in the same text become
events, as in any log.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.oom_log import oom_events

_UNITS = {
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "kb": 2**10,
    "mb": 2**20,
    "gb": 2**30,
    "tb": 2**40,
    "pib": 2**50,
    "pb": 2**50,
}  # the old summary's "MB" meant MiB
_SUMMARY_DEVICE = re.compile(r"PyTorch CUDA memory summary, device ID (\d+)")
_SUMMARY_ROWS = {
    "allocated memory": "allocated_bytes",
    "gpu reserved memory": "reserved_bytes",
    "active memory": "active_bytes",
    "non-releasable memory": "inactive_split_bytes",
}
_SUMMARY_CELL = re.compile(r"\|\s*([A-Za-z -]+?)\s*\|\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)\s*\|", re.IGNORECASE)
_COUNT_ROWS = (
    "Allocations",
    "Active allocs",
    "GPU reserved segments",
    "Non-releasable allocs",
    "Oversize allocations",
    "Oversize GPU segments",
)
# A metric's row as memory_summary writes it: its name, then its Cur Usage cell (a size or a count)
_MEMORY_ROW = re.compile(
    r"^\s*\|\s*(Allocated memory|Active memory|Requested memory|GPU reserved memory|Non-releasable memory)"
    r"\s*\|\s*(\d+)\s*([KMGTP]i?B|B)\s*\|",
    re.MULTILINE,
)
_COUNT_ROW = re.compile(rf"^\s*\|\s*({'|'.join(_COUNT_ROWS)})\s*\|\s*\d+\s*[KM]?\s*\|", re.MULTILINE)
_COUNTS = re.compile(r"CUDA OOMs:\s*(\d+)\s*\|\s*cudaMalloc retries:\s*(\d+)")
_STAT_PAIR = re.compile(r"\(\s*'([a-z_.]+)'\s*,\s*(-?\d+)\s*\)")
_STATS = {
    "allocated_bytes.all.current": "allocated_bytes",
    "reserved_bytes.all.current": "reserved_bytes",
    "active_bytes.all.current": "active_bytes",
    "inactive_split_bytes.all.current": "inactive_split_bytes",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
    "num_device_alloc": "num_device_alloc",
    "num_device_free": "num_device_free",
}
_RANK = re.compile(r"Rank (\d+): retries=(\d+), allocated=\s*(\d+)(\w+), reserved=\s*(\d+)(\w+)")


class TorchMemoryImporter(Importer):
    name = "pytorch-memory"
    description = (
        "torch.cuda.memory_summary() tables, memory_stats() dumps (JSON or printed) and per-rank stats lines"
    )

    def recognise(self, head: str) -> Claim | None:
        own = sum(
            1
            for line in head.splitlines()
            if line.lstrip().startswith("|") or "_bytes.all." in line or _RANK.search(line)
        )
        if (
            _SUMMARY_DEVICE.search(head)
            or "'allocated_bytes.all.current'" in head
            or '"allocated_bytes.all.current"' in head
        ):
            return claim(Strength.DOCUMENT, max(own, 1))  # memory_summary()'s title, memory_stats()'s keys
        if _RANK.search(head) or "active_bytes.all." in head:
            return claim(Strength.STATEMENT, own)
        return claim(Strength.SHAPE, own) if _headless_summary(head) else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        text = source.text
        stamp = source.mtime
        rows = _summaries(text) or _stats(text) or _ranks(text)
        result = Imported()
        if not rows and _headless_summary(text):
            rows = _headless_rows(text)
            result.warnings.append(
                "a memory_summary() table without its header (device ID, OOM and retry counts): "
                "read by its rows' names, the first figure of each the current usage"
            )
        if rows:
            result.tables["allocator"] = pd.DataFrame([{"ts": stamp, **row} for row in rows])
            result.warnings.append("allocator figures carry no time: taken at the file's modification time")
        events = oom_events(text.splitlines(), stamp)
        if events:
            result.tables["events"] = pd.DataFrame(events)
        return result


def _summaries(text: str) -> list[dict]:
    rows = []
    for block in re.split(r"(?=PyTorch CUDA memory summary, device ID)", text)[1:]:
        device = _SUMMARY_DEVICE.search(block)
        row: dict = {"device": int(device.group(1)) if device else None}
        counts = _COUNTS.search(block)
        if counts:
            row["num_ooms"], row["num_alloc_retries"] = int(counts.group(1)), int(counts.group(2))
        for label, value, unit in _SUMMARY_CELL.findall(block):
            column = _SUMMARY_ROWS.get(label.strip().lower())
            if column and column not in row:
                row[column] = float(value) * _UNITS[unit.lower()]
        rows.append(row)
    return rows


def _headless_summary(text: str) -> bool:
    """Rows of a summary without its header: two of its metrics at least, one of them a size."""
    sizes = {label for label, _, _ in _MEMORY_ROW.findall(text)}
    return bool(sizes) and len(sizes | set(_COUNT_ROW.findall(text))) >= 2


def _headless_rows(text: str) -> list[dict]:
    rows: list[dict] = []
    for label, value, unit in _MEMORY_ROW.findall(text):
        column = _SUMMARY_ROWS.get(label.lower())
        if column is None:
            continue  # Requested memory: the dump has no column for it
        if not rows or column in rows[-1]:
            rows.append({"device": None})
        rows[-1][column] = float(value) * _UNITS[unit.lower()]
    return rows


def _stats(text: str) -> list[dict]:
    pairs: dict[str, float] = {}
    start = text.find("{")
    if start >= 0:
        try:
            loaded = json.loads(text[start : text.rfind("}") + 1])
            pairs = {k: v for k, v in loaded.items() if isinstance(v, int | float)}
        except (json.JSONDecodeError, AttributeError):
            pairs = {}
    if not pairs:
        pairs = {key: float(value) for key, value in _STAT_PAIR.findall(text)}
    row = {column: pairs[key] for key, column in _STATS.items() if key in pairs}
    return [row] if row else []


def _ranks(text: str) -> list[dict]:
    rows = []
    for rank, retries, allocated, unit_a, reserved, unit_r in _RANK.findall(text):
        rows.append(
            {
                "rank": int(rank),
                "num_alloc_retries": int(retries),
                "allocated_bytes": float(allocated) * _UNITS.get(unit_a.lower(), 1),
                "reserved_bytes": float(reserved) * _UNITS.get(unit_r.lower(), 1),
            }
        )
    return rows
