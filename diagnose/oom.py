"""Parse PyTorch CUDA out-of-memory messages and classify what caused them.

PyTorch has worded its OOM message differently across releases (1.0's
"cached", 1.x's "reserved in total by PyTorch", 2.1's "total capacty" typo,
2.2+'s "reserved by PyTorch but unallocated", the memory-fraction block and
the caching allocator's C++ warning in bytes). Each field is found by its own
pattern so a truncated or prefixed message still yields what it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {
    "b": 1,
    "bytes": 1,
    "byte": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = r"(\d+(?:\.\d+)?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|byte|B)\b"

_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "requested": r"tried to allocate " + _SIZE,
        "total": _SIZE + r" total capacity|total capac\w* of " + _SIZE,
        "free": r"; " + _SIZE + r" free|of which " + _SIZE + r" is free",
        "allocated": _SIZE + r" already allocated|" + _SIZE + r" is allocated by PyTorch",
        "reserved_total": _SIZE + r" (?:reserved in total by PyTorch|cached)",
        "reserved_unallocated": _SIZE + r" is reserved by PyTorch but unallocated",
        "process_in_use": r"has " + _SIZE + r" memory in use",
        "limit_requested": r"Requested\s*:\s*" + _SIZE,
        "limit_total": r"Device limit\s*:\s*" + _SIZE,
        "limit_free": r"Free \(according to CUDA\)\s*:\s*" + _SIZE,
        "limit_allocated": r"Currently allocated\s*:\s*" + _SIZE,
    }.items()
}
_CXX_WARNING = re.compile(r"trying to allocate (\d+) bytes \(free: (\d+), total: (\d+)\)", re.IGNORECASE)
_DEVICE = re.compile(r"\bGPU (\d+)\b|on device (\d+)", re.IGNORECASE)
_PROCESS = re.compile(r"\bProcess (\d+) has\b")
_OOM_MARKERS = re.compile(
    r"CUDA out of memory|OutOfMemoryError|allocation failed with OOM|would exceed allowed memory",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class OomMessage:
    """The figures an OOM message states, in bytes; None where the message is silent."""

    requested_bytes: float | None = None
    total_bytes: float | None = None
    free_bytes: float | None = None
    allocated_bytes: float | None = None
    reserved_unallocated_bytes: float | None = None
    process_in_use_bytes: float | None = None
    gpu: int | None = None
    pid: int | None = None

    @property
    def other_processes_bytes(self) -> float | None:
        """Memory held outside this process: total - free - this process's use."""
        if None in (self.total_bytes, self.free_bytes, self.process_in_use_bytes):
            return None
        return max(0.0, self.total_bytes - self.free_bytes - self.process_in_use_bytes)


def is_oom_message(text: str) -> bool:
    return bool(_OOM_MARKERS.search(text))


def parse_oom_message(text: str) -> OomMessage | None:
    """The figures in one OOM message, or None when the text is not an OOM message."""
    if not is_oom_message(text):
        return None
    cxx = _CXX_WARNING.search(text)
    if cxx:
        requested, free, total = (float(g) for g in cxx.groups())
        return OomMessage(requested, total, free, gpu=_device(text))
    found = {name: _size(pattern.search(text)) for name, pattern in _PATTERNS.items()}
    reserved_unallocated = found["reserved_unallocated"]
    if reserved_unallocated is None and None not in (found["reserved_total"], found["allocated"]):
        reserved_unallocated = max(0.0, found["reserved_total"] - found["allocated"])
    process = _PROCESS.search(text)
    return OomMessage(
        requested_bytes=found["requested"] or found["limit_requested"],
        total_bytes=found["total"] or found["limit_total"],
        free_bytes=_first_known(found["free"], found["limit_free"]),
        allocated_bytes=found["allocated"] or found["limit_allocated"],
        reserved_unallocated_bytes=reserved_unallocated,
        process_in_use_bytes=found["process_in_use"],
        gpu=_device(text),
        pid=int(process.group(1)) if process else None,
    )


FRAGMENTATION = "fragmentation"
EXHAUSTION_REQUEST_TOO_LARGE = "exhaustion: request larger than the card"
EXHAUSTION_OTHER_PROCESS = "exhaustion: another process holds the memory"
EXHAUSTION_ENGINE_PREALLOCATED = "exhaustion: the serving engine's preallocated KV cache leaves no headroom"
_ENGINE_SHARE = 0.85  # vLLM preallocates gpu_memory_utilization (0.9 by default) of the card
EXHAUSTION = "exhaustion"
ANOMALOUS = "anomalous: free memory exceeded the request"
UNKNOWN = "unknown: the message lacks the figures"


def classify_oom(oom: OomMessage, serving_engine: bool = False) -> str:
    """Why the allocation failed, judged from the message's own figures.

    ``serving_engine``: the message came from a serving engine that preallocates
    most of the card for its KV cache (vLLM, SGLang); genuine exhaustion with
    this process holding nearly all of the card is then that preallocation.
    """
    requested = oom.requested_bytes
    if requested is None:
        return UNKNOWN
    if oom.total_bytes is not None and requested > oom.total_bytes:
        return EXHAUSTION_REQUEST_TOO_LARGE
    if oom.free_bytes is not None and oom.free_bytes >= requested:
        return ANOMALOUS
    if oom.reserved_unallocated_bytes is not None and oom.reserved_unallocated_bytes >= requested:
        return FRAGMENTATION
    other = oom.other_processes_bytes
    if other is not None and oom.total_bytes and other >= max(requested, 0.1 * oom.total_bytes):
        return EXHAUSTION_OTHER_PROCESS
    if oom.total_bytes is None and oom.reserved_unallocated_bytes is None:
        return UNKNOWN
    if serving_engine and oom.process_in_use_bytes and oom.total_bytes:
        if oom.process_in_use_bytes >= _ENGINE_SHARE * oom.total_bytes:
            return EXHAUSTION_ENGINE_PREALLOCATED
    return EXHAUSTION


def _size(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    groups = [g for g in match.groups() if g is not None]
    return float(groups[0]) * _UNITS[groups[1].lower()]


def _first_known(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _device(text: str) -> int | None:
    match = _DEVICE.search(text)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))
