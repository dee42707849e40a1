"""Does the diagnosis hold on dumps its rules were not tuned on? The second generator's variations.

    python benchmarks/bench_robustness.py [--seeds 3]

Every variation of ``fixtures/variations.py`` (its own code, none of the first
simulator's) is drawn with ``--seeds`` seeds and analysed as ``diagnose file``
does. Per cause: AC@1 and AC@3 (is the true cause first, in the top three),
the rank each draw gave it, and what ranked above it; for healthy dumps and
near misses, every hypothesis scoring 0.5 or more is a false alarm.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.pipeline import analyse  # noqa: E402
from fixtures.variations import VARIATIONS, Variation, write_variation  # noqa: E402

LIKELY = 0.5


def run(seeds: int, variations: list[Variation] = VARIATIONS) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for variation in variations:
            for seed in range(1, seeds + 1):
                folder = write_variation(variation, Path(scratch) / f"{variation.name}-{seed}", seed=seed)
                report = analyse(str(folder))
                ids = [h.id for h in report.hypotheses]
                likely = [f"{h.id} {h.score:.2f}" for h in report.hypotheses if h.score >= LIKELY]
                rank = ids.index(variation.cause) + 1 if variation.cause in ids else None
                rows.append(
                    {
                        "variation": variation.name,
                        "cause": variation.cause,
                        "what": variation.what,
                        "seed": seed,
                        "rank": rank,
                        "above": ids[: (rank or len(ids) + 1) - 1][:3],
                        "likely": likely,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3)
    add_quick(parser)
    args = parser.parse_args()
    variations = VARIATIONS[:4] if args.quick else VARIATIONS
    rows = run(1 if args.quick else args.seeds, variations)
    print("| variation | cause | AC@1 | AC@3 | ranks | ranked above it / likely findings |")
    print("|---|---|---|---|---|---|")
    for variation in variations:
        mine = [r for r in rows if r["variation"] == variation.name]
        if variation.cause:
            ranks = [r["rank"] for r in mine]
            ac1 = sum(r == 1 for r in ranks) / len(ranks)
            ac3 = sum(r is not None and r <= 3 for r in ranks) / len(ranks)
            above = sorted({a for r in mine for a in r["above"]})
            shown = ", ".join("-" if r is None else str(r) for r in ranks)
            figures = f"{ac1:.2f} | {ac3:.2f} | {shown}"
            print(f"| {variation.name} | {variation.cause} | {figures} | {', '.join(above)} |")
        else:
            alarms = sorted({a for r in mine for a in r["likely"]})
            print(f"| {variation.name} | (none) | | | | {'; '.join(alarms) or 'quiet'} |")
    causes = [r for r in rows if r["cause"]]
    quiet = [r for r in rows if not r["cause"]]
    print(
        f"\noverall: AC@1 {sum(r['rank'] == 1 for r in causes) / len(causes):.2f}, "
        f"AC@3 {sum(r['rank'] is not None and r['rank'] <= 3 for r in causes) / len(causes):.2f} over "
        f"{len(causes)} cause draws; {sum(bool(r['likely']) for r in quiet)} of {len(quiet)} quiet draws "
        "with a likely finding"
    )


if __name__ == "__main__":
    main()
