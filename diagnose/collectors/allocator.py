"""Record the PyTorch caching allocator's figures from inside a serving process.

Standard library only: copy ``collectors/torch_allocator.py`` (this same file)
into the service, or import it where diagnose is installed. One line enables it::

    from torch_allocator import record_allocator; record_allocator("/tmp/allocator.jsonl")
    from diagnose.collectors.allocator import record_allocator  # the same, from an installed diagnose

A daemon thread appends, every second, one JSON line per CUDA device with
``torch.cuda.memory_stats()`` figures under the dump's ``allocator`` column
names, and the sizes of torch's own thread pools (``intra_op_threads``,
``inter_op_threads``: what over-parallelism multiplies). It never imports
torch itself: until the service has imported torch and initialised CUDA, it
writes nothing. Give the file to ``diagnose record --allocator-log`` (or copy
it into a dump as ``allocator.jsonl``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_STATS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "active_bytes": "active_bytes.all.current",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
    # cudaMalloc and cudaFree calls so far (PyTorch 2.1+): flat once a caching allocator has warmed up;
    # climbing with the requests where its cache is emptied after each one
    "num_device_alloc": "num_device_alloc",
    "num_device_free": "num_device_free",
}


def allocator_rows(torch, ts: float, pid: int, largest_block: bool = True) -> list[dict]:
    """One row per CUDA device from an already imported ``torch`` module."""
    rows = []
    for device in range(torch.cuda.device_count()):
        stats = torch.cuda.memory_stats(device)
        row: dict[str, float | None] = {"ts": ts, "pid": pid, "device": device}
        row.update({column: stats.get(key) for column, key in _STATS.items()})
        if largest_block:
            row["largest_free_block_bytes"] = _largest_free_block(torch, device)
        for column, reader in (
            ("intra_op_threads", "get_num_threads"),
            ("inter_op_threads", "get_num_interop_threads"),
        ):
            if hasattr(torch, reader):
                row[column] = getattr(torch, reader)()
        rows.append(row)
    return rows


def _largest_free_block(torch, device: int) -> int | None:
    """The largest inactive block in the allocator's cached segments (from its snapshot)."""
    largest = 0
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device") != device:
            continue
        for block in segment.get("blocks", []):
            if block.get("state") == "inactive":
                largest = max(largest, int(block.get("size", 0)))
    return largest


def record_allocator(path: str, interval_s: float = 1.0, largest_block: bool = True) -> threading.Thread:
    """Start the recording thread (a daemon: it ends with the service)."""

    def loop() -> None:
        pid = os.getpid()
        next_tick = time.monotonic()
        with open(path, "a", encoding="utf-8") as out:
            while True:
                torch = sys.modules.get("torch")
                if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                    for row in allocator_rows(torch, time.time(), pid, largest_block):
                        out.write(json.dumps(row) + "\n")
                    out.flush()
                next_tick += interval_s
                time.sleep(max(0.0, next_tick - time.monotonic()))

    thread = threading.Thread(target=loop, name="diagnose-allocator", daemon=True)
    thread.start()
    return thread
