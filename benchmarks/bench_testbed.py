"""The diagnosis judged on a real service with real faults: every testbed scenario, recorded and scored.

    pip install '.[testbed]'
    python benchmarks/bench_testbed.py                       # every scenario, each its default length
    python benchmarks/bench_testbed.py --duration 3m --seeds 2 --out runs/
    python benchmarks/bench_testbed.py --duration 4m --first-seed 2  # draws no rule was mended on
    python benchmarks/bench_testbed.py --only cpu-bound-stage healthy-low
    python benchmarks/bench_testbed.py --duration 4m --seeds 5 --first-seed 101 --burners 1  # beside a burner
    python benchmarks/bench_testbed.py --only cpu-bound-stage --twins   # and its healthy twin, same seeds
    python benchmarks/bench_testbed.py --engine --duration 4m --twins   # llama.cpp's server (llm-*)

Runs each scenario with ``python -m testbed run`` (one at a time: they share
the machine's cores, which is the point), then prints the score table of
``python -m testbed score``: per run the injected cause's rank and score, AC@1
(first with a score of at least 0.5), AC@3, and the likely hypotheses on the
healthy runs. Scenarios this machine cannot run (memory-swapping without swap)
are listed as skipped with the reason, and those whose fault this service cannot
show above the machine's noise (profiler-overhead) as left out, with the
measurements that say so; ``--only`` runs them. ``--burners N`` runs N processes
that spin on a core each beside every run, as a busy host would. Takes a few
minutes a scenario: not for CI. Its per-scenario table (runs right, the cause's
score from lowest to highest, what came first instead) is the check of record
for a change to a rule, a fact or the score map (docs/testbed.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.testbed_options import add_run_options, run_seconds  # noqa: E402
from diagnose.units import counted  # noqa: E402
from testbed.llm.scenarios import ENGINE_SCENARIOS  # noqa: E402
from testbed.scenarios import SCENARIOS  # noqa: E402

KNOWN = {**SCENARIOS, **ENGINE_SCENARIOS}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_options(parser)
    parser.add_argument(
        "--burners", type=int, default=0, help="processes spinning on a core each beside every run"
    )
    parser.add_argument(
        "--twins",
        action="store_true",
        help="also run each faulty scenario's healthy twin (testbed run --without-fault) on the same seeds",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="the real text-generation engine's scenarios (llm-*, llama.cpp's server; built on first use)",
    )
    args = parser.parse_args()
    if args.quick:
        args.only, args.duration = args.only or ["healthy-low"], args.duration or "6s"
    group = ENGINE_SCENARIOS if args.engine else SCENARIOS
    names = args.only or [n for n, s in group.items() if not s.benchmark_skip]
    for name in [] if args.only else [n for n, s in group.items() if s.benchmark_skip]:
        print(f"left out {name}: {group[name].benchmark_skip}")
    unknown = [n for n in names if n not in KNOWN]
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    duration_s = run_seconds(parser, args)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-testbed-"))
    out.mkdir(parents=True, exist_ok=True)
    spin = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(spin) for _ in range(args.burners)]
    try:
        _run_all(args, names, duration_s, out)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    if burners:
        print(f"beside {counted(len(burners), 'CPU burner')}")
    subprocess.run([sys.executable, "-m", "testbed", "score", str(out)], cwd=ROOT, check=False)
    print(f"runs kept in {out}")


def _run_all(args: argparse.Namespace, names: list[str], duration_s: float | None, out: Path) -> None:
    for name in names:
        if (reason := KNOWN[name].unavailable()) is not None:
            print(f"skipped {name}: {reason}")
            continue
        twins = [False, True] if args.twins and KNOWN[name].cause is not None else [False]
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for twin in twins:
                folder = out / f"{name}{'-fixed' if twin else ''}-s{seed}"
                command = [sys.executable, "-m", "testbed", "run", name, "--out", str(folder)]
                command += ["--seed", str(seed), *(["--without-fault"] if twin else [])]
                if duration_s is not None:
                    command += ["--duration", f"{max(duration_s, KNOWN[name].min_duration_s):g}s"]
                began = time.monotonic()
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
                took = time.monotonic() - began
                status = "ok" if done.returncode == 0 else f"failed ({done.stderr.strip()[-200:]})"
                print(f"{folder.name}: {status} in {took:.0f} s", flush=True)


if __name__ == "__main__":
    main()
