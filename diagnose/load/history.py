"""A standard load run judged against the last one of the same name: has the knee moved beyond its
interval? The weekly gate: the same load every week, a regression caught the week it lands.

Figures compare by their intervals, never their values alone: the knee by its bracket, each end
widened by what its step can tell (curve.step_resolution; a knee moved down when the new interval's
high end is at or below the old one's low end), the capacity and
the latency of one request alone by their 95 % intervals (disjoint: moved). A slower stage shows
as a higher latency alone; a lost slot or a smaller batch as a lower knee with the same latency
alone. The reference is the last run of the name that was not itself a regression, so a bad week
does not become the standard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from diagnose.archive import CapacityRun
from diagnose.load.curve import widened


@dataclass(frozen=True)
class Move:
    figure: str
    before: str
    after: str
    verdict: str  # "lower", "higher", "within its interval", "not comparable"
    worse: bool


@dataclass(frozen=True)
class Judgement:
    name: str
    reference: CapacityRun | None
    moves: list[Move]

    @property
    def regressed(self) -> bool:
        """The gate: the knee moved down beyond its bracket."""
        return any(move.figure == "knee" and move.worse for move in self.moves)

    def to_json(self) -> dict[str, Any]:
        against = self.reference
        return {
            "name": self.name,
            "against": None
            if against is None
            else {"id": against.id, "added_at": against.added_at, "folder": against.folder},
            "moves": [vars(move) for move in self.moves],
            "regressed": self.regressed,
        }


def judge(name: str, result: dict[str, Any], history: list[CapacityRun]) -> Judgement:
    """This run's result against the last run of ``name`` that did not regress (else the last)."""
    kept = [run for run in history if not run.regressed] or history
    if not kept:
        return Judgement(name, None, [])
    reference = kept[-1]
    before = reference.result
    moves = [
        _knee(before["knee"], result["knee"]),
        _interval(
            "capacity past the knee",
            before["knee"]["capacity_rps"],
            result["knee"]["capacity_rps"],
            "req/s",
            higher_is_better=True,
        ),
        _interval(
            "one request alone, P50",
            before["baseline"]["latency_p50_ms"],
            result["baseline"]["latency_p50_ms"],
            "ms",
            higher_is_better=False,
        ),
    ]
    return Judgement(name, reference, moves)


def _knee(before: dict[str, Any], after: dict[str, Any]) -> Move:
    def text(knee: dict[str, Any]) -> str:
        if not knee["found"]:
            return f"above {knee['kept_up_rps']:.3g} req/s (not reached)"
        bracket = f"{knee['kept_up_rps']:.3g} to {knee['fell_behind_rps']:.3g} req/s"
        if knee.get("low_rps") is None or knee.get("high_rps") is None:
            return bracket
        return f"{bracket} (95 %: {knee['low_rps']:.3g} to {knee['high_rps']:.3g})"

    if not before["found"] and not after["found"]:
        return Move("knee", text(before), text(after), "not comparable", False)
    kept_before, behind_before = _bracket(before, after)
    kept_after, behind_after = _bracket(after, before)
    if after["found"] and behind_after <= kept_before:
        return Move("knee", text(before), text(after), "lower", True)
    if before["found"] and kept_after >= behind_before:
        return Move("knee", text(before), text(after), "higher", False)
    return Move("knee", text(before), text(after), "within its interval", False)


def _bracket(knee: dict[str, Any], other: dict[str, Any]) -> tuple[float, float]:
    """A knee's bracket as two runs of one plan are compared: at the rates their steps asked for, which
    are the same in both (a step one run kept up with and the other fell behind at is a knee that moved,
    whatever each step's draw sent); at the rates sent where either run was archived without them."""
    planned = ("kept_up_planned_rps", "fell_behind_planned_rps")
    if all(key in run for key in planned for run in (knee, other)):
        kept, behind = _rate(knee[planned[0]]), _rate(knee[planned[1]])
    else:
        kept, behind = _rate(knee["kept_up_rps"]), _rate(knee["fell_behind_rps"])
    # each end widened by what its step could tell (archived without it: the bracket as it was)
    return widened(
        kept, behind, _rate(knee.get("kept_up_resolution")), _rate(knee.get("fell_behind_resolution"))
    )


def _rate(value: float | None) -> float:
    """A bracket's end as stored (JSON has no NaN: a knee not reached is null)."""
    return math.nan if value is None else float(value)


def _interval(
    figure: str, before: dict[str, Any], after: dict[str, Any], unit: str, higher_is_better: bool
) -> Move:
    def text(value: dict[str, Any]) -> str:
        if value["value"] is None:
            return "not measured"
        if value["low"] is None:
            return f"{value['value']:.3g} {unit}"
        return f"{value['value']:.3g} {unit} ({value['low']:.3g} to {value['high']:.3g})"

    if None in (before["low"], before["high"], after["low"], after["high"]):
        return Move(figure, text(before), text(after), "not comparable", False)
    if after["high"] < before["low"]:
        return Move(figure, text(before), text(after), "lower", higher_is_better)
    if after["low"] > before["high"]:
        return Move(figure, text(before), text(after), "higher", not higher_is_better)
    return Move(figure, text(before), text(after), "within its interval", False)
