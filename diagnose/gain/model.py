"""What a fix is expected to gain: plain data, shown beside a hypothesis in every report format."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GainFigure:
    """One latency figure now and without the cause, with the 95 % interval of the latter (ms)."""

    name: str  # p50, p99
    now_ms: float
    expected_ms: float
    low_ms: float | None
    high_ms: float | None


@dataclass(frozen=True)
class ExpectedGain:
    figures: tuple[GainFigure, ...]
    how: str  # the counterfactual, in words: what was set aside or changed
    method: str  # how the interval was drawn
    source: str  # the evidence it was computed from

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ExpectedGain:
        """Read back what :meth:`to_dict` wrote (the archive's, a comparison's second process's)."""
        figures = tuple(
            GainFigure(
                str(f["name"]),
                float(f["now_ms"]),
                float(f["expected_ms"]),
                None if f["low_ms"] is None else float(f["low_ms"]),
                None if f["high_ms"] is None else float(f["high_ms"]),
            )
            for f in data["figures"]
        )
        return cls(figures, str(data["how"]), str(data["method"]), str(data["source"]))
