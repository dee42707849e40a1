"""Out-of-memory messages in any log or traceback -> ``oom`` events, each with its verdict.

Each message is cut from its first line to the end of its figures (the
memory-fraction variant spreads them over several lines; a terminal may wrap
one mid-figure, which leaves a parenthesis open); its figures are parsed by
:mod:`diagnose.engines.oom`, which also classifies it and says why. A wall-clock
stamp at the start of the line (ISO-8601, or vLLM's ``MM-DD HH:MM:SS`` with
the file's year) is used when there is one, else the file's modification time.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from diagnose.engines.oom import explain_oom, is_oom_message, parse_oom_message
from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.stamps import engine_stamp, leading_iso_stamp

_CONTINUATION = re.compile(
    r"^\s*(Currently allocated|Requested|Device limit|Free \(according|PyTorch limit|:"
    r"|while trying to allocate)"
)


class OomLogImporter(Importer):
    name = "pytorch-oom"
    description = (
        "out-of-memory messages in any log or traceback: PyTorch CUDA (torch 1.0 to 2.9 wordings), "
        "cuBLAS/cuDNN allocation failures, "
        "and XPU, MPS, TensorFlow and JAX/XLA ones, named as such with their allocator's figures "
        "(HIP read like CUDA)"
    )

    def recognise(self, head: str) -> Claim | None:
        if not is_oom_message(head):
            return None
        return claim(Strength.STATEMENT, max(1, sum(1 for line in head.splitlines() if is_oom_message(line))))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        # a serving engine's process tag, taken off every line, still says who ran out of memory
        engine = True if any(_ENGINE_LOG.search(tag) for tag in source.prefixes) else None
        events = oom_events(source.lines(), source.mtime, serving_engine=engine, tz=tz)
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
    lines: Iterable[str], fallback: float, serving_engine: bool | None = None, tz: str | None = None
) -> list[dict]:
    """One ``oom`` event per OOM message in the lines.

    ``serving_engine`` None: judged per message from vLLM/SGLang markers on its line.
    """
    scanner = OomScanner(fallback, serving_engine, tz)
    for line in lines:
        scanner.feed(line)
    return scanner.events()


class OomScanner:
    """OOM messages in lines given one at a time: an engine log's importer feeds it the lines it reads,
    so the log is read once. A message's continuation lines and wraps are read from the few lines after
    it (held back until they come), a BFC allocator's stats from the report printed after it."""

    _AHEAD = 11  # a message's block (up to 7 lines) and the wrapped figures after it (4)

    def __init__(self, fallback: float, serving_engine: bool | None = None, tz: str | None = None) -> None:
        self._fallback, self._serving_engine, self._tz = fallback, serving_engine, tz
        self._year = datetime.fromtimestamp(fallback, UTC).year
        self._ahead: deque[str] = deque()
        self._number = 0  # of the line held longest
        self._events: list[dict | None] = []
        self._waiting: list[_BfcReport] = []  # BFC messages still gathering the stats printed after them

    def feed(self, line: str) -> None:
        self._ahead.append(line)
        if len(self._ahead) > self._AHEAD:
            self._next()

    def events(self) -> list[dict]:
        while self._ahead:
            self._next()
        for report in self._waiting:
            self._events[report.slot] = report.event()
        self._waiting = []
        return [event for event in self._events if event is not None]

    def _next(self) -> None:
        line = self._ahead.popleft()
        self._number += 1
        for report in list(self._waiting):
            if not report.take(line):
                self._waiting.remove(report)
                self._events[report.slot] = report.event()
        if not is_oom_message(line):
            return
        following = list(self._ahead)
        block = [line]
        for after in following[:7]:
            if not _CONTINUATION.match(after):
                break
            block.append(after)
        message = _unwrapped("\n".join(block), following[len(block) - 1 : len(block) + 3])
        found = _OomLine(
            line, self._number, message, self._year, self._fallback, self._serving_engine, self._tz
        )
        if _BFC_OOM.search(line):
            self._waiting.append(_BfcReport(found, len(self._events)))
            self._events.append(None)  # its place, kept until its stats are read
        else:
            self._events.append(found.event())


@dataclass(frozen=True)
class _OomLine:
    """An OOM message found on a line: what it says, once its figures are all there."""

    line: str
    number: int
    message: str
    year: int
    fallback: float
    serving_engine: bool | None
    tz: str | None

    def event(self, extra: str = "") -> dict | None:
        message = self.message + extra
        oom = parse_oom_message(message)
        if oom is None or (oom.requested_bytes is None and not _ERROR_FORM.search(self.line)):
            return None  # prose that mentions an OOM ("I meet CUDA out of memory when ...") is no event
        ts, ts_source = (
            engine_stamp(self.line, self.year, self.tz) or leading_iso_stamp(self.line, self.tz),
            "log line",
        )
        if ts is None:
            ts, ts_source = self.fallback, "file modification time"
        engine = bool(_ENGINE_LOG.search(self.line)) if self.serving_engine is None else self.serving_engine
        verdict, reason = explain_oom(oom, engine)
        return {
            "ts": ts,
            "kind": "oom",
            "message": message[:2000],
            "ts_source": ts_source,
            "oom_class": verdict,
            "oom_reason": reason,
            "line": self.number,
        }


# TensorFlow's and XLA's BFC allocator print their stats after a dump of every chunk (thousands of
# lines): the figures that say whether the limit was reached or the memory was in pieces.
_BFC_OOM = re.compile(r"ran out of memory trying to allocate")
_BFC_STAT = re.compile(r"^\W*(?:Limit|InUse|LargestFreeBlock):\s+\d+\s*$")
_BFC_DUMP_LINES = 20_000


class _BfcReport:
    """A BFC allocator's OOM, taking the stats lines of its report as they come: up to the next OOM
    message, or _BFC_DUMP_LINES lines on."""

    def __init__(self, found: _OomLine, slot: int) -> None:
        self.found, self.slot = found, slot
        self.stats: list[str] = []
        self.left = _BFC_DUMP_LINES

    def take(self, line: str) -> bool:
        """Whether the report goes on past this line."""
        if is_oom_message(line) and not _BFC_STAT.match(line):
            return False
        if _BFC_STAT.match(line):
            self.stats.append(line.strip())
        self.left -= 1
        return self.left > 0

    def event(self) -> dict | None:
        return self.found.event("\n" + "\n".join(self.stats) if self.stats else "")


def _unwrapped(message: str, following: list[str]) -> str:
    """A message a terminal wrapped mid-figure leaves ``(`` open: the next lines complete it."""
    for line in following:
        if message.count("(") <= message.count(")") or not line.strip():
            break
        message += line  # a hard wrap splits words, so the pieces join without a space
    return message.strip()
