"""A comparison of two recordings as typed, plain data: what every renderer and the gate read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

COMPARE_FORMAT = "diagnose-compare/1"

BETTER, WORSE, SAME, UNTESTED, INFO = (
    "better",
    "worse",
    "no significant change",
    "not tested",
    "informational",
)
IMPROVED, REGRESSED, NO_CHANGE, NOT_COMPARABLE = (
    "improved",
    "regressed",
    "no significant change",
    "not comparable",
)


@dataclass(frozen=True)
class FigureChange:
    """One figure before and after, the change, its interval and what it means."""

    name: str  # what --fail-on-regression calls it: p99, throughput, gpu_mem_peak, stage_forward_p99
    label: str
    unit: str  # ms, rps, bytes, share, pct
    better: str | None  # "lower", "higher", or None for a figure that is neither (utilisation)
    before: float | None
    after: float | None
    change: float | None  # relative (after / before - 1), or a difference when scale == "difference"
    scale: str  # "relative" or "difference"
    low: float | None  # the interval of the change, same scale
    high: float | None
    method: str  # how the interval was made, or why there is none
    verdict: str  # better, worse, no significant change, not tested, informational
    source: str

    @property
    def interval_excludes_zero(self) -> bool:
        """The change is significant by its interval (False where it has none)."""
        return self.low is not None and self.high is not None and not (self.low <= 0 <= self.high)


@dataclass(frozen=True)
class LengthCheck:
    """Did one request-length distribution stay the same?"""

    column: str
    before_median: float
    after_median: float
    statistic: float  # two-sample Kolmogorov-Smirnov D
    p_value: float
    differs: bool


@dataclass(frozen=True)
class Traffic:
    rate_change: FigureChange | None  # requests per second
    rate_differs: bool
    work_change: FigureChange | None  # tokens (input plus output lengths) per second: the offered work
    work_differs: bool
    lengths: list[LengthCheck]
    reweighted: list[FigureChange]  # latency of the after side re-weighted to the before side's length mix
    reweighting: str | None  # how the after side was re-weighted, if it was
    coverage: float | None  # the share of the before side's mix its strata cover
    service: list[FigureChange]  # latency less waiting, (re-weighted,) where the load differed
    notes: list[str]

    @classmethod
    def unchecked(cls) -> Traffic:
        """No traffic to compare: a side without request latencies."""
        return cls(None, False, None, False, [], [], None, None, [], [])

    @property
    def same(self) -> bool:
        return not self.load_differs and not any(check.differs for check in self.lengths)

    @property
    def load_differs(self) -> bool:
        return self.rate_differs or self.work_differs


@dataclass(frozen=True)
class Difference:
    """Something about the machine, software, settings or background load that is not the same."""

    what: str
    kind: str  # hardware, software, settings, background, recording
    before: str
    after: str
    blocks: bool  # makes the two recordings not comparable


@dataclass(frozen=True)
class HypothesisMove:
    id: str
    before: float | None  # score, None where the rule did not fire
    after: float | None
    change: str  # appeared, disappeared, stronger, weaker


@dataclass(frozen=True)
class Side:
    dump: str
    window: tuple[str | None, str | None]
    requests: int
    cold_excluded: int  # requests of a warm-up left out
    hypotheses: list[tuple[str, float]]  # (id, score), strongest first


@dataclass(frozen=True)
class GateTrip:
    figure: str
    change: float
    tolerance: float
    text: str


@dataclass(frozen=True)
class PseudoOptimisation:
    """A change made as an optimisation that left P99 worse, or that delivered none of the gain the
    diagnosis expected of it: what it was, and the findings it brought."""

    change: str | None  # the person's words (--change, the archive's), None where none was given
    findings: list[tuple[str, float]]  # (id, score) of pseudo-optimisations likely after, not before
    expected_of: str | None = None  # the cause whose fix it was meant to be, where it delivered nothing


AS_EXPECTED, MORE, LESS, NOTHING, UNEXPECTED = (
    "as expected",
    "more than expected",
    "less than expected",
    "nothing",
    "not expected to move",
)
DELIVERED, PARTLY, DELIVERED_NOTHING, NOT_EXPECTED = (
    "delivered",
    "partly delivered",
    "delivered nothing",
    "nothing was expected",
)


@dataclass(frozen=True)
class DeliveredFigure:
    """One latency figure: the change the diagnosis expected of the fix, and the change measured."""

    name: str  # p50, p99
    expected: float  # relative: the counterfactual over the figure then, less one
    expected_low: float | None
    expected_high: float | None
    measured: float | None  # relative: after over before, less one (every request, cold ones too)
    measured_low: float | None
    measured_high: float | None
    share: float | None  # measured over expected: the share of the expected gain delivered
    verdict: str  # as expected, more than expected, less than expected, nothing, not expected to move


@dataclass(frozen=True)
class Delivery:
    """What a fix delivered against the gain the before side's diagnosis expected of it."""

    cause: str  # the hypothesis the fix was for (--expects)
    how: str  # the counterfactual, in words
    figures: list[DeliveredFigure]
    verdict: str  # delivered, partly delivered, delivered nothing, nothing was expected
    source: str

    @classmethod
    def from_dict(cls, data: dict) -> Delivery:
        """Read back what ``asdict`` wrote (the archive keeps a comparison's delivery as JSON)."""
        figures = [DeliveredFigure(**figure) for figure in data["figures"]]
        return cls(data["cause"], data["how"], figures, data["verdict"], data["source"])


@dataclass(frozen=True)
class Comparison:
    before: Side
    after: Side
    verdict: str
    headline: str
    reasons: list[str]  # why the verdict: the figures or differences that decided it
    figures: list[FigureChange]
    traffic: Traffic
    differences: list[Difference]
    diagnosis: list[HypothesisMove]
    warnings: list[str] = field(default_factory=list)
    pseudo_optimisation: PseudoOptimisation | None = None
    delivery: Delivery | None = None

    @property
    def comparable(self) -> bool:
        return not any(d.blocks for d in self.differences)

    def to_dict(self) -> dict:
        """The JSON form (docs/compare-json.md): the dataclasses as they are, plus the format."""
        data = asdict(self)
        data["traffic"]["same"] = self.traffic.same
        data["traffic"]["load_differs"] = self.traffic.load_differs
        data["comparable"] = self.comparable
        return {"format": COMPARE_FORMAT, **data}
