"""Facts: named values computed from the dump, each citing where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

FactValue = float | int | str | bool


def as_number(value: FactValue | None) -> float | None:
    """A measured value as a float; None for a missing fact, a name or a yes/no."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Fact:
    name: str
    value: FactValue
    source: str


@dataclass(frozen=True)
class OomClass:
    """One class of OOM verdict, how many messages had it, and the first one's reason."""

    kind: str = field(metadata={"json": "class"})
    count: int
    example: str | None


@dataclass(frozen=True)
class TokenLatency:
    """TTFT or TPOT percentiles, and whether they were logged or derived from stages."""

    p50: float | None
    p95: float | None
    p99: float | None
    source: str


class StageKind(StrEnum):
    """What a stage's time goes to: the CPU, the GPU, waiting, or a stage the contract does not name."""

    CPU = "cpu"
    GPU = "gpu"
    WAIT = "wait"
    OTHER = "other"


@dataclass(frozen=True)
class StageShare:
    """A logged stage's share of the mean latency, of the tail's, and of the tail's excess."""

    kind: StageKind
    share: float
    tail_share: float
    excess_share: float
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class LatencyWindow:
    """The latency percentiles of one window of the recording."""

    requests: int
    p50: float
    p95: float
    p99: float
    p999: float
    start: float = field(metadata={"time": True})  # the report writes it as ISO-8601


@dataclass
class Headline:
    """The numbers every report shows, whatever the rules concluded (the report rounds them)."""

    requests: int | None = None
    throughput_rps: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    stages: dict[str, StageShare] = field(default_factory=dict)
    unaccounted_share: float | None = None  # share of mean latency in no logged stage
    window_s: float | None = None
    slo_p99_ms: float | None = None  # the P99 target, and where it was given
    slo_source: str | None = None
    ooms: list[OomClass] = field(default_factory=list)  # most frequent first
    llm: dict[str, TokenLatency] = field(default_factory=dict)  # ttft, tpot
    windows: list[LatencyWindow] = field(default_factory=list)


@dataclass
class Facts:
    values: dict[str, Fact] = field(default_factory=dict)
    summary: Headline = field(default_factory=Headline)
    start: float | None = None  # epoch seconds of the earliest evidence
    end: float | None = None
    # Why a fact whose evidence is present could not be computed (too short, too few requests):
    # a skipped rule says this rather than the catalogue's generic "needs".
    absent: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # facts left out, and manifest entries ignored

    def cannot(self, names: tuple[str, ...] | list[str], reason: str) -> None:
        """Say why these facts are missing although their table and columns are there."""
        for name in names:
            self.absent.setdefault(name, reason)

    def add(self, name: str, value: FactValue | None, source: str) -> None:
        """Record a fact; a missing or non-finite value is simply not a fact."""
        if value is None:
            return
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and value != value:  # NaN
            return
        if isinstance(value, float) and abs(value) == float("inf"):
            return
        self.values[name] = Fact(name, value, source)

    def get(self, name: str) -> FactValue | None:
        fact = self.values.get(name)
        return None if fact is None else fact.value

    def number(self, name: str) -> float | None:
        """A measured fact's value, or None where it was not computed (or the fact is a name)."""
        return as_number(self.get(name))
