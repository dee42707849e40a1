"""The expected gain judged on a real service: each testbed fault recorded with and without its fault.

    pip install '.[testbed]'
    python benchmarks/bench_gain.py --out runs/gain            # every fault with a counterfactual
    python benchmarks/bench_gain.py --only cold-start-contamination --seeds 2 --first-seed 20

For every testbed scenario whose cause has an expected gain (diagnose/gain),
two runs with the same seed: the fault as the scenario injects it, and the
same service, load and seed without it (``python -m testbed run --without-fault``:
no restart, no co-located job, the batch window the remedy sets). The
expected gain is the fault run's own counterfactual for its cause; the
measured gain is what ``diagnose compare FAULT FIXED --expects CAUSE`` says
the fix delivered (every request, the cold ones too). A row is *within* where
the measured change of P99 lies in the expected change's interval. Takes the
runs' length twice per scenario and seed: not for CI.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.testbed_options import add_run_options, planned_runs  # noqa: E402
from diagnose.gain import counterfactual_causes  # noqa: E402
from testbed.scenarios import SCENARIOS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_options(parser)
    parser.add_argument("--score-only", action="store_true", help="score the pairs already under --out")
    args = parser.parse_args()
    if args.quick:
        args.only, args.duration = args.only or ["cold-start-contamination"], args.duration or "6s"
    names = args.only or [
        name
        for name, s in SCENARIOS.items()
        if s.cause in counterfactual_causes() and not s.benchmark_skip and s.unavailable() is None
    ]
    rows = []
    for run in planned_runs(parser, args, names, "bench-gain-"):
        name, seed = run.scenario.name, run.seed
        pair = [run.folder, run.folder.with_name(f"{run.folder.name}-fixed")]
        if not args.score_only:
            for folder, fixed in zip(pair, (False, True), strict=True):
                if folder.exists():
                    continue
                command = [sys.executable, "-m", "testbed", "run", name, "--out", str(folder)]
                command += ["--seed", str(seed), "--duration", f"{run.length_s:.0f}s"]
                command += ["--without-fault"] if fixed else []
                print(f"$ {' '.join(command[1:])}", flush=True)
                subprocess.run(command, cwd=ROOT, check=False)
        rows.append(_row(name, run.scenario.cause, seed, pair[0] / "dump", pair[1] / "dump"))
    print()
    print(
        "| scenario | seed | expected P99 change [interval] | measured P99 change [interval] "
        "| share | within |"
    )
    print("|---|---:|---|---|---:|---|")
    for row in rows:
        print(row)
    judged = [r for r in rows if r.endswith(("| yes |", "| no |"))]
    within = sum(r.endswith("| yes |") for r in judged)
    print(f"\nwithin the expected interval: {within} of {len(judged)}")


def _row(name: str, cause: str, seed: int, fault: Path, fixed: Path) -> str:
    from diagnose.compare import compare_evidence, measure_path

    if not (fault.is_dir() and fixed.is_dir()):
        return f"| {name} | {seed} | - | - | - | a run is missing |"
    before, _ = measure_path(str(fault))
    after, requests = measure_path(str(fixed))
    if cause not in before.gains:
        diagnosed = ", ".join(f"{i} {s:.2f}" for i, s in before.hypotheses[:3]) or "nothing"
        return f"| {name} | {seed} | no expected gain (diagnosed: {diagnosed}) | - | - | - |"
    delivery = compare_evidence(before, after, requests, None, cause).delivery
    p99 = next((f for f in delivery.figures if f.name == "p99"), None) if delivery else None
    if p99 is None or p99.measured is None:
        return f"| {name} | {seed} | - | - | - | no P99 |"
    bounds = (p99.expected_low, p99.expected_high)
    inside = None not in bounds and bounds[0] <= p99.measured <= bounds[1]
    share = "-" if p99.share is None else f"{p99.share:.0%}"
    return (
        f"| {name} | {seed} | {_pct(p99.expected, p99.expected_low, p99.expected_high)} | "
        f"{_pct(p99.measured, p99.measured_low, p99.measured_high)} | {share} | {'yes' if inside else 'no'} |"
    )


def _pct(value: float, low: float | None, high: float | None) -> str:
    text = f"{value:+.1%}"
    return text if low is None or high is None else f"{text} [{low:+.1%}, {high:+.1%}]"


if __name__ == "__main__":
    main()
