"""How long spike analysis takes on a day at 1 Hz, against running ruptures directly.

    python benchmarks/bench_spikes.py                 # a day, 1 M requests, 8 GPUs (~50 signals)
    python benchmarks/bench_spikes.py --baseline-signals 1

Builds a day-long dump with a co-located job every 4 minutes, loads it, then
times `analyse_spikes` (signals, episodes, change points, periodicity and
alignment for every signal) against ruptures' documented default usage,
`Pelt(model="l2").fit(signal).predict(pen=...)`, on a few of the same raw
signals (each takes tens of seconds, so only a few are run). The penalty
given to PELT is the one our level-shift search uses, 3 sigma^2 ln(n), so
both answer the same question. Prints the per-signal time of each and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import ruptures as rpt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_file import make_dump  # noqa: E402
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.detect import analyse_spikes  # noqa: E402
from diagnose.detect.robust import difference_sigma  # noqa: E402
from diagnose.detect.shifts import LEVELS  # noqa: E402
from diagnose.dump import load_dump  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument(
        "--baseline-signals",
        type=int,
        default=1,
        help="raw signals to run PELT on (the second, GPU utilisation, ran over 10 minutes here)",
    )
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.hours, args.requests = 0.5, 20_000
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "dump"
        make_dump(folder, args.requests, args.hours, gpus=8, fmt="parquet", job_period_s=240)
        dump = load_dump(str(folder))
    start = time.perf_counter()
    analysis = analyse_spikes(dump)
    ours = time.perf_counter() - start
    signals = len(analysis.findings)
    episodes = sum(len(f.episodes) for f in analysis.findings.values())
    print(
        f"analyse_spikes: {signals} signals of {args.hours:g} h, {ours:.2f} s in all "
        f"({ours / signals * 1000:.0f} ms a signal); {episodes} episodes, "
        f"{len(analysis.alignments)} alignments; reference {analysis.reference}"
    )
    found = analysis.findings.get(analysis.reference or "")
    if found is not None and found.periodicity is not None:
        p = found.periodicity
        print(
            f"  latency episodes: {len(found.episodes)}, period {p.period_s:.1f} s +- {p.jitter_s:.1f} s, "
            f"p = {p.p_value:.3f}"
        )
    if analysis.alignments:
        top = analysis.alignments[0]
        print(
            f"  best alignment: {top.b}: coincidence {top.coincidence:.2f}, locked {top.locked:.2f}, "
            f"lag {top.lag_s:+.1f} s, p = {top.p_value:.3f}"
        )
    names = ["requests.latency_ms.p99", "gpu.util_pct[gpu=0]", "system.cpu_pct"][: args.baseline_signals]
    times = []
    for name in names:
        values = (
            pd.Series(analysis.findings[name].signal.values).interpolate(limit_direction="both").to_numpy()
        )
        penalty = (LEVELS.params + 2) * difference_sigma(values) ** 2 * np.log(values.size)
        start = time.perf_counter()
        bkps = rpt.Pelt(model="l2").fit(values).predict(pen=penalty)
        times.append(time.perf_counter() - start)
        print(
            f"ruptures Pelt(model='l2') on {name} ({values.size:,} points): {times[-1]:.1f} s, "
            f"{len(bkps) - 1} change points"
        )
    if not times:
        return
    baseline = float(np.mean(times))
    print(
        f"per signal: analyse_spikes {ours / signals:.3f} s, Pelt l2 {baseline:.1f} s; "
        f"ratio {baseline / (ours / signals):,.0f}x"
    )


if __name__ == "__main__":
    main()
