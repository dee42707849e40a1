"""The ``stacks`` probe: where the server's threads are, from ``py-spy dump --nonblocking``, ten times.

The dump says a CPU stage costs the latency; the server's own stacks say
whether that stage's code is what runs now. py-spy reads the process's memory
without stopping it (``--nonblocking``: no pause, at the price of an
occasionally torn stack), ``Host.samples`` dumps half a second apart. Each
thread py-spy marks active in a dump is one sample; the share of them whose
frames name the stage (its words, as function or file names: ``tokenize`` is
found in ``tokenizer.py`` and ``Tokenizer.encode``) is how much of the
server's work now is that stage. Where py-spy is not installed, or may not
attach (ptrace: run as the server's user, or root), the probe says so.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from diagnose.facts.model import FactValue
from diagnose.units import counted

_THREAD = re.compile(r"^Thread\s+(?:0x)?[0-9A-Fa-f]+\s+\(([^)]*)\)")
_FRAME = re.compile(r"^\s+(\S.*?)\s+\((.*)\)\s*$")


@dataclass(frozen=True)
class ThreadStack:
    active: bool
    frames: tuple[str, ...]  # innermost first: "function (file:line)"


def parse_dump(text: str) -> list[ThreadStack]:
    """The threads of one ``py-spy dump``: whether each was active, and its frames."""
    threads: list[ThreadStack] = []
    frames: list[str] = []
    active = started = False
    for line in text.splitlines():
        header = _THREAD.match(line)
        if header:
            if started:
                threads.append(ThreadStack(active, tuple(frames)))
            active, frames, started = "active" in header.group(1), [], True
        elif started and (frame := _FRAME.match(line)):
            frames.append(f"{frame.group(1)} ({frame.group(2)})")
    if started:
        threads.append(ThreadStack(active, tuple(frames)))
    return threads


def stage_words(stage: str) -> tuple[str, ...]:
    """The stems a frame must hold to be the stage's: each word of its name, less a final e or s."""
    words = [w for w in re.split(r"[_\W]+", stage.lower()) if w]
    return tuple(w[:-1] if len(w) > 4 and w[-1] in "es" else w for w in words)


@dataclass(frozen=True)
class StackReading:
    facts: dict[str, FactValue]
    details: tuple[str, ...]


def read_stacks(dumps: list[str], stage: str | None) -> StackReading:
    """The live facts of several dumps of the server's threads."""
    samples = [thread for text in dumps for thread in parse_dump(text) if thread.active and thread.frames]
    facts: dict[str, FactValue] = {"live.stacks.active_samples": len(samples)}
    details = [f"{counted(len(dumps), 'dump')}, {counted(len(samples), 'active thread sample')}"]
    if samples:
        leaves = Counter(thread.frames[0] for thread in samples)
        top, count = leaves.most_common(1)[0]
        facts["live.stacks.top_frame"] = top
        details.append(f"most often running: {top} ({count} of {len(samples)})")
    if stage and samples:
        words = stage_words(stage)
        inside = sum(
            1 for thread in samples if all(any(w in f.lower() for f in thread.frames) for w in words)
        )
        facts["live.stacks.stage"] = stage
        facts["live.stacks.stage_share"] = inside / len(samples)
        details.append(f"{inside} of them in the {stage} stage's code ({', '.join(words)})")
    return StackReading(facts, tuple(details))
