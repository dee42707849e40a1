"""Does ``diagnose verify`` confirm the injected cause while the testbed's fault runs, and nothing else?

    pip install '.[testbed]'
    python benchmarks/bench_verify.py --out runs/verify                  # the faults verify can check
    python benchmarks/bench_verify.py --only cpu-bound-stage healthy-high --duration 3m

For each scenario, the testbed run goes on in the background (``python -m
testbed run``) and, from ``--after`` seconds in, ``diagnose verify`` runs on
its dump as recorded so far, every ``--every`` seconds until the run ends: the
dump's likely hypotheses and its runner-up, each check's probe on this host,
now, against the live service. A row: how many of those verifications
confirmed the injected cause (and the first time one did), what became of
the runner-up (confirmed, refuted, left open), and for a healthy run whether
anything was confirmed. Takes the runs' length: not for CI (``--quick`` is one
short run).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.testbed_options import PlannedRun, add_run_options, planned_runs  # noqa: E402
from diagnose.verify.processes_now import SAMPLES  # noqa: E402
from testbed.scenarios import SCENARIOS  # noqa: E402

# The faults with a check a read-only probe can make on this testbed (CPU-only: no NVML, no engine
# preemptions), and a healthy run. The others' rules list no check, or one this host cannot answer.
CHECKABLE = (
    "cpu-bound-stage",
    "cpu-bound-stage-event-loop",
    "over-parallelism",
    "memory-cleanup-per-request",
    "memory-swapping",
    "cold-start-contamination",
    "co-located-contention",
    "healthy-high",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_options(parser)
    parser.add_argument("--after", type=float, default=60.0, help="first verify this many s in (default 60)")
    parser.add_argument("--every", type=float, default=20.0, help="then every this many s (default 20)")
    parser.add_argument(
        "--reads",
        type=int,
        default=SAMPLES,
        help=f"seconds /proc is read, and dumps py-spy takes (default {SAMPLES})",
    )
    args = parser.parse_args()
    if args.quick:  # one short run, its probes reading two seconds: that it all runs, not what it finds
        args.only, args.duration, args.after = args.only or ["cpu-bound-stage-event-loop"], "12s", 12.0
        args.reads = 2
    names = args.only or [n for n in CHECKABLE if SCENARIOS[n].unavailable() is None]
    rows = []
    for run in planned_runs(parser, args, names, "bench-verify-"):
        rows.append(_run(run, args))
        print(rows[-1], flush=True)  # each row as its run ends: a sweep cut short keeps what it found
    print()
    print("| scenario | injected | verify runs | confirmed the cause | first at | runner-up (outcomes) |")
    print("|---|---|---:|---:|---:|---|")
    for row in rows:
        print(row)


def _run(run: PlannedRun, args: argparse.Namespace) -> str:
    name, folder = run.scenario.name, run.folder
    command = [sys.executable, "-m", "testbed", "run", name, "--out", str(folder), "--seed", str(run.seed)]
    command += ["--duration", f"{run.length_s:.0f}s", "--quiet"]
    print(f"$ {' '.join(command[1:])}", flush=True)
    testbed = subprocess.Popen(command, cwd=ROOT)  # noqa: S603 - our own module
    started = time.monotonic()
    verdicts: list[tuple[float, dict]] = []
    next_at = args.after
    while testbed.poll() is None:
        time.sleep(1.0)
        since = time.monotonic() - started
        if since < next_at or not (folder / "dump" / "manifest.yaml").exists():
            continue
        verdicts.append((since, _verify(folder / "dump", args.reads)))
        next_at = since + args.every
    return _row(name, run.scenario.cause, verdicts)


def _verify(dump: Path, reads: int) -> dict:
    from diagnose.verify import Host, verify

    try:
        found = verify(str(dump), host=Host(samples=reads))
    except Exception as error:  # noqa: BLE001 - a dump cut mid-write is a row saying so, not a crash
        return {"error": f"{type(error).__name__}: {error}"}
    return {
        item.cause: Counter(check.outcome for check in item.checks) or Counter({"no check": 1})
        for item in found.verified
    }


def _row(name: str, cause: str | None, verdicts: list[tuple[float, dict]]) -> str:
    confirmed = [at for at, v in verdicts if cause and v.get(cause, Counter())["confirms"]]
    others: Counter[str] = Counter()
    for _, verdict in verdicts:
        for other, outcomes in verdict.items():
            if other not in (cause, "error"):
                others.update(f"{other} {outcome}" for outcome in outcomes.elements())
    errors = sum("error" in v for _, v in verdicts)
    first = f"{confirmed[0]:.0f} s" if confirmed else "-"
    rest = ", ".join(f"{k} x{n}" for k, n in sorted(others.items())) or "none"
    if errors:
        rest += f"; {errors} verify runs failed"
    return (
        f"| {name} | {cause or 'healthy'} | {len(verdicts)} | {len(confirmed) if cause else '-'} | {first} "
        f"| {rest} |"
    )


if __name__ == "__main__":
    main()
