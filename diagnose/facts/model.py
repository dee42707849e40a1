"""Facts: named values computed from the dump, each citing where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FactValue = float | int | str | bool


@dataclass(frozen=True)
class Fact:
    name: str
    value: FactValue
    source: str


@dataclass
class Summary:
    """The numbers every report shows, whatever the rules concluded."""

    requests: int | None = None
    throughput_rps: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    stages: dict[str, dict[str, float | str]] = field(default_factory=dict)
    unaccounted_share: float | None = None  # share of mean latency in no logged stage
    window_s: float | None = None
    slo_p99_ms: float | None = None  # the P99 target, and where it was given
    slo_source: str | None = None
    ooms: list[dict] = field(default_factory=list)  # each OOM class found: {class, count, example}
    llm: dict[str, dict] = field(default_factory=dict)  # ttft / tpot: {p50, p95, p99, source}
    windows: list[dict[str, float | int]] = field(default_factory=list)


@dataclass
class Facts:
    values: dict[str, Fact] = field(default_factory=dict)
    summary: Summary = field(default_factory=Summary)
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
