"""False episodes on healthy evidence: how many spikes the search finds where nothing happened.

    python benchmarks/bench_false_episodes.py
    python benchmarks/bench_false_episodes.py --runs testbed-runs/   # also your own healthy testbed runs

Every episode found on a dump whose truth is "healthy" is a false one. The
real evidence is the testbed's healthy recordings committed under
``fixtures/`` (a real service, recorded by ``diagnose record``: ``truth.yaml``
with ``cause: null``); the second generator's quiet variations (its own code,
seeds 1-3) are reported beside them. Per signal family (the table and column,
whatever process or GPU): signal-hours searched, episodes, and episodes per
signal-hour, with the total per dump-hour; and of them the unusual ones (not
like the signal's routine, diagnose/detect/routine.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.pipeline import analyse_path  # noqa: E402
from fixtures.variations import VARIATIONS, write_variation  # noqa: E402


def recorded_healthy(folder: Path) -> list[Path]:
    """The real recordings under ``folder`` whose truth is healthy."""
    found = []
    for truth in sorted(folder.rglob("*truth.yaml")):
        if yaml.safe_load(truth.read_text()).get("cause") is None:
            dump = truth.parent / ("dump" if truth.name == "truth.yaml" else truth.name.split(".")[0])
            if dump.is_dir():
                found.append(dump)
    return found


def count(dumps: list[Path]) -> tuple[dict[str, list[float]], float]:
    """Per signal family: [signal-hours, episodes, unusual episodes]; and the dump-hours searched."""
    families: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    hours = 0.0
    for dump in dumps:
        _, analysis = analyse_path(str(dump))
        spikes = analysis.spikes
        hours += (spikes.span[1] - spikes.span[0]) / 3600
        for name, found in spikes.findings.items():
            family = name.split("[")[0]
            families[family][0] += found.signal.values.size * found.signal.step / 3600
            families[family][1] += len(found.episodes)
            families[family][2] += len(found.routine) - sum(found.routine)
    return dict(families), hours


def table(title: str, dumps: list[Path]) -> None:
    families, hours = count(dumps)
    total = sum(entry[1] for entry in families.values())
    unusual = sum(entry[2] for entry in families.values())
    print(f"\n{title}: {len(dumps)} dumps, {hours:.2f} h; {total:.0f} episodes, ", end="")
    print(f"{total / hours:.1f} per dump-hour; unusual {unusual:.0f}, {unusual / hours:.1f} per dump-hour")
    print("| signal family | signal-hours | episodes | per signal-hour | unusual | per signal-hour |")
    print("|---|---|---|---|---|---|")
    for family, (signal_hours, episodes, odd) in sorted(families.items(), key=lambda item: -item[1][1]):
        if episodes:
            print(
                f"| {family} | {signal_hours:.2f} | {episodes:.0f} | {episodes / signal_hours:.1f} "
                f"| {odd:.0f} | {odd / signal_hours:.1f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=Path, nargs="+", default=[], help="folders of testbed runs to count too (truth.yaml)"
    )
    add_quick(parser)
    args = parser.parse_args()
    recorded = recorded_healthy(ROOT / "fixtures")
    table("real healthy recordings (the testbed's, committed)", recorded[:2] if args.quick else recorded)
    if args.runs:
        runs = [dump for folder in args.runs for dump in recorded_healthy(folder)]
        table(f"real healthy recordings (testbed runs under {', '.join(map(str, args.runs))})", runs)
    quiet = [v for v in VARIATIONS if v.cause is None][: 4 if args.quick else None]
    with tempfile.TemporaryDirectory() as scratch:
        drawn = [
            write_variation(v, Path(scratch) / f"{v.name}-{seed}", seed=seed)
            for v in quiet
            for seed in ((1,) if args.quick else (1, 2, 3))
        ]
        table("the second generator's quiet variations", drawn)


if __name__ == "__main__":
    main()
