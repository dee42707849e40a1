"""Do `diagnose compare`'s 95 % intervals contain the true change 95 % of the time?

    python benchmarks/bench_compare_coverage.py                     # 400 pairs per setting
    python benchmarks/bench_compare_coverage.py --pairs 1000 --requests 20000

Each pair is two simulated recordings whose latency is log-normal with a known
shift between them, autocorrelated in time (an AR(1) of the log latency with
correlation time ``--tau`` seconds, so neighbouring requests are alike as they
are on a real service). The true change of every quantile and of the mean is
then exp(shift) - 1, and the script counts how often each interval holds it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from diagnose.bootstrap import time_blocks
from diagnose.compare.figures import change
from diagnose.compare.measure import Requests, latency_measures

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402

SIGMA = 0.5


def side(
    rng: np.random.Generator, requests: int, seconds: float, mu: float, tau: float, salt: int
) -> Requests:
    """One recording: arrivals uniform in time, log latency an AR(1) in time with N(mu, SIGMA) margins."""
    ts = np.sort(rng.uniform(0, seconds, requests))
    z = np.empty(requests)
    z[0] = rng.normal()
    keep = np.exp(-np.diff(ts) / tau) if tau > 0 else np.zeros(requests - 1)
    noise = rng.normal(size=requests)
    for i in range(1, requests):
        z[i] = keep[i - 1] * z[i - 1] + np.sqrt(1 - keep[i - 1] ** 2) * noise[i]
    frame = pd.DataFrame({"ts": 1.7e9 + ts, "latency_ms": np.exp(mu + SIGMA * z)})
    blocks = time_blocks(frame["ts"].to_numpy(), frame["latency_ms"].to_numpy())
    return Requests(frame, blocks, seconds, "simulated", 0, {}, salt)


def coverage(
    pairs: int, requests: int, seconds: float, shift: float, tau: float, seed: int
) -> dict[str, float]:
    """Share of pairs whose interval holds the true change, per figure."""
    rng = np.random.default_rng(seed)
    truth = np.exp(shift) - 1
    held: dict[str, int] = {}
    for index in range(pairs):
        before = side(rng, requests, seconds, np.log(50), tau, 2 * index)
        after = side(rng, requests, seconds, np.log(50) + shift, tau, 2 * index + 1)
        for b, a in zip(latency_measures(before), latency_measures(after), strict=True):
            figure = change(b, a)
            held[figure.name] = held.get(figure.name, 0) + int(figure.low <= truth <= figure.high)
    return {name: count / pairs for name, count in held.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--taus", default="0,2,10", help="correlation times to try, in seconds")
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.requests, args.seconds, args.taus = 4, 600, 60.0, args.taus.split(",")[0]
    print(f"{args.pairs} pairs of {args.requests:,} requests over {args.seconds:g} s; 95 % intervals")
    print(
        f"{'tau (s)':>8} {'shift':>7}  " + "  ".join(f"{n:>6}" for n in ("p50", "p95", "p99", "p999", "mean"))
    )
    for tau in (float(t) for t in args.taus.split(",")):
        for draw, shift in enumerate((0.0, -0.2)):  # each row its own draws
            start = time.perf_counter()
            found = coverage(args.pairs, args.requests, args.seconds, shift, tau, args.seed + draw)
            cells = "  ".join(f"{found[n]:6.3f}" for n in ("p50", "p95", "p99", "p999", "mean"))
            print(f"{tau:8g} {shift:7g}  {cells}   ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
