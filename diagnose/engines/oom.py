"""Parse out-of-memory messages and classify what caused them.

PyTorch has worded its OOM message differently across releases (1.0-1.3's
"cached", which is the memory held but not allocated; 1.x's "reserved in
total by PyTorch"; 2.1's "total capacty" typo; 2.2+'s "reserved by PyTorch but
unallocated"; the memory-fraction block; the caching allocator's C++ warning
in bytes; "CUDA error: out of memory" with no figures at all). Each field is
found by its own pattern so a truncated or prefixed message still yields what
it holds. ROCm's PyTorch (HIP) runs the same caching allocator and prints the
same figures, so its messages are read like CUDA's. Other back ends (XPU, MPS,
TensorFlow, JAX/XLA) are recognised and named as such: their allocators differ,
and CUDA's reading would mislead. TensorFlow's and XLA's BFC allocator print
their own figures (the request, rounded; ``Limit``, ``InUse`` and
``LargestFreeBlock`` in the stats after the chunk dump; a tensor's shape and
type in ``OOM when allocating tensor``): they are read and said in the reason
(the limit reached, or room within it but no free block large enough), and
the class stays ``other back end``.

The classification rule, in order (docs/importers.md repeats it):

1. another back end than CUDA or HIP -> ``other back end``;
2. no request size -> ``unknown`` (the message lacks the figures);
3. request > the card's total -> exhaustion: request larger than the card;
4. reserved-but-unallocated >= request, and a material share (5 %) of the card -> ``fragmentation``
   (PyTorch held enough, in pieces, and enough of the card that the pieces matter);
   a message cut before that figure (its ``(GPU 0; ...`` list never closed, or 2.x's sentences
   ending before "reserved by PyTorch but unallocated"), or the memory-fraction form cut before its
   "Free (according to CUDA)" figure -> ``unknown``: nothing else can be told;
5. a memory-fraction limit ("allowed") that the reserve + the request's segment exceed -> exhaustion:
   the limit (the allocator counts segments: 2 MiB for requests to 1 MiB, 20 MiB to 10 MiB);
6. free on the card > the request's segment + 5 % -> ``anomalous`` (the margin: messages round to
   two decimals, and the driver rounds allocations up to pages);
7. other processes hold >= max(request, 10 % of the card) -> exhaustion: another process;
8. neither the card's total nor the reserve known -> ``unknown``;
9. a serving engine's log and this process holds >= 85 % of the card -> exhaustion: its KV cache;
10. otherwise -> ``exhaustion`` (where a sliver of stranded memory covered the request, the reason
    says so: the card is full, and defragmenting it would give back almost nothing).

Why 5 % is material: the stranded memory is the caching allocator's slack, and
a full card always has some (blocks rounded up to 512 B and 2 MiB, segments of
2 and 20 MiB partly in use). In the real messages whose stranded memory did
*not* cover the request, so the card was plainly full, that slack was 0-6 % of
the card, median 1.5 %. Below 5 % a stranded figure that covers one request is
that slack: the next allocation fails as well, and the pitfall "the memory is
free, only fragmented" would be wrong advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.units import human_bytes

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
        "requested": r"(?:tried|trying) to allocate " + _SIZE,
        "total": _SIZE + r" total capacity|total capac\w* of " + _SIZE,
        "free": r"; " + _SIZE + r" free|of which " + _SIZE + r" is free",
        "allocated": _SIZE + r" already allocated|" + _SIZE + r" is allocated by PyTorch",
        "reserved_total": _SIZE + r" reserved in total by PyTorch",
        "cached": _SIZE + r" cached\b",
        "allowed": _SIZE + r" allowed;",
        "reserved_unallocated": _SIZE + r" is reserved by PyTorch but unallocated",
        "process_in_use": r"has " + _SIZE + r" memory in use",
        "limit_requested": r"Requested\s*:\s*" + _SIZE,
        "limit_total": r"Device limit\s*:\s*" + _SIZE,
        "limit_free": r"Free \(according to CUDA\)\s*:\s*" + _SIZE,
        "limit_allocated": r"Currently allocated\s*:\s*" + _SIZE,
    }.items()
}
_FIGURES_OPEN = re.compile(r"Tried to allocate [\d.]+\s*\w+ \((?:GPU|XPU) \d+;", re.IGNORECASE)
_NEW_FORM = re.compile(r"has a total capac\w* of|of which [\d.]+\s*\w+ is free", re.IGNORECASE)
_NEW_FORM_END = re.compile(
    r"reserved by PyTorch but unallocated|See documentation|PYTORCH_\w*ALLOC_CONF", re.IGNORECASE
)
_FRACTION_FORM = re.compile(r"would exceed allowed memory", re.IGNORECASE)
_CXX_WARNING = re.compile(r"trying to allocate (\d+) bytes \(free: (\d+), total: (\d+)\)", re.IGNORECASE)
_DEVICE = re.compile(r"\bGPU (\d+)\b|on device (\d+)", re.IGNORECASE)
_PROCESS = re.compile(r"\bProcess (\d+) has\b")
_OOM_MARKERS = re.compile(
    r"(?:CUDA|XPU|HIP|MPS backend) out of memory|OutOfMemoryError|allocation failed with OOM"
    r"|would exceed allowed memory|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY"
    # cuBLAS or cuDNN could not allocate its handle's or its workspace's device memory
    r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|Tried to allocate [\d.]+\s*\w+ \(GPU \d+;|ran out of memory trying to allocate"
    r"|OOM when allocating tensor|RESOURCE_EXHAUSTED: Out of memory|Failed to allocate request for",
    re.IGNORECASE,
)
_BACKENDS = (
    ("xpu", re.compile(r"XPU out of memory", re.IGNORECASE)),
    ("mps", re.compile(r"MPS backend out of memory", re.IGNORECASE)),
    ("hip", re.compile(r"HIP out of memory|PYTORCH_HIP_ALLOC_CONF", re.IGNORECASE)),
    ("xla", re.compile(r"XlaRuntimeError|jaxlib|xla_extension|xla/tsl/|RESOURCE_EXHAUSTED: Out of memory")),
    (
        "tensorflow",
        re.compile(
            r"_bfc\b|bfc_allocator|stream_executor|ran out of memory trying|OOM when allocating", re.I
        ),
    ),
)
# The BFC allocator's own figures (TensorFlow, XLA): the request rounded to bytes, the stats block
# printed after the chunk dump, a device allocation that failed, a tensor's shape and element type.
_BFC = {
    "rounded": re.compile(r"\(rounded to (\d+)\)"),
    "limit": re.compile(r"\bLimit:\s+(\d+)"),
    "in_use": re.compile(r"\bInUse:\s+(\d+)"),
    "largest_free": re.compile(r"\bLargestFreeBlock:\s+(\d+)"),
    "bytes": re.compile(r"(?:allocate|for) [\d.]+\s*\w*\s*\((\d+)\s*(?:bytes|B)\)|allocate (\d+) bytes"),
}
_TENSOR = re.compile(r"OOM when allocating tensor with shape\s*\[([\d,\s]+)\] and type (\w+)")
_DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8}
_DTYPE_BYTES |= {"int32": 4, "int64": 8, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}
_NOT_A_FAILURE = re.compile(r"The caller indicates that this is not a failure")


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
    backend: str = "cuda"  # cuda, or the other back end that wrote it: xpu, mps, hip, tensorflow, xla
    allowed_bytes: float | None = None  # a per-process limit (memory fraction) the message states
    limit_bytes: float | None = None  # the BFC allocator's limit (TensorFlow, XLA)
    largest_free_bytes: float | None = None  # the BFC allocator's largest free block
    not_a_failure: bool = False  # TensorFlow's "the caller indicates that this is not a failure"
    # What a message cut short lacks: "(GPU 0; ... alre" with no ")", or 2.x's sentences ending before
    # "... reserved by PyTorch but unallocated" lack PyTorch's reserve; the memory-fraction form
    # ending before its "Free (according to CUDA)" figure, the free memory. None: the message is whole.
    cut_before: str | None = None

    @property
    def cut(self) -> bool:
        return self.cut_before is not None

    @property
    def other_processes_bytes(self) -> float | None:
        """Memory held outside this process: total - free - this process's use."""
        total, free, in_use = self.total_bytes, self.free_bytes, self.process_in_use_bytes
        if total is None or free is None or in_use is None:
            return None
        return max(0.0, total - free - in_use)


def is_oom_message(text: str) -> bool:
    # Every marker names memory, an OOM or an allocation (alloc...): the plain test first, on every line
    lowered = text.lower()
    if "memory" not in lowered and "oom" not in lowered and "alloc" not in lowered:
        return False
    return bool(_OOM_MARKERS.search(text))


def parse_oom_message(text: str) -> OomMessage | None:
    """The figures in one OOM message, or None when the text is not an OOM message."""
    if not is_oom_message(text):
        return None
    backend = next((name for name, pattern in _BACKENDS if pattern.search(text)), "cuda")
    if backend in ("tensorflow", "xla"):
        return _bfc_message(text, backend)
    cxx = _CXX_WARNING.search(text)
    if cxx:
        requested, free, total = (float(g) for g in cxx.groups())
        return OomMessage(requested, total, free, gpu=_device(text), backend=backend)
    found = {name: _size(pattern.search(text)) for name, pattern in _PATTERNS.items()}
    # torch 1.0-1.3 said "cached" for what 2.x calls "reserved but unallocated": the figures show it
    # (allocated + cached + free add up to the card; cached is often far below allocated).
    reserved_unallocated = _first_known(found["reserved_unallocated"], found["cached"])
    reserved_total, allocated = found["reserved_total"], found["allocated"]
    if reserved_unallocated is None and reserved_total is not None and allocated is not None:
        reserved_unallocated = max(0.0, reserved_total - allocated)
    process = _PROCESS.search(text)
    in_use = found["process_in_use"]
    # The figures' grammar says where they end: 1.x closes its "(GPU 0; ...)" list, 2.x ends on
    # "... reserved by PyTorch but unallocated.", the memory-fraction form lists the free memory
    # before its limit. A message without them was cut short.
    opened = _FIGURES_OPEN.search(text)
    cut_before = None
    if (opened is not None and ")" not in text[opened.end() :]) or (
        _NEW_FORM.search(text) is not None and _NEW_FORM_END.search(text) is None
    ):
        cut_before = "PyTorch's reserve: fragmentation cannot be told from exhaustion"
    elif _FRACTION_FORM.search(text) and found["limit_free"] is None:
        cut_before = "the free memory: a full card cannot be told from free memory the allocation failed in"
    if in_use == 0 and (found["allocated"] or 0) > 0:
        in_use = None  # "this process has 0 bytes memory in use" beside allocations: NVML in a container
    return OomMessage(
        requested_bytes=found["requested"] or found["limit_requested"],
        total_bytes=found["total"] or found["limit_total"],
        free_bytes=_first_known(found["free"], found["limit_free"]),
        allocated_bytes=found["allocated"] or found["limit_allocated"],
        reserved_unallocated_bytes=reserved_unallocated,
        process_in_use_bytes=in_use,
        gpu=_device(text),
        pid=int(process.group(1)) if process else None,
        backend=backend,
        allowed_bytes=found["allowed"],
        cut_before=cut_before,
    )


def _bfc_message(text: str, backend: str) -> OomMessage:
    found = {name: pattern.search(text) for name, pattern in _BFC.items()}
    figure = {name: float(next(g for g in m.groups() if g)) if m else None for name, m in found.items()}
    requested = _first_known(figure["rounded"], figure["bytes"], _size(_PATTERNS["requested"].search(text)))
    if requested is None and (tensor := _TENSOR.search(text)):
        elements = 1
        for size in tensor.group(1).split(","):
            elements *= int(size.strip() or 1)
        if (width := _DTYPE_BYTES.get(tensor.group(2).lower())) is not None:
            requested = float(elements * width)
    return OomMessage(
        requested_bytes=requested,
        allocated_bytes=figure["in_use"],
        gpu=_device(text),
        backend=backend,
        limit_bytes=figure["limit"],
        largest_free_bytes=figure["largest_free"],
        not_a_failure=bool(_NOT_A_FAILURE.search(text)),
    )


FRAGMENTATION = "fragmentation"
EXHAUSTION_REQUEST_TOO_LARGE = "exhaustion: request larger than the card"
EXHAUSTION_OTHER_PROCESS = "exhaustion: another process holds the memory"
EXHAUSTION_ENGINE_PREALLOCATED = "exhaustion: the serving engine's preallocated KV cache leaves no headroom"
EXHAUSTION_LIMIT = "exhaustion: the process's memory limit (memory fraction) is reached"
_ROUNDING_MARGIN = 0.05  # free memory this close to the request is not "more than enough" (rule 6)
_ENGINE_SHARE = 0.85  # vLLM preallocates gpu_memory_utilization (0.9 by default) of the card
MATERIAL_SHARE = 0.05  # stranded memory past the allocator's slack on a full card (module docstring)
_ALLOCATOR_BACKENDS = ("cuda", "hip")  # PyTorch's caching allocator, the same figures
EXHAUSTION = "exhaustion"
ANOMALOUS = "anomalous: free memory exceeded the request"
UNKNOWN = "unknown: the message lacks the figures"
OTHER_BACKEND = "other back end"


def classify_oom(oom: OomMessage, serving_engine: bool = False) -> str:
    """Why the allocation failed, by the rule in the module docstring."""
    return explain_oom(oom, serving_engine)[0]


def explain_oom(oom: OomMessage, serving_engine: bool = False) -> tuple[str, str]:
    """The class of an OOM and the figures that decided it, as a sentence a person can check.

    ``serving_engine``: the message came from a serving engine that preallocates
    most of the card for its KV cache (vLLM, SGLang).
    """
    requested = oom.requested_bytes
    if oom.backend not in _ALLOCATOR_BACKENDS:
        return OTHER_BACKEND, _other_backend_reason(oom)
    if requested is None:
        return UNKNOWN, "the message gives no request size, so there is nothing to weigh"
    asked = f"requested {human_bytes(requested)}"
    if oom.total_bytes is not None and requested > oom.total_bytes:
        return EXHAUSTION_REQUEST_TOO_LARGE, f"{asked} > the card's {human_bytes(oom.total_bytes)}"
    stranded = oom.reserved_unallocated_bytes
    covers = stranded is not None and stranded >= requested
    share = stranded_share(oom)
    if stranded is not None and covers and (share is None or share >= MATERIAL_SHARE):
        of_card = f", {share:.0%} of the card" if share is not None else ""
        return FRAGMENTATION, f"reserved but unallocated {human_bytes(stranded)} >= {asked}{of_card}"
    if oom.cut and stranded is None and not _cannot_be_fragmentation(oom):
        return UNKNOWN, f"{asked}, but the message is cut before {oom.cut_before}"
    reserve, segment = (oom.allocated_bytes or 0) + (stranded or 0), _segment(requested)
    if oom.allowed_bytes is not None and reserve + segment > oom.allowed_bytes:
        used = f"reserved {human_bytes(reserve)} + a {human_bytes(segment)} segment for {asked}"
        return EXHAUSTION_LIMIT, f"{used} > the {human_bytes(oom.allowed_bytes)} allowed"
    if oom.free_bytes is not None and oom.free_bytes > segment * (1 + _ROUNDING_MARGIN):
        return ANOMALOUS, f"free {human_bytes(oom.free_bytes)} > {asked}, yet the allocation failed"
    other, card = oom.other_processes_bytes, human_bytes(oom.total_bytes or 0)
    if other is not None and oom.total_bytes and other >= max(requested, 0.1 * oom.total_bytes):
        return EXHAUSTION_OTHER_PROCESS, f"other processes hold {human_bytes(other)} of {card}"
    if oom.total_bytes is None and stranded is None:
        return UNKNOWN, f"{asked}, but neither the card's total nor PyTorch's reserve is given"
    if serving_engine and oom.process_in_use_bytes and oom.total_bytes:
        if oom.process_in_use_bytes >= _ENGINE_SHARE * oom.total_bytes:
            held = human_bytes(oom.process_in_use_bytes)
            return EXHAUSTION_ENGINE_PREALLOCATED, f"the engine holds {held} of {card}"
    known = [
        f"{label} {human_bytes(value)}"
        for label, value in (("free", oom.free_bytes), ("reserved but unallocated", stranded))
        if value is not None
    ]
    if stranded is not None and covers and share is not None:
        allocated = f", {human_bytes(oom.allocated_bytes)} allocated" if oom.allocated_bytes else ""
        return EXHAUSTION, (
            f"the {card} card is full{allocated}: the {human_bytes(stranded)} reserved but unallocated "
            f"covers the {human_bytes(requested)} asked for, but is only {share:.1%} of the card, "
            "the allocator's slack"
        )
    if not known:
        return EXHAUSTION, f"{asked} of a {card} card; no free or reserved figure stated"
    if len(known) == 2:
        return EXHAUSTION, f"{known[0]} and {known[1]}, each < {asked}"
    unstated = "" if oom.free_bytes is not None else " (free memory not stated)"
    return EXHAUSTION, f"{known[0]} < {asked}{unstated}"


def _other_backend_reason(oom: OomMessage) -> str:
    """What another back end's own figures say: for a BFC allocator, its limit reached or its pieces."""
    reason = f"{_BACKEND_NAMES[oom.backend]}'s out-of-memory error, not CUDA's"
    requested, limit, in_use = oom.requested_bytes, oom.limit_bytes, oom.allocated_bytes
    if requested is not None:
        reason += f": requested {human_bytes(requested)}"
    if requested is not None and limit is not None and in_use is not None:
        room = limit - in_use
        stated = f"its allocator's limit {human_bytes(limit)}, in use {human_bytes(in_use)}"
        largest = oom.largest_free_bytes
        if room >= requested and largest is not None and largest < requested:
            reason += (
                f"; {stated}: {human_bytes(room)} free within the limit, but the largest free block is "
                f"{human_bytes(largest)}, smaller than the request (fragmented)"
            )
        elif room < requested:
            reason += f"; {stated}: the request does not fit in the {human_bytes(room)} left (exhausted)"
        else:
            reason += f"; {stated}"
    if oom.not_a_failure:
        reason += " (TensorFlow says this is not a failure: the op fell back, slower, to less memory)"
    return reason


def _cannot_be_fragmentation(oom: OomMessage) -> bool:
    """Whether a message cut before PyTorch's reserve still rules fragmentation out: the reserve not
    yet allocated is at most what the process holds less what PyTorch allocated, and a bound below
    the request, or below a material share of the card, settles it."""
    in_use, allocated, requested = oom.process_in_use_bytes, oom.allocated_bytes, oom.requested_bytes
    if in_use is None or allocated is None or requested is None:
        return False
    bound = in_use - allocated
    material = MATERIAL_SHARE * oom.total_bytes if oom.total_bytes else 0.0
    return bound < requested or bound < material


def _segment(requested: float) -> float:
    """What the caching allocator asks the driver for to serve a request (its allocation sizes: 2 MiB
    for small requests, 20 MiB up to 10 MiB, else rounded up to 2 MiB), which a memory limit counts."""
    mib = 1024**2
    if requested <= mib:
        return 2 * mib
    if requested < 10 * mib:
        return 20 * mib
    return -(-requested // (2 * mib)) * 2 * mib


def stranded_share(oom: OomMessage) -> float | None:
    """Reserved-but-unallocated memory as a share of the card (of PyTorch's whole reserve where the
    message does not give the card's size); None without the figures."""
    stranded = oom.reserved_unallocated_bytes
    if stranded is None:
        return None
    whole = oom.total_bytes or (stranded + oom.allocated_bytes if oom.allocated_bytes is not None else None)
    return stranded / whole if whole else None


_BACKEND_NAMES = {
    "xpu": "Intel XPU",
    "mps": "Apple MPS",
    "hip": "AMD HIP (ROCm)",
    "tensorflow": "TensorFlow",
    "xla": "JAX/XLA",
}


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
