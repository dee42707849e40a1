"""Every benchmark in quick mode: small inputs, seconds each, so that one that breaks fails CI.

A quick run checks that a benchmark still runs end to end against today's code; its figures mean
nothing. The figures the README and docs quote come from full runs (each script without --quick).

    python -m benchmarks.quick                      # every benchmarks/bench_*.py
    python -m benchmarks.quick bench_live bench_file
    python -m benchmarks.quick --jobs 2             # those in ALONE one by one, beside the rest (CI)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK_HELP = "small inputs, seconds: check that the benchmark runs (what CI does); the figures mean nothing"
_TIMEOUT_S = 300  # a quick run that takes longer is broken in its own way
# Benchmarks that start a service, a recorder or a load and time them: with --jobs they run one at a
# time in a lane of their own, never two at once (two loads and two services on two cores would make a
# load engine late, which stops a sweep and fails the quick run), beside the benchmarks that compute on
# files.
ALONE = frozenset(
    {"bench_gain", "bench_live", "bench_load", "bench_record", "bench_serve", "bench_testbed", "bench_verify"}
)


def add_quick(parser: argparse.ArgumentParser) -> None:
    """The ``--quick`` option every benchmark has."""
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)


def benchmarks() -> list[str]:
    return sorted(path.stem for path in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", metavar="BENCHMARK", help="only these (default: all)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="benchmarks run at once: those in ALONE one after another in one lane, the rest in the others "
        "(default 1)",
    )
    args = parser.parse_args(argv)
    names = args.names or benchmarks()
    unknown = sorted(set(names) - set(benchmarks()))
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)}; they are: {', '.join(benchmarks())}")
    if args.jobs < 1:
        parser.error("--jobs is 1 or more")
    alone = [name for name in names if name in ALONE]
    shared = [name for name in names if name not in ALONE]
    if args.jobs == 1:
        outcomes = [_run(name) for name in names]
    else:
        with ThreadPoolExecutor(max_workers=1) as lane, ThreadPoolExecutor(max_workers=args.jobs - 1) as rest:
            alone_done = lane.submit(lambda: [_run(name) for name in alone])
            outcomes = [*rest.map(_run, shared), *alone_done.result()]
    failed = []
    for name, seconds, problem in outcomes:
        print(f"{'ok  ' if problem is None else 'FAIL'} {name} ({seconds:.0f} s)")
        if problem is not None:
            print("     " + problem.strip().replace("\n", "\n     "))
            failed.append(name)
    print(f"{len(names) - len(failed)} of {len(names)} benchmarks ran in quick mode")
    return 1 if failed else 0


def _run(name: str) -> tuple[str, float, str | None]:
    """One benchmark in quick mode: its name, its seconds, and what went wrong (None if nothing)."""
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, str(HERE / f"{name}.py"), "--quick"],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
        )
        problem = None if result.returncode == 0 else f"exit {result.returncode}\n{result.stderr[-2000:]}"
    except subprocess.TimeoutExpired:
        problem = f"still running after {_TIMEOUT_S} s"
    return name, time.perf_counter() - started, problem


if __name__ == "__main__":
    raise SystemExit(main())
