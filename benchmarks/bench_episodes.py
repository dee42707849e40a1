"""Episode detection and periodicity against the generator's ground truth.

    python benchmarks/bench_episodes.py [--seeds 5] [--burst-seeds 200] [--hours 6]

Periodic episodes (periods 1 to 10 minutes, 2 % jitter, three shapes, noise,
2 % missing samples) are detected with `find_episodes`; precision and recall
are pooled over all runs (a detected and a true episode match when they
overlap, one to one) and the period estimate is compared with the truth.
Random bursts (Poisson times) measure how often regular recurrence is wrongly
claimed; the test's level is 1 %.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.detect.episodes import find_episodes  # noqa: E402
from diagnose.detect.periodicity import periodicity  # noqa: E402
from fixtures.episodes import SHAPES, match, periodic_signal, random_bursts  # noqa: E402

PERIODS = (60, 120, 180, 300, 600)


def _detect(truth) -> list[tuple[float, float]]:
    return [(e.start, e.end) for e in find_episodes(truth.values, 0.0, truth.step_s) if e.direction > 0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--burst-seeds", type=int, default=200)
    parser.add_argument("--hours", type=float, default=6.0)
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.burst_seeds, args.hours = 1, 3, 0.5
    length = args.hours * 3600
    start = time.perf_counter()
    print(f"{'period':>7} {'shape':<9} {'precision':>9} {'recall':>7} {'period error':>13} {'periodic':>9}")
    hits = detected = true = 0
    errors, claims = [], 0
    runs = 0
    for period in PERIODS:
        for shape in SHAPES:
            rows = []
            for seed in range(args.seeds):
                truth = periodic_signal(
                    seed, period_s=period, jitter_s=0.02 * period, shape=shape, length_s=length
                )
                found = _detect(truth)
                precision, recall = match(found, truth.episodes)
                hits += round(recall * len(truth.episodes))
                detected += len(found)
                true += len(truth.episodes)
                result = periodicity(np.array([a for a, _ in found]), (0.0, length))
                error = abs(result.period_s - period) / period if result else float("inf")
                errors.append(error)
                claims += bool(result and result.periodic)
                runs += 1
                rows.append((precision, recall, error, bool(result and result.periodic)))
            p, r, e, c = (np.mean([row[i] for row in rows]) for i in range(4))
            print(f"{period:>6}s {shape:<9} {p:>9.3f} {r:>7.3f} {e * 100:>12.2f}% {c * 100:>8.0f}%")
    print(
        f"periodic: precision {hits / max(detected, 1):.3f}, recall {hits / true:.3f} over {runs} runs; "
        f"period error max {max(errors) * 100:.2f}%, mean {np.mean(errors) * 100:.2f}%; "
        f"called periodic in {claims}/{runs}"
    )
    false_claims = 0
    burst_hits = burst_found = burst_true = 0
    for seed in range(args.burst_seeds):
        truth = random_bursts(seed, rate_per_hour=12, length_s=length)
        found = _detect(truth)
        precision, recall = match(found, truth.episodes)
        burst_hits += round(recall * len(truth.episodes))
        burst_found += len(found)
        burst_true += len(truth.episodes)
        result = periodicity(np.array([a for a, _ in found]), (0.0, length))
        false_claims += bool(result and result.periodic)
    print(
        f"random bursts: precision {burst_hits / max(burst_found, 1):.3f}, "
        f"recall {burst_hits / burst_true:.3f}; "
        f"called periodic in {false_claims}/{args.burst_seeds} "
        f"({false_claims / args.burst_seeds * 100:.1f}%, test level 1%)"
    )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
