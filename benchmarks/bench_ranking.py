"""How well the diagnosis ranks the true cause: AC@1, AC@3 and Avg@5 over labelled scenarios.

    python benchmarks/bench_ranking.py [--seeds 3]

Every scenario of fixtures/generate.py is drawn with ``--seeds`` seeds, and
each cause scenario also without its optional tables that the cause does not
need (a poorer dump must still be diagnosed), then analysed with
``diagnose file --format json``. AC@k is the share of a case's true causes
found among the top k hypotheses, |top k & true| / min(k, |true|), averaged
over cases (for one cause: whether it is in the top k); Avg@5 is the mean of
AC@1..AC@5 (the standard root-cause-analysis measures). A two-cause case
counts under each of its causes. Healthy and look-alike dumps count a false
alarm for every hypothesis scoring 0.5 or more.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from fixtures.generate import SCENARIOS, write_scenario  # noqa: E402

# Tables a cause's own evidence does not need; dropping them makes the "thin" variant.
_OPTIONAL = ("allocator", "gpu_processes", "processes", "system")
_NEEDS = {
    "memory-fragmentation": {"allocator"},
    "co-located-contention": {"processes", "gpu_processes", "system"},
    "cpu-bound-stage": {"processes", "system"},
    "memory-swapping": {"processes", "system"},
    "over-parallelism": {"processes", "system"},
    "memory-cleanup-per-request": {"allocator", "processes"},
}


def _ranks(report: dict, causes: set[str]) -> list[int | None]:
    ids = [h["id"] for h in report["hypotheses"]]
    return [ids.index(cause) + 1 if cause in ids else None for cause in sorted(causes)]


def _analyse(folder: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(folder), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3)
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.seeds = 1
    ranks: dict[str, list[list[int | None]]] = defaultdict(list)
    cases: list[list[int | None]] = []  # each case once, for the overall figures
    false_alarms, quiet_cases = 0, 0
    with tempfile.TemporaryDirectory() as scratch:
        for scenario in SCENARIOS[:4] if args.quick else SCENARIOS:
            variants = [scenario]
            if scenario.expected:
                keep = tuple(
                    t
                    for t in scenario.tables
                    if t not in _OPTIONAL or t in _NEEDS.get(scenario.expected, set())
                )
                variants.append(replace(scenario, name=f"{scenario.name}-thin", tables=keep))
            for variant in variants:
                for seed in range(1, args.seeds + 1):
                    folder = write_scenario(
                        variant, Path(scratch) / f"{variant.name}-{seed}", seed=100 + seed
                    )
                    report = _analyse(folder)
                    if variant.expected:
                        found = _ranks(report, {variant.expected, *variant.also})
                        cases.append(found)
                        for cause in {variant.expected, *variant.also}:
                            ranks[cause].append(found)
                    else:
                        quiet_cases += 1
                        false_alarms += sum(h["score"] >= 0.5 for h in report["hypotheses"])
    print(f"{'root cause':<28} {'cases':>5} {'AC@1':>6} {'AC@3':>6} {'Avg@5':>6}")
    for cause, found in sorted(ranks.items()):
        print(f"{cause:<28} {len(found):>5} " + " ".join(f"{v:>6.2f}" for v in _scores(found)))
    print(f"{'overall':<28} {len(cases):>5} " + " ".join(f"{v:>6.2f}" for v in _scores(cases)))
    print(f"healthy and look-alike dumps: {quiet_cases}, hypotheses scoring >= 0.5 on them: {false_alarms}")


def _scores(cases: list[list[int | None]]) -> tuple[float, float, float]:
    def at(k: int) -> float:
        per_case = [
            sum(rank is not None and rank <= k for rank in ranks) / min(k, len(ranks)) for ranks in cases
        ]
        return sum(per_case) / len(per_case)

    return at(1), at(3), sum(at(k) for k in range(1, 6)) / 5


if __name__ == "__main__":
    main()
