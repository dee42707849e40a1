"""One refresh cycle of the live view on a one-hour window: sample, re-analyse, redraw.

    python benchmarks/bench_live.py [--requests 40000] [--gpus 8] [--cycles 5]

Builds an hour-long dump (1 Hz host and GPU tables, a co-located job every
4 minutes), opens the live view headless on it with a one-hour window, and
times each part of a cycle as the view runs it: the window cut and its 1 s
signals (the sampler worker, every second), the full analysis (the analysis
worker, every few seconds), and applying both to the widgets until the screen
has been redrawn (the UI thread). The UI thread's share is what decides
whether the screen can freeze; the workers run beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_file import make_dump  # noqa: E402
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.detect.signals import build_signals  # noqa: E402
from diagnose.dump import load_dump  # noqa: E402
from diagnose.judge import default_rules_dir, load_rules  # noqa: E402
from diagnose.live.app import Analysed, LiveApp, LiveSettings, Sampled  # noqa: E402
from diagnose.live.feed import ReplayFeed  # noqa: E402
from diagnose.live.panels import top_processes  # noqa: E402
from diagnose.pipeline import analyse_dump  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=40_000, help="requests in the hour")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=5)
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.requests, args.gpus, args.cycles = 2_000, 1, 1
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "hour"
        make_dump(folder, args.requests, 1.0, args.gpus, ".csv", job_period_s=240)
        dump = load_dump(str(folder))
    rules = load_rules(default_rules_dir())
    feed = ReplayFeed(dump, speed=0.0, from_start=False)
    sample_s, analysis_s, redraw_s = [], [], []
    for _ in range(args.cycles):
        started = time.perf_counter()
        window = feed.window(3600.0)
        signals = {s.name: s for s in build_signals(window, window.server_pids)}
        processes = top_processes(window)
        sample_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        analysis = analyse_dump(window, rules)
        analysis_s.append(time.perf_counter() - started)
    redraw_s = asyncio.run(_redraws(feed, rules, window, signals, processes, analysis, args.cycles))
    rows = [
        ("window cut + 1 s signals (sampler worker)", sample_s),
        ("full analysis (analysis worker)", analysis_s),
        ("apply results + redraw (UI thread)", redraw_s),
    ]
    print(f"one-hour window: {sum(len(t) for t in window.tables.values()):,} rows, {len(signals)} signals")
    for label, times in rows:
        print(
            f"{label:<45} median {statistics.median(times) * 1000:8.1f} ms   max {max(times) * 1000:8.1f} ms"
        )
    cycle = statistics.median(sample_s) + statistics.median(analysis_s) + statistics.median(redraw_s)
    print(f"{'one refresh cycle, end to end':<45} median {cycle * 1000:8.1f} ms")


async def _redraws(feed, rules, window, signals, processes, analysis, cycles: int) -> list[float]:
    app = LiveApp(feed, LiveSettings(rules, window_s=3600.0, refresh_s=3600.0))
    times = []
    async with app.run_test(size=(200, 60)) as pilot:
        while app.report is None:
            await pilot.pause(0.1)
        for _ in range(cycles):
            started = time.perf_counter()
            app.on_sampled(Sampled(window, signals, feed.state(), processes))
            app.on_analysed(Analysed(analysis, 0.0, window))
            await pilot.pause()
            await asyncio.sleep(0)
            times.append(time.perf_counter() - started)
    return times


if __name__ == "__main__":
    main()
