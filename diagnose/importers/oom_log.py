"""Out-of-memory messages in any log or traceback -> ``oom`` events, each with its verdict.

Each message is cut from its first line to the end of its figures (the
memory-fraction variant spreads them over several lines; a terminal may wrap
one mid-figure, which leaves a parenthesis open); its figures are parsed by
:mod:`diagnose.oom`, which also classifies it and says why. A wall-clock
stamp at the start of the line (ISO-8601, or vLLM's ``MM-DD HH:MM:SS`` with
the file's year) is used when there is one, else the file's modification time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Imported, Importer, Source
from diagnose.importers.stamps import engine_stamp, leading_iso_stamp
from diagnose.oom import explain_oom, is_oom_message, parse_oom_message

_CONTINUATION = re.compile(
    r"^\s*(Currently allocated|Requested|Device limit|Free \(according|PyTorch limit|:"
    r"|while trying to allocate)"
)


class OomLogImporter(Importer):
    name = "pytorch-oom"
    description = (
        "out-of-memory messages in any log or traceback: PyTorch CUDA (torch 1.0 to 2.9 wordings), "
        "and XPU, MPS, TensorFlow and JAX/XLA ones, named as such with their allocator's figures "
        "(HIP read like CUDA)"
    )
    example = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ..."

    def recognise(self, head: str) -> bool:
        return is_oom_message(head)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        # a serving engine's process tag, taken off every line, still says who ran out of memory
        engine = True if any(_ENGINE_LOG.search(tag) for tag in source.prefixes) else None
        events = oom_events(source.text.splitlines(), source.mtime, serving_engine=engine, tz=tz)
        return Imported({"events": pd.DataFrame(events)} if events else {})


# Without figures, only an error's own form counts: "RuntimeError: CUDA error: out of memory".
_ERROR_FORM = re.compile(
    r"\w*(?:Error|Exception)\b:?|CUDA_ERROR_OUT_OF_MEMORY|allocation failed with OOM"
    r"|\[[EW]\b|^\s*[EW]\d{4} | [EW] "
)
_ENGINE_LOG = re.compile(
    r"vllm|VllmWorker|EngineCore|MQLLMEngine|sglang|\[engine\.py|\[core\.py", re.IGNORECASE
)


def oom_events(
    lines: list[str], fallback: float, serving_engine: bool | None = None, tz: str | None = None
) -> list[dict]:
    """One ``oom`` event per OOM message in the lines (shared with the vLLM log importer).

    ``serving_engine`` None: judged per message from vLLM/SGLang markers on its line.
    """
    year = datetime.fromtimestamp(fallback, UTC).year
    events = []
    for index, line in enumerate(lines):
        if not is_oom_message(line):
            continue
        block = [line]
        for following in lines[index + 1 : index + 8]:
            if not _CONTINUATION.match(following):
                break
            block.append(following)
        message = _unwrapped("\n".join(block), lines[index + len(block) : index + len(block) + 4])
        if _BFC_OOM.search(line):
            message += _bfc_stats(lines[index + 1 : index + 1 + _BFC_DUMP_LINES])
        oom = parse_oom_message(message)
        if oom is None or (oom.requested_bytes is None and not _ERROR_FORM.search(line)):
            continue  # prose that mentions an OOM ("I meet CUDA out of memory when ...") is no event
        ts, ts_source = engine_stamp(line, year, tz) or leading_iso_stamp(line, tz), "log line"
        if ts is None:
            ts, ts_source = fallback, "file modification time"
        engine = bool(_ENGINE_LOG.search(line)) if serving_engine is None else serving_engine
        verdict, reason = explain_oom(oom, engine)
        events.append(
            {
                "ts": ts,
                "kind": "oom",
                "message": message[:2000],
                "ts_source": ts_source,
                "oom_class": verdict,
                "oom_reason": reason,
                "line": index + 1,
            }
        )
    return events


# TensorFlow's and XLA's BFC allocator print their stats after a dump of every chunk (thousands of
# lines): the figures that say whether the limit was reached or the memory was in pieces.
_BFC_OOM = re.compile(r"ran out of memory trying to allocate")
_BFC_STAT = re.compile(r"^\W*(?:Limit|InUse|LargestFreeBlock):\s+\d+\s*$")
_BFC_DUMP_LINES = 20_000


def _bfc_stats(following: list[str]) -> str:
    """The stats lines of the BFC allocator's report, up to the next OOM message."""
    stats = []
    for line in following:
        if is_oom_message(line) and not _BFC_STAT.match(line):
            break
        if _BFC_STAT.match(line):
            stats.append(line.strip())
    return "\n" + "\n".join(stats) if stats else ""


def _unwrapped(message: str, following: list[str]) -> str:
    """A message a terminal wrapped mid-figure leaves ``(`` open: the next lines complete it."""
    for line in following:
        if message.count("(") <= message.count(")") or not line.strip():
            break
        message += line  # a hard wrap splits words, so the pieces join without a space
    return message.strip()
