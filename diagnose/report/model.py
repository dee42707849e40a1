"""The report as typed data: what every renderer, the live view, pictures and compare read.

The fields follow docs/report-json.md one for one, so the JSON edge
(:func:`diagnose.report.json_report.plain`) is a mechanical walk: a field's
``json`` metadata renames it, ``time`` marks epoch seconds written as ISO-8601,
``omit_if_none`` leaves out an extension that does not apply. Numbers are
rounded to the precision the report states when the report is built, so
every renderer shows the same figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from diagnose.dump.model import SourceStatus
from diagnose.facts.model import (  # the summary's parts, as the facts layer computes them
    FactValue,
    LatencyWindow as LatencyWindow,
    OomClass as OomClass,
    StageShare as StageShare,
    TokenLatency as TokenLatency,
    as_number,
)
from diagnose.gain.model import ExpectedGain
from diagnose.judge.engine import (
    Confidence,
    Line as Line,  # a hypothesis's evidence, as the rules engine wrote it
)

_TIME = {"time": True}


@dataclass(frozen=True)
class Window:
    start: float | None = field(default=None, metadata=_TIME)
    end: float | None = field(default=None, metadata=_TIME)


@dataclass(frozen=True)
class TableRead:
    rows: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class ImporterUse:
    """A file an importer turned into a table (an nvidia-smi log, a vLLM ``/metrics`` scrape)."""

    file: str
    importer: str
    rows: int


@dataclass(frozen=True)
class SourceState:
    """A source a recorder was given (the manifest's ``sources``) and whether it delivered."""

    source: str
    kind: str | None
    target: str | None
    status: SourceStatus | None  # None: a manifest's status no recorder writes
    at: str | None
    reason: str | None


@dataclass(frozen=True)
class EvidenceRead:
    tables: dict[str, TableRead]
    missing: tuple[str, ...]
    importers: tuple[ImporterUse, ...]
    not_used: tuple[str, ...]
    warnings: tuple[str, ...]
    sources: tuple[SourceState, ...]
    environment: dict[str, str]

    @property
    def dead_sources(self) -> tuple[SourceState, ...]:
        """Sources that never delivered or were lost: the evidence the recording does not hold."""
        return tuple(s for s in self.sources if s.status is not SourceStatus.OK)


@dataclass(frozen=True)
class Summary:
    slo_p99_ms: float | None
    slo_source: str | None
    ooms: tuple[OomClass, ...]
    llm: dict[str, TokenLatency]
    requests: int | None
    throughput_rps: float | None
    latency_ms: dict[str, float]  # p50, p95, p99, p999, mean, max
    stages: dict[str, StageShare]
    unaccounted_share: float | None
    window_s: float | None
    windows: tuple[LatencyWindow, ...]


class Direction(StrEnum):
    """Which way a signal moved in an episode: above its baseline, or below it."""

    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class Episode:
    start: float = field(metadata=_TIME)
    end: float = field(metadata=_TIME)
    peak: float | None
    baseline: float | None
    direction: Direction
    routine: bool  # like the signal's other episodes (detect/routine.py)


@dataclass(frozen=True)
class Periodicity:
    estimate_s: float | None
    jitter_s: float | None
    occurrences: int
    p_value: float | None
    periodic: bool


@dataclass(frozen=True)
class SignalReport:
    """A signal in which something happened: a change point or an episode."""

    kind: str
    step_s: float
    change_points: tuple[float, ...] = field(metadata=_TIME)
    episodes: tuple[Episode, ...]
    period_s: float | None  # set only when the episodes are periodic
    periodicity: Periodicity | None = field(default=None, metadata={"omit_if_none": True})
    meta: dict[str, object] | None = field(default=None, metadata={"omit_if_none": True})


@dataclass(frozen=True)
class AlignmentReport:
    a: str
    b: str
    coincidence: float | None
    locked: float | None
    lag_s: float | None
    p_value: float
    matched: int


@dataclass(frozen=True)
class Hypothesis:
    id: str
    rule: str
    rule_shown_as: str
    title: str
    summary: str
    score: float
    confidence: Confidence
    evidence: tuple[Line, ...]
    contrary: tuple[Line, ...]
    not_checked: tuple[str, ...]
    verify: tuple[str, ...]
    remedy: tuple[str, ...]
    pitfalls: tuple[str, ...]
    # A consequence of a likely cause (judge/engine.py): the cause's id, how it explains this finding's
    # evidence, and the score on that evidence alone (``score`` is what is left as a cause of its own).
    explained_by: str | None = field(default=None, metadata={"omit_if_none": True})
    explanation: str | None = field(default=None, metadata={"omit_if_none": True})
    own_score: float | None = field(default=None, metadata={"omit_if_none": True})
    # For a hypothesis below likely: the evidence for it that was looked for and not seen, in the rule's
    # words (each condition's ``unmet``), which is what would raise it.
    not_seen: tuple[str, ...] | None = field(default=None, metadata={"omit_if_none": True})
    # What removing the cause would gain, computed on the dump (diagnose/gain): where a counterfactual exists.
    expected_gain: ExpectedGain | None = field(default=None, metadata={"omit_if_none": True})
    # Why there is none, where the evidence cannot give one (diagnose/gain: no_counterfactual).
    gain_note: str | None = field(default=None, metadata={"omit_if_none": True})

    @property
    def is_consequence(self) -> bool:
        return self.explained_by is not None

    def brief(self) -> dict[str, object]:
        """What a summary of many reports keeps of it (a fleet's hosts, an alert's, a knee's)."""
        return {"id": self.id, "score": self.score, "confidence": self.confidence, "title": self.title}


@dataclass(frozen=True)
class RuledOut:
    id: str
    rule: str
    reason: str


@dataclass(frozen=True)
class NotRun:
    id: str
    rule: str
    missing: tuple[str, ...]


@dataclass(frozen=True)
class CitedValue:
    value: FactValue
    source: str


@dataclass(frozen=True)
class Report:
    format: str
    dump: str
    window: Window
    evidence: EvidenceRead
    summary: Summary
    signals: dict[str, SignalReport]
    alignments: tuple[AlignmentReport, ...]
    hypotheses: tuple[Hypothesis, ...]  # strongest first
    ruled_out: tuple[RuledOut, ...]
    not_run: tuple[NotRun, ...]
    facts: dict[str, CitedValue]

    def fact(self, name: str) -> FactValue | None:
        """A fact's value, or None where the dump did not give it."""
        cited = self.facts.get(name)
        return None if cited is None else cited.value

    def number(self, name: str) -> float | None:
        """A measured fact's value, or None where the dump did not give it (or the fact is a name)."""
        return as_number(self.fact(name))

    def name(self, name: str) -> str | None:
        """A fact that names something (a GPU, a process), or None where the dump did not give it."""
        value = self.fact(name)
        return value if isinstance(value, str) else None
