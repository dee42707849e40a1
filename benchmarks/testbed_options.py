"""The options every benchmark that runs the testbed takes: how long, which seeds, which scenarios, where."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.quick import add_quick
from diagnose.errors import InputError
from diagnose.units import parse_duration
from testbed.scenarios import SCENARIOS, Scenario


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--duration",
        help="length of every run, in seconds or as 4m (default: each scenario's own); never shorter than "
        "a scenario's minimum (co-located-contention's job recurs every 90-150 s: 10 minutes)",
    )
    parser.add_argument("--seeds", type=int, default=1, help="runs of each scenario, with different seeds")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="the seeds are this one and the next (default: %(default)s); a seed no run has used yet "
        "judges the rules on draws they were not mended on",
    )
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", help="run only these")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    add_quick(parser)


@dataclass(frozen=True)
class PlannedRun:
    """One testbed run a benchmark makes: which scenario, its seed, how long, and where."""

    scenario: Scenario
    seed: int
    length_s: float
    folder: Path


def planned_runs(
    parser: argparse.ArgumentParser, args: argparse.Namespace, names: list[str], prefix: str
) -> list[PlannedRun]:
    """Every scenario of ``names`` at every seed the options ask for, each at least its minimum length,
    in ``--out`` (else a new temporary folder named from ``prefix``)."""
    duration_s = run_seconds(parser, args)
    out = args.out or Path(tempfile.mkdtemp(prefix=prefix))
    out.mkdir(parents=True, exist_ok=True)
    return [
        PlannedRun(
            SCENARIOS[name],
            seed,
            max(duration_s or SCENARIOS[name].default_duration_s, SCENARIOS[name].min_duration_s),
            out / f"{name}-s{seed}",
        )
        for name in names
        for seed in range(args.first_seed, args.first_seed + args.seeds)
    ]


def run_seconds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> float | None:
    """``--duration`` in seconds, or None for each scenario's own; a bad one is the parser's error."""
    try:
        return parse_duration(args.duration) if args.duration else None
    except InputError as error:
        parser.error(f"--duration: {error}")
