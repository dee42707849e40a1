"""Log lines that say a serving engine stalled or died, wherever the log is read.

Read both by the vLLM log importer (a log handed to ``diagnose file``) and by
the recorder's log follower (``diagnose record --log``), so that a stall seen
live is the same ``engine_stall`` event as one found in a file afterwards:

- stalled: vLLM's ``Engine iteration timed out`` and ``EngineCore ... not
  responded``; a watchdog that gave up on a step: SGLang's ``Scheduler
  watchdog timeout (...)``, PyTorch's NCCL ``Watchdog caught collective
  operation timeout`` (a hung tensor-parallel rank), a service's own
  ``watchdog timeout``;
- dead: vLLM's ``EngineDeadError`` and its relatives; SGLang's ``Scheduler hit an
  exception`` and the server's ``Received sigquit from a child process``.
"""

from __future__ import annotations

import re

VLLM_STALLED = re.compile(
    r"Engine iteration timed out|EngineCore (?:has )?not responded|engine core .*not responding"
)
VLLM_DEAD = re.compile(
    r"MQLLMEngine is already dead|Engine background task failed|AsyncEngineDeadError|EngineDeadError"
    r"|EngineCore encountered a fatal error"
)
SGLANG_DEAD = re.compile(r"Scheduler hit an exception|Received sigquit from a child process")
DEAD = re.compile(VLLM_DEAD.pattern + "|" + SGLANG_DEAD.pattern)
# Any stall: vLLM's own lines, or a watchdog's (in any case: SGLang and PyTorch capitalise differently).
STALLED = re.compile(VLLM_STALLED.pattern + r"|\b(?i:watchdog (?:caught collective operation )?timeout)\b")


def engine_failure_kind(line: str) -> str | None:
    """``engine_stall``, ``engine_dead``, or None for a line that says neither."""
    if STALLED.search(line):
        return "engine_stall"
    if DEAD.search(line):
        return "engine_dead"
    return None
